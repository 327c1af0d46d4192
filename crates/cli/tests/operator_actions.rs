//! What operators changed, through the real daemon and CLI: every change made through the API is
//! recorded with the operator who made it (`open-conduit audit --operators`), a replayed request
//! once, a refused or read-only request not at all, and never a token.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;

/// Issues a credential for `name` and writes it where `--token-file` can name it.
fn token_file(daemon: &Daemon, name: &str, role: &str) -> (String, Value) {
    let issued = daemon.json(&["auth", "operators", "add", name, "--role", role]);
    let file = daemon.scratch().join(format!("{name}.token"));
    std::fs::write(&file, issued["token"].as_str().unwrap()).unwrap();
    (file.display().to_string(), issued)
}

fn actions(daemon: &Daemon, args: &[&str]) -> Vec<(String, String)> {
    let listed = daemon.json(&[&["audit", "--operators"], args].concat());
    let items = listed["items"].as_array().unwrap();
    items
        .iter()
        .map(|a| {
            (
                a["principal"].as_str().unwrap().to_owned(),
                a["route"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_change_is_recorded_with_the_operator_who_made_it() {
    let daemon = Daemon::start(Some(&shell_config("os wait --for demo.go")));
    let (adm, adm_issued) = token_file(&daemon, "adm", "admin");
    let (ops, ops_issued) = token_file(&daemon, "ops", "operate");
    let as_ops = |args: &[&str]| daemon.json(&[&["--token-file", ops.as_str()], args].concat());
    let work = as_ops(&["work", "create", "--scope", "demo", "--binding", "shell"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    daemon.await_work(&work, "waiting");
    as_ops(&["work", "hold", &work]);
    let (refused, _) = daemon.json_unchecked(&["--token-file", &ops, "work", "hold", &work]);
    assert_eq!(refused, Some(1), "held already: refused, so not recorded");
    let file = daemon.config_file().display().to_string();
    daemon.json(&["--token-file", &adm, "config", "validate", &file]);
    let applied = daemon.json(&[
        "--token-file",
        &adm,
        "config",
        "set",
        "/limits",
        r#"{"causal_max_depth": 9}"#,
    ]);

    let auth = format!("Bearer {}", daemon.operator_token());
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Idempotency-Key", "release-once"),
    ];
    let release = format!("/v1/work/{work}/release");
    for _ in 0..2 {
        assert_eq!(
            http_raw(&daemon.management_socket(), "POST", &release, &headers, "{}").0,
            200
        );
    }

    assert_eq!(
        actions(&daemon, &[]),
        [
            ("operator:local", "POST /v1/auth/operators"),
            ("operator:local", "POST /v1/auth/operators"),
            ("operator:ops", "POST /v1/work"),
            ("operator:ops", "POST /v1/work/{id}/hold"),
            ("operator:adm", "POST /v1/config/set"),
            ("operator:local", "POST /v1/work/{id}/release"),
        ]
        .map(|(p, r)| (p.to_owned(), r.to_owned())),
        "validate changes nothing; the replayed release is one record"
    );
    let listed = daemon.json(&["audit", "--operators", "--operator", "adm"]);
    let set = &listed["items"][0];
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(set["detail"]["generation"], applied["generation"]);
    assert_eq!(set["status"], 200);
    let added = &daemon.json(&["audit", "--operators"])["items"][0];
    assert_eq!(
        (added["detail"]["name"].as_str(), added["detail"]["role"].as_str()),
        (Some("adm"), Some("admin"))
    );
    let hold = &daemon.json(&["audit", "--operators", "--operator", "ops"])["items"][1];
    assert_eq!(hold["path"], format!("/v1/work/{work}/hold"));
    assert_eq!(hold["detail"]["work"], work.as_str());

    let everything = daemon.json(&["audit", "--operators"]).to_string();
    for issued in [&adm_issued, &ops_issued] {
        assert!(
            !everything.contains(issued["token"].as_str().unwrap()),
            "no token is kept"
        );
    }
    let human = daemon.cli(&["audit", "--operators"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("operator:adm") && l.contains("POST /v1/config/set")),
        "{text}"
    );
    let (status, _) = daemon.json_unchecked(&["audit", "--operators", "--work", &work]);
    assert_eq!(status, Some(2), "--operators takes no toolbelt filter");

    daemon.json(&["--token-file", &ops, "auth", "rotate"]);
    let rotated = std::fs::read_to_string(&ops).unwrap();
    assert_ne!(rotated.trim(), ops_issued["token"].as_str().unwrap());
    let (principal, route) = actions(&daemon, &[]).pop().unwrap();
    assert_eq!(
        (principal.as_str(), route.as_str()),
        ("operator:ops", "POST /v1/auth/rotate")
    );
    let everything = daemon.json(&["audit", "--operators"]).to_string();
    assert!(!everything.contains(rotated.trim()), "nor the rotated one");
}
