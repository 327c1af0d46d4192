//! Configuration through the real daemon and CLI: check, validate, apply, set, generations across
//! restarts, live narrowing, and crashes injected at each step of apply.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

fn config_with(ceiling: &[&str], hold: &str) -> String {
    json!({
        "version": 1,
        "scopes": {"demo": {
            "authorization": {"operations": ceiling},
            "bindings": {"shell": {
                "executor": "shell",
                "config": {"command": ["/bin/sh", "-c", hold]},
                "operations": ceiling
            }}
        }}
    })
    .to_string()
}

const ALL: [&str; 5] = ["emit", "read_context", "declare_outcome", "wait", "create_work"];

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn config_check_reports_every_diagnostic_offline_without_echoing_values() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = r#"{"version": 1, "scopes": {"s": {"authorization": {"operations": ["emit", "hunter2-op"]},
        "bindings": {"b": {"executor": "shell", "config": {"command": ["x"]}, "operations": ["wait"]}}}},
        "limits": {"causal_max_depth": "hunter2"}}"#;
    let file = write(tmp.path(), "bad.json", bad);
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["config", "check", &file])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.starts_with("invalid"), "{text}");
    assert!(text.contains("/limits/causal_max_depth  error invalid_type"), "{text}");
    assert!(!text.contains("hunter2"), "a diagnostic echoed a value: {text}");

    let good = write(tmp.path(), "good.json", &config_with(&ALL, "true"));
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["config", "check", &good])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("valid (hash "));
}

#[test]
fn apply_narrows_a_live_token_at_once_and_survives_a_restart_despite_a_disk_edit() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let mut daemon = Daemon::start(Some(&config_with(&ALL, &hold)));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    assert_eq!(toolbelt_call(&socket, &token, "emit", json!({"type": "demo.x"})).0, 200);

    let narrowed = config_with(&["read_context", "declare_outcome"], &hold);
    let file = write(tmp.path(), "narrowed.json", &narrowed);
    let applied = daemon.json(&["config", "apply", &file, "--expected-generation", "1"]);
    assert_eq!(
        (applied["generation"].as_i64(), applied["changed"].as_bool()),
        (Some(2), Some(true))
    );
    let (status, body) = toolbelt_call(&socket, &token, "emit", json!({"type": "demo.x"}));
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("forbidden")),
        "narrowed on the very next call"
    );
    assert_eq!(toolbelt_call(&socket, &token, "read_context", json!({})).0, 200);

    let stale = daemon.cli(&["--json", "config", "apply", &file, "--expected-generation", "1"]);
    assert_eq!(stale.status.code(), Some(1));
    assert_eq!(
        serde_json::from_slice::<Value>(&stale.stdout).unwrap()["error"],
        "stale_generation"
    );

    let saved = daemon.config_file();
    assert_eq!(
        std::fs::read_to_string(&saved).unwrap(),
        narrowed,
        "apply saved the file"
    );
    let backup = saved.with_file_name("config.json.last-good");
    assert_eq!(mode(&saved), 0o600);
    assert_eq!(mode(&backup), 0o600);
    std::fs::write(&saved, config_with(&ALL, "true")).unwrap(); // a disk edit
    daemon.kill();
    daemon.launch();
    let health = daemon.json(&["health"]);
    assert_eq!(
        health["generation"], 2,
        "the committed generation, not the disk edit, runs"
    );
    assert_eq!(daemon.json(&["config", "show"])["hash"], applied["hash"]);
}

#[test]
fn removing_a_scope_with_unfinished_work_is_scope_in_use() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&config_with(&ALL, &publish_and_hold(tmp.path()))));
    daemon.create_work("demo", "shell");
    let other = json!({"version": 1, "scopes": {"other": {}}}).to_string();
    let file = write(tmp.path(), "other.json", &other);
    let out = daemon.cli(&["--json", "config", "apply", &file]);
    assert_eq!(out.status.code(), Some(1));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["error"], "scope_in_use");
    assert_eq!(envelope["diagnostics"][0]["pointer"], "/scopes/demo");
    assert_eq!(daemon.json(&["health"])["generation"], 1);
}

#[test]
fn config_set_edits_through_apply() {
    let daemon = Daemon::start(None);
    let applied = daemon.json(&["config", "set", "/scopes/setup/enabled", "false"]);
    assert_eq!(applied["generation"], 2);
    let out = daemon.cli(&["--json", "work", "create", "--scope", "setup", "--binding", "shell"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["error"],
        "scope_disabled"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(daemon.config_file()).unwrap()).unwrap();
    assert_eq!(
        written["scopes"]["setup"]["enabled"], false,
        "the first apply writes the file"
    );
    let invalid = daemon.cli(&[
        "--json",
        "config",
        "set",
        "/scopes/setup/bindings/shell/operations/-",
        "\"nope\"",
    ]);
    let envelope: Value = serde_json::from_slice(&invalid.stdout).unwrap();
    assert_eq!(envelope["error"], "invalid_config");
    assert_eq!(envelope["diagnostics"][0]["code"], "unknown_reference");
}

#[test]
fn validate_through_the_daemon_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(None);
    let file = write(tmp.path(), "dup.json", r#"{"version": 1, "version": 1}"#);
    let out = daemon.cli(&["config", "validate", &file]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("/version  error duplicate_key"),
        "{}",
        stdout(&out)
    );
    assert_eq!(daemon.json(&["health"])["generation"], 1);
}

#[test]
fn secret_references_never_reach_the_store_or_responses() {
    let planted = "PLANTED_REFERENCE_7C1F";
    let mut config: Value = serde_json::from_str(&config_with(&ALL, "true")).unwrap();
    config["secrets"] = json!({"token": format!("env:{planted}")});
    config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = json!(["token"]);
    let daemon = Daemon::start(Some(&config.to_string()));
    let shown = daemon.cli(&["--json", "config", "show"]);
    let text = stdout(&shown);
    assert!(text.contains("env:<redacted>"), "{text}");
    assert!(!text.contains(planted));
    assert!(
        !contains(&store_files(&daemon.state), planted),
        "the store holds a reference"
    );
    assert!(!daemon.log().contains(planted));
}

/// A crash at each step of apply leaves the old generation or the new one, never a mix: after a
/// restart, the running generation, its hash and the narrowing all agree.
#[test]
fn a_crash_at_each_step_of_apply_leaves_the_old_or_the_new_generation() {
    for (failpoint, survives) in [
        ("apply:validated", false),
        ("apply:file_saved", false),
        ("apply:published", true),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut daemon = Daemon::start(Some(&config_with(&ALL, "true")));
        let old_hash = daemon.json(&["config", "show"])["hash"].clone();
        daemon.kill();
        daemon.launch_with_env(&[("OPEN_CONDUIT_FAILPOINT", failpoint)]);
        let file = write(tmp.path(), "new.json", &config_with(&["read_context"], "true"));
        let out = daemon.cli(&["config", "apply", &file]);
        assert_ne!(out.status.code(), Some(0), "{failpoint}: the daemon crashed mid-apply");
        assert!(!daemon.wait_exit().success(), "{failpoint}: aborted");
        daemon.launch();
        let shown = daemon.json(&["config", "show"]);
        let granted = shown["config"]["scopes"]["demo"]["authorization"]["operations"].clone();
        if survives {
            assert_eq!(shown["generation"], 2, "{failpoint}");
            assert_ne!(shown["hash"], old_hash, "{failpoint}");
            assert_eq!(granted, json!(["read_context"]), "{failpoint}");
        } else {
            assert_eq!(shown["generation"], 1, "{failpoint}");
            assert_eq!(shown["hash"], old_hash, "{failpoint}");
            assert_eq!(granted, json!(ALL), "{failpoint}");
        }
    }
}

/// Secrets reach the execution as environment variables and nowhere else: not the store, not a
/// response, not the daemon's log. One that cannot be resolved fails the attempt before it starts.
#[test]
fn secrets_reach_only_the_execution() {
    let planted = "planted-secret-value-9d2";
    let daemon = Daemon::start_with(|scratch| {
        plant_secrets(scratch, json!({"api": planted}));
        let seen = scratch.join("seen");
        let uses = format!("printf '%s' \"$API_KEY\" > {} && os outcome succeeded", seen.display());
        let mut config: Value = serde_json::from_str(&config_with(&ALL, &uses)).unwrap();
        config["secrets"] = json!({"api_key": "file:api", "missing": "env:OPEN_CONDUIT_TEST_UNSET_VAR"});
        config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = json!(["api_key"]);
        let mut broken = config["scopes"]["demo"]["bindings"]["shell"].clone();
        broken["secrets"] = json!(["missing"]);
        config["scopes"]["demo"]["bindings"]["broken"] = broken;
        config.to_string()
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    assert_eq!(std::fs::read_to_string(daemon.scratch().join("seen")).unwrap(), planted);

    let broken = daemon.create_work("demo", "broken");
    let failed = daemon.await_work(&broken, "failed");
    assert!(failed["outcome"]["summary"].as_str().unwrap().contains("secret"));
    let execution = daemon.json(&["executions", "list", "--work", &broken])["items"][0]["id"].clone();
    let log = std::fs::read_to_string(daemon.state.join(format!("logs/{}.log", execution.as_str().unwrap()))).unwrap();
    assert!(
        log.contains("the secret `missing` could not be resolved (env_unset)"),
        "{log}"
    );

    let mut seen_by_operators = String::new();
    for args in [
        vec!["work", "list"],
        vec!["events", "list"],
        vec!["executions", "list"],
        vec!["audit"],
        vec!["config", "show"],
    ] {
        seen_by_operators.push_str(&daemon.json(&args).to_string());
    }
    assert!(!seen_by_operators.contains(planted), "a response carries the secret");
    assert!(!daemon.log().contains(planted), "the daemon's log carries the secret");
    assert!(
        !contains(&store_files(&daemon.state), planted),
        "the store carries the secret"
    );
}

#[test]
fn the_shipped_examples_validate() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut checked = 0;
    let configs = std::fs::read_dir(&examples).unwrap().flatten();
    for entry in configs.filter(|e| e.path().extension().is_some_and(|x| x == "json")) {
        let out = std::process::Command::new(OPEN_CONDUIT)
            .arg("config")
            .arg("check")
            .arg(entry.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            entry.path().display(),
            stdout(&out)
        );
        checked += 1;
    }
    assert_eq!(checked, 5, "the four example configurations and the conformance one");
}

/// A daemon whose `demo/shell` binding runs `script`, is granted `read_context` only, and starts
/// its turns on the playbook `triage`, which declares `read_context` and `emit`.
fn triage_daemon(script: &str) -> Daemon {
    Daemon::start_with(|scratch| {
        plant_playbook(
            scratch,
            "triage",
            "---\nname: triage\noperations: [read_context, emit]\n---\n",
        );
        let mut config: Value = serde_json::from_str(&config_with(&ALL, script)).unwrap();
        config["scopes"]["demo"]["bindings"]["shell"]["operations"] = json!(["read_context"]);
        config["scopes"]["demo"]["bindings"]["shell"]["playbook"] = json!("triage");
        config.to_string()
    })
}

/// The `toolbelt.refusal` of the audit record of the first call of `operation`.
fn refusal_of(daemon: &Daemon, operation: &str) -> Value {
    let audit = daemon.json(&["audit"])["items"].as_array().unwrap().clone();
    audit.iter().find(|a| a["operation"] == operation).unwrap()["refusal"].clone()
}

/// A binding whose playbook uses operations it is not granted is a warning at check, and a refused
/// call of one of them is recorded as `config_drift`.
#[test]
fn playbooks_warn_of_missing_grants_and_refusals_record_config_drift() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let daemon = triage_daemon(&hold);
    let state = daemon.state.display().to_string();
    let file = daemon.config_file().display().to_string();
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["config", "check", &file, "--state", &state])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "a warning does not fail the config");
    assert!(stdout(&out).contains("/scopes/demo/bindings/shell/playbook  warning playbook_operations_not_granted"));
    assert!(stdout(&out).contains("emit"), "{}", stdout(&out));
    let validated = daemon.json(&["config", "validate", &file]);
    assert_eq!(validated["valid"], true);
    assert_eq!(
        validated["diagnostics"][0]["code"], "playbook_operations_not_granted",
        "the daemon's validate reports the warning too: {validated}"
    );
    let applied = daemon.json(&["config", "apply", &file]);
    assert_eq!(
        applied["diagnostics"][0]["code"], "playbook_operations_not_granted",
        "{applied}"
    );
    let doctor = daemon.json(&["doctor"]);
    let grants = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "grants")
        .cloned();
    let grants = grants.unwrap_or_else(|| panic!("doctor has a grants check: {doctor}"));
    assert_eq!(grants["status"], "warn");
    assert!(
        grants["warnings"][0]["pointer"] == "/scopes/demo/bindings/shell/playbook",
        "{grants}"
    );

    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    assert_eq!(toolbelt_call(&socket, &token, "emit", json!({"type": "demo.x"})).0, 403);
    assert_eq!(
        toolbelt_call(&socket, &token, "create_work", json!({"binding": "shell"})).0,
        403
    );
    let refusal = |op: &str| refusal_of(&daemon, op);
    assert_eq!(
        refusal("emit"),
        "config_drift",
        "the playbook uses emit: the configuration lags it"
    );
    assert_eq!(
        refusal("create_work"),
        Value::Null,
        "create_work is outside the playbook's role"
    );
}

/// Runs `open-conduit ARGS`, killed if it has not finished within 20 s (a file read whole, or a
/// FIFO waited on, would not finish).
fn bounded(args: &[&str]) -> std::process::Output {
    bounded_command(std::process::Command::new(OPEN_CONDUIT), args)
}

/// [`bounded`] with at most 1 GiB of address space: reading `/dev/zero` whole would pass it in
/// seconds and end the process with an allocation failure instead of the refusal.
fn bounded_in_memory(args: &[&str]) -> std::process::Output {
    let mut prlimit = std::process::Command::new("prlimit");
    prlimit.arg(format!("--as={}", 1u64 << 30)).arg("--").arg(OPEN_CONDUIT);
    bounded_command(prlimit, args)
}

fn bounded_command(mut command: std::process::Command, args: &[&str]) -> std::process::Output {
    let child = command
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(20));
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    });
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    out
}

#[test]
fn config_check_refuses_devices_fifos_and_oversized_files_without_reading_them_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let big = write(tmp.path(), "big.json", &" ".repeat(2 * 1024 * 1024));
    let cases = [
        ("/dev/zero", "config_unreadable"),
        (fifo.to_str().unwrap(), "config_unreadable"),
        (tmp.path().to_str().unwrap(), "config_unreadable"),
        ("/no/such/file", "config_unreadable"),
        (big.as_str(), "too_large"),
    ];
    for (file, code) in cases {
        let out = bounded_in_memory(&["config", "check", file]);
        assert_eq!(out.status.code(), Some(1), "{file}: {}", stdout(&out));
        assert!(stdout(&out).contains(code), "{file}: {}", stdout(&out));
        let out = bounded_in_memory(&["config", "validate", file, "--state", "/no/daemon/here"]);
        assert!(!out.status.success(), "{file}");
    }
}

#[test]
fn the_daemon_refuses_a_config_file_that_is_no_regular_file() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    for file in ["/dev/zero", "/dev/null"] {
        let out = bounded(&["daemon", "--state", state.to_str().unwrap(), "--config", file]);
        assert!(!out.status.success(), "{file}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("config_unreadable"), "{file}: {err}");
    }
}

/// `--store` may carry a password, so a URL it refuses is not echoed back; a flag clap checks
/// itself echoes what it refused (the control: the same check would catch it).
#[test]
fn a_refused_store_url_is_not_echoed() {
    let tmp = tempfile::tempdir().unwrap();
    let daemon = |flag: &str, value: &str| {
        let out = std::process::Command::new(OPEN_CONDUIT)
            .args(["daemon", flag, value, "--state"])
            .arg(tmp.path().join("state"))
            .env_remove("OPEN_CONDUIT_STORE")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, stderr) = daemon("--store", "postgress://u:hunter2@127.0.0.1/db");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--store"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!tmp.path().join("state").exists(), "refused before anything is created");
    let (_, echoed) = daemon("--token-lifetime", "hunter2");
    assert!(echoed.contains("hunter2"), "{echoed}");
}

/// Every independent shape error is its own diagnostic, offline and through the daemon, each at the
/// pointer the file has it: two unknown fields and two wrong types are four.
#[test]
fn every_independent_shape_error_is_reported() {
    let daemon = Daemon::start(None);
    let text = json!({
        "version": 1,
        "extra": true,
        "limits": {"causal_max_depth": "deep", "also_extra": 1},
        "scopes": {"demo": {"routes": [{"on": 7, "binding": "shell"}]}}
    })
    .to_string();
    let file = write(daemon.scratch(), "shapes.json", &text);
    let expected = json!([
        ["/extra", "unknown_field"],
        ["/limits/also_extra", "unknown_field"],
        ["/limits/causal_max_depth", "invalid_type"],
        ["/scopes/demo/routes/0/on", "invalid_type"],
    ]);
    let found = |answer: &Value| -> Value {
        let each = answer["diagnostics"].as_array().unwrap().iter();
        each.map(|d| json!([d["pointer"], d["code"]])).collect()
    };
    let out = daemon.cli(&["--json", "config", "check", &file]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        found(&serde_json::from_slice(&out.stdout).unwrap()),
        expected,
        "offline"
    );
    let (status, validated) = daemon.json_unchecked(&["config", "validate", &file]);
    assert_eq!((status, validated["valid"].as_bool()), (Some(1), Some(false)));
    assert_eq!(found(&validated), expected, "through the daemon");
}

/// A `keyring:` secret stored in the real kernel keyring (keyutils, the headless backend), where
/// the keyring crate stores `keyring:<service>/<account>`, reaches the execution that receives it;
/// invalidated there, the attempt fails before it starts.
#[cfg(target_os = "linux")]
#[test]
fn a_keyring_secret_is_read_from_the_kernel_keyring() {
    use linux_keyutils::{KeyRing, KeyRingIdentifier};
    let service = format!("open-conduit-test-{}", std::process::id());
    let session = KeyRing::from_special_id(KeyRingIdentifier::Session, false).unwrap();
    let stored = session
        .add_key(&format!("keyring-rs:deploy@{service}"), "kr-planted-7e1")
        .unwrap();
    let daemon = Daemon::start_with(|scratch| {
        let seen = scratch.join("seen");
        let uses = format!(
            "printf '%s' \"$DEPLOY_KEY\" > {} && os outcome succeeded",
            seen.display()
        );
        let mut config: Value = serde_json::from_str(&config_with(&ALL, &uses)).unwrap();
        config["secrets"] = json!({"deploy_key": format!("keyring:{service}/deploy")});
        config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = json!(["deploy_key"]);
        config.to_string()
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    assert_eq!(
        std::fs::read_to_string(daemon.scratch().join("seen")).unwrap(),
        "kr-planted-7e1"
    );

    stored.invalidate().unwrap();
    let gone = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&gone, "failed");
    assert!(
        failed["outcome"]["summary"].as_str().unwrap().contains("secret"),
        "{failed}"
    );
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{}", daemon.first_execution(&gone))]);
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("(not_found)"),
        "{}",
        String::from_utf8_lossy(&log.stdout)
    );
}

/// A refusal is classified against the playbook as its attempt's generation was validated: a
/// playbook edited afterwards (and read again when a package is installed) changes nothing for the
/// attempt already pinned.
#[test]
fn config_drift_is_judged_against_the_playbook_the_generation_pinned() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let daemon = triage_daemon(&hold);
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    plant_playbook(
        daemon.scratch(),
        "triage",
        "---\nname: triage\noperations: [read_context, create_work]\n---\n",
    );
    let package = daemon.scratch().join("pkg-notes");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    let manifest = json!({"name": "notes", "version": "1.0.0",
        "runtime": {"language": "process", "entry": "bin/run", "requires": []},
        "provides": {"operations": [{"name": "notes.view", "summary": "View.", "input_schema": {"type": "object"}, "safety_tier": "read"}]}});
    std::fs::write(package.join("open-conduit.json"), manifest.to_string()).unwrap();
    std::fs::write(package.join("bin/run"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(package.join("bin/run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    daemon.json(&["packages", "install", package.to_str().unwrap()]);
    let file = daemon.config_file().display().to_string();
    let rechecked = daemon.json(&["config", "validate", &file]);
    assert!(
        rechecked["diagnostics"].to_string().contains("create_work"),
        "the daemon reads the edited playbook now: {rechecked}"
    );

    let token = read_token(&token_file);
    assert_eq!(toolbelt_call(&socket, &token, "emit", json!({"type": "demo.x"})).0, 403);
    assert_eq!(
        toolbelt_call(&socket, &token, "create_work", json!({"binding": "shell"})).0,
        403
    );
    let refusal = |op: &str| refusal_of(&daemon, op);
    assert_eq!(refusal("emit"), "config_drift", "the pinned playbook declared emit");
    assert_eq!(refusal("create_work"), Value::Null, "it did not declare create_work");

    // A restarted daemon restores the generation with its playbooks as they were published.
    let mut daemon = daemon;
    daemon.kill();
    daemon.launch();
    wait_until("the adopted attempt's rotated token", || {
        read_token(&token_file) != token
    });
    let rotated = read_token(&token_file);
    wait_until("the adopted attempt's socket", || {
        toolbelt_call(&socket, &rotated, "read_context", json!({})).0 == 200
    });
    assert_eq!(
        toolbelt_call(&socket, &rotated, "emit", json!({"type": "demo.y"})).0,
        403
    );
    let audit = daemon.json(&["audit", "--operation", "emit"])["items"].clone();
    let last = audit.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["refusal"], "config_drift", "pinned across the restart: {last}");
}

/// `secrets set --keyring` stores a value where the daemon's `keyring:` reads it, read from stdin;
/// `secrets rm --keyring` removes it, and the attempt that needs it then fails before it starts.
#[cfg(target_os = "linux")]
#[test]
fn secrets_set_keyring_stores_what_the_daemon_reads() {
    let name = format!("oc_test_{}", std::process::id());
    let secrets = |args: &[&str], stdin: &str| open_conduit_with_stdin(&[&["secrets"], args].concat(), stdin);
    let set = secrets(&["set", &name, "--keyring"], "kr-set-by-cli-9\n");
    let said = String::from_utf8_lossy(&set.stdout).into_owned();
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    assert!(
        said.contains(&format!("keyring:open-conduit/{name}")) && !said.contains("kr-set-by-cli-9"),
        "{said}"
    );
    let variable = name.to_uppercase();
    let daemon = Daemon::start_with(|scratch| {
        let uses = format!(
            "printf '%s' \"${variable}\" > {} && os outcome succeeded",
            scratch.join("seen").display()
        );
        let mut config: Value = serde_json::from_str(&config_with(&ALL, &uses)).unwrap();
        config["secrets"] = json!({&name: format!("keyring:open-conduit/{name}")});
        config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = json!([&name]);
        config.to_string()
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    assert_eq!(
        std::fs::read_to_string(daemon.scratch().join("seen")).unwrap(),
        "kr-set-by-cli-9"
    );

    let removed = secrets(&["rm", &name, "--keyring"], "");
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    let again = secrets(&["rm", &name, "--keyring"], "");
    assert_eq!(again.status.code(), Some(2), "nothing is left to remove");
    let gone = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&gone, "failed");
    assert!(
        failed["outcome"]["summary"].as_str().unwrap().contains("secret"),
        "{failed}"
    );
}
