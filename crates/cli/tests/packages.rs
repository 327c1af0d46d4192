//! Installed packages through the real daemon and CLI: the RFC 0076 install gate (a granted
//! install, the refusal payload byte for byte, a non-gating host projecting requirements, a grant
//! tightened after approval), manifest refusals, name conflicts, and removal.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::{json, Value};

/// Writes a package directory: its manifest and an executable entry.
fn package(root: &Path, name: &str, requires: &[&str], operation: &str) -> PathBuf {
    let dir = root.join(format!("pkg-{name}"));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let manifest = json!({"name": name, "version": "1.0.0",
        "runtime": {"language": "process", "entry": "bin/run", "requires": requires},
        "provides": {"operations": [{"name": operation, "summary": "Do it.", "input_schema": {"type": "object"}, "safety_tier": "read"}]},
        "permissions": ["http.safeFetch"]});
    std::fs::write(dir.join("open-conduit.json"), manifest.to_string()).unwrap();
    std::fs::write(dir.join("bin/run"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(dir.join("bin/run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn install(daemon: &Daemon, dir: &Path) -> (Option<i32>, Value) {
    daemon.json_unchecked(&["package", "install", dir.to_str().unwrap()])
}

#[test]
fn a_granted_package_installs_and_shows_what_it_requires_and_asks_for() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "notes", &["clock"], "notes.view");
    let (status, listing) = install(&daemon, &dir);
    assert_eq!(status, Some(0), "{listing}");
    assert_eq!(listing["manifest"], "notes@1.0.0");
    assert_eq!(
        (listing["requires"].clone(), listing["status"].clone()),
        (json!(["clock"]), json!("ok"))
    );
    assert_eq!(listing["permissions"], json!(["http.safeFetch"]));
    assert_eq!(
        listing["approved"],
        json!({"grant": ["crypto", "clock"], "gating": true})
    );
    let copy = daemon.state.join("packages/notes/bin/run");
    assert_eq!(
        mode(&copy),
        0o700,
        "the installed copy is owner-only and keeps its execute bit"
    );

    let human = daemon.cli(&["package", "show", "notes"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("requires:    clock") && text.contains("permissions: http.safeFetch"),
        "{text}"
    );
    assert_eq!(daemon.json(&["package", "list"])["items"][0]["name"], "notes");

    assert_eq!(daemon.json(&["package", "remove", "notes"])["removed"], "notes");
    assert!(!daemon.state.join("packages/notes").exists());
    assert_eq!(
        daemon.json_unchecked(&["package", "show", "notes"]).1["error"],
        "not_found"
    );
}

#[test]
fn a_gating_host_refuses_an_unmet_requirement_with_exactly_the_rfc_payload() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "cron", &["clock", "subprocess"], "cron.schedule");
    let body = json!({"dir": dir}).to_string();
    let auth = format!("Bearer {}", daemon.operator_token());
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Idempotency-Key", "install-cron"),
    ];
    let response = http_response(&daemon.management_socket(), "POST", "/v1/packages", &headers, &body);
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    let payload = response.split("\r\n\r\n").nth(1).unwrap();
    assert!(
        payload.starts_with(
            r#"{"error":"pack_runtime_requirement_unmet","unmet":["subprocess"],"manifest":"cron@1.0.0","advice":""#
        ),
        "{payload}"
    );
    let keys: Vec<String> = serde_json::from_str::<Value>(payload)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 4, "exactly error, unmet, manifest, advice");

    let (status, envelope) = install(&daemon, &dir);
    assert_eq!(status, Some(1));
    assert_eq!(
        envelope,
        serde_json::from_str::<Value>(payload).unwrap(),
        "--json prints the API's envelope"
    );
    assert!(
        daemon.json(&["package", "list"])["items"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing installed"
    );
}

#[test]
fn a_non_gating_host_installs_and_projects_what_a_package_requires() {
    let daemon = Daemon::start(None);
    daemon.json(&["config", "set", "/packages", r#"{"gating": false}"#]);
    let dir = package(daemon.scratch(), "cron", &["subprocess", "fs.write"], "cron.schedule");
    let (status, listing) = install(&daemon, &dir);
    assert_eq!(status, Some(0), "{listing}");
    assert_eq!(listing["requires"], json!(["subprocess", "fs.write"]));
    assert_eq!(listing["approved"]["gating"], false);
    assert_eq!(listing["status"], "ok");
}

#[test]
fn a_grant_tightened_after_approval_flags_the_package() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "notes", &["clock"], "notes.view");
    assert_eq!(install(&daemon, &dir).0, Some(0));
    daemon.json(&["config", "set", "/packages", r#"{"grant": ["crypto"]}"#]);
    let listed = daemon.json(&["package", "list"])["items"][0].clone();
    assert_eq!(
        (listed["status"].as_str(), listed["unmet"].clone()),
        (Some("requirement_unmet"), json!(["clock"]))
    );
    assert_eq!(
        listed["approved"]["grant"],
        json!(["crypto", "clock"]),
        "the approval keeps what it was"
    );
    let doctor = daemon.json_unchecked(&["doctor"]).1;
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "packages")
        .cloned();
    assert_eq!(check.map(|c| c["status"].clone()), Some(json!("fail")), "{doctor}");

    daemon.json(&["config", "set", "/packages", r#"{"grant": ["crypto", "clock"]}"#]);
    assert_eq!(daemon.json(&["package", "list"])["items"][0]["status"], "ok");
}

#[test]
fn manifests_and_names_that_cannot_be_installed_are_refused() {
    let daemon = Daemon::start(None);
    let raw = package(daemon.scratch(), "raw", &["node:dns/promises"], "raw.op");
    let (status, refused) = install(&daemon, &raw);
    assert_eq!((status, refused["error"].as_str()), (Some(1), Some("invalid_manifest")));
    assert!(
        refused["message"].as_str().unwrap().contains("node:dns/promises"),
        "the token is named"
    );
    assert_eq!(refused["pointer"], "/runtime/requires/0");

    let outside = package(daemon.scratch(), "sneaky", &[], "notes.view");
    assert_eq!(
        install(&daemon, &outside).1["error"],
        "invalid_manifest",
        "an operation outside its namespace"
    );
    let host = package(daemon.scratch(), "http", &[], "http.get");
    assert_eq!(
        install(&daemon, &host).1["error"],
        "conflict",
        "the host's own registration name"
    );
    let missing = daemon.scratch().join("nothing-here");
    assert_eq!(install(&daemon, &missing).1["error"], "invalid_manifest");

    let linked = package(daemon.scratch(), "linked", &[], "linked.op");
    std::os::unix::fs::symlink("/etc/passwd", linked.join("passwd")).unwrap();
    assert_eq!(
        install(&daemon, &linked).1["error"],
        "invalid_manifest",
        "a symbolic link in the package"
    );
    assert!(!daemon.state.join("packages/linked").exists());
}
