//! Steering unfinished Work through the real daemon and CLI: hold keeps it from being claimed until
//! released, rebind moves it to another binding of its scope, attach gives it a key whose events
//! route to it and wake it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

/// Succeeds once woken by `demo.go`; until then, waits for it (a type-only wait, on the Work's keys).
const WAIT_FOR_GO: &str = "case \"$(os context)\" in *demo.go*) os outcome succeeded;; *) os wait --for demo.go;; esac";

fn refused(daemon: &Daemon, args: &[&str]) -> String {
    let (status, answer) = daemon.json_unchecked(args);
    assert_eq!(status, Some(1), "{args:?} is refused: {answer}");
    answer["error"].as_str().unwrap().to_owned()
}

fn attempts(daemon: &Daemon, work: &str) -> usize {
    daemon.attempts(work).len()
}

#[test]
fn held_work_is_not_claimed_when_woken_until_it_is_released() {
    let daemon = Daemon::start(Some(&shell_config(WAIT_FOR_GO)));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");

    let held = daemon.json(&["work", "hold", &work]);
    assert_eq!(
        (held["event"]["type"].as_str(), held["event"]["actor"].as_str()),
        (Some("core.work.held"), Some("operator:local"))
    );
    assert_eq!(held["work"]["blocked_reason"], "operator_held");
    assert_eq!(refused(&daemon, &["work", "hold", &work]), "conflict", "already held");

    let woke = daemon.json(&["work", "wake", &work, "--type", "demo.go"]);
    assert_eq!(woke["woke"], true, "a held Work still wakes");
    std::thread::sleep(std::time::Duration::from_millis(700)); // more than a scheduler tick
    let shown = daemon.json(&["work", "get", &work]);
    assert_eq!(
        (shown["state"].as_str(), shown["blocked_reason"].as_str()),
        (Some("ready"), Some("operator_held"))
    );
    assert_eq!(attempts(&daemon, &work), 1, "held: not claimed");

    let released = daemon.json(&["work", "release", &work]);
    assert_eq!(released["event"]["type"], "core.work.released");
    assert_eq!(released["work"]["blocked_reason"], Value::Null);
    daemon.await_work(&work, "succeeded");
    assert_eq!(attempts(&daemon, &work), 2);
    assert_eq!(refused(&daemon, &["work", "release", &work]), "conflict", "finished");
    assert_eq!(refused(&daemon, &["work", "hold", "no-such-work"]), "not_found");
}

#[test]
fn a_cancelled_attempts_hold_is_released_by_retry_not_release() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, _, _) = hold_one(&daemon, tmp.path());
    daemon.json(&["execution", "cancel", &daemon.first_execution(&work)]);
    // Until the daemon saw the attempt's process end, `release` refuses for that first.
    wait_until("the cancelled attempt's stop", || {
        daemon.json(&["executions", "list", "--work", &work])["items"][0]["stopped_at"].is_string()
    });
    let (_, answer) = daemon.json_unchecked(&["work", "release", &work]);
    assert_eq!(answer["error"], "conflict");
    assert!(answer["remedy"].as_str().unwrap().contains("work retry"), "{answer}");
}

#[test]
fn rebind_moves_waiting_work_to_another_binding_of_its_scope() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let daemon = Daemon::start_with(|_| {
        let mut config: Value = serde_json::from_str(&shell_config(WAIT_FOR_GO)).unwrap();
        let mut other = config["scopes"]["demo"]["bindings"]["shell"].clone();
        other["config"]["command"] = json!(["/bin/sh", "-c", "os outcome succeeded --summary rebound"]);
        let mut holding = other.clone();
        holding["config"]["command"] = json!(["/bin/sh", "-c", hold]);
        config["scopes"]["demo"]["bindings"]["other"] = other;
        config["scopes"]["demo"]["bindings"]["holding"] = holding;
        config.to_string()
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    assert_eq!(
        refused(&daemon, &["work", "rebind", &work, "--binding", "nope"]),
        "unknown_binding"
    );
    assert_eq!(
        refused(&daemon, &["work", "rebind", &work, "--binding", "shell"]),
        "conflict",
        "already on it"
    );
    let rebound = daemon.json(&["work", "rebind", &work, "--binding", "other"]);
    assert_eq!(rebound["work"]["binding"], "other");
    assert_eq!(rebound["event"]["type"], "core.work.rebound");
    assert_eq!(rebound["event"]["data"], json!({"from": "shell", "to": "other"}));

    daemon.json(&["work", "wake", &work, "--type", "demo.go"]);
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "rebound", "the new binding ran it");
    let bindings: Vec<Value> = daemon.attempts(&work).iter().map(|x| x["binding"].clone()).collect();
    assert_eq!(bindings, [json!("shell"), json!("other")]);

    let running = daemon.create_work("demo", "holding");
    wait_until("the holding attempt", || !published_runs(tmp.path()).is_empty());
    assert_eq!(
        refused(&daemon, &["work", "rebind", &running, "--binding", "other"]),
        "conflict",
        "a running attempt is pinned to its binding"
    );
}

#[test]
fn an_attached_key_routes_its_events_to_the_work_and_wakes_it() {
    let daemon = Daemon::start(Some(&shell_config(WAIT_FOR_GO)));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    assert_eq!(daemon.emit_event("demo", "demo.go", "ticket:42"), 201);
    assert_eq!(
        daemon.json(&["work", "get", &work])["state"],
        "waiting",
        "not yet its key"
    );

    let attached = daemon.json(&["work", "attach", &work, "--key", "ticket:42"]);
    assert_eq!(attached["work"]["keys"], json!([format!("work:{work}"), "ticket:42"]));
    assert_eq!(attached["event"]["type"], "core.work.attached");
    assert_eq!(
        refused(&daemon, &["work", "attach", &work, "--key", "ticket:42"]),
        "conflict"
    );
    let other = daemon.create_work("demo", "shell");
    assert_eq!(
        refused(&daemon, &["work", "attach", &other, "--key", "ticket:42"]),
        "conflict",
        "another Work owns it"
    );
    assert_eq!(
        refused(&daemon, &["work", "attach", &other, "--key", &format!("work:{work}")]),
        "invalid_input",
        "the host's own namespaces"
    );

    assert_eq!(daemon.emit_event("demo", "demo.go", "ticket:42"), 201);
    daemon.await_work(&work, "succeeded");
}

/// Scope reconcile holds the Work whose binding the active configuration no longer has (instead of
/// its next claim failing it) until it is rebound, and reports Work whose grants are withdrawn.
#[test]
fn reconcile_holds_work_whose_binding_is_gone_until_it_is_rebound() {
    let mut config: Value = serde_json::from_str(&shell_config(WAIT_FOR_GO)).unwrap();
    let bindings = &mut config["scopes"]["demo"]["bindings"];
    let mut other = bindings["shell"].clone();
    other["config"]["command"] = json!(["/bin/sh", "-c", "os outcome succeeded --summary rebound"]);
    let mut keeper = bindings["shell"].clone();
    keeper["grants"] = json!({"extra": {"operations": ["emit"]}});
    bindings["other"] = other;
    bindings["keeper"] = keeper;
    let daemon = Daemon::start(Some(&config.to_string()));
    let orphan = daemon.create_work("demo", "shell");
    let second = daemon.create_work("demo", "shell");
    let granted = daemon.json(&[
        "work",
        "create",
        "--scope",
        "demo",
        "--binding",
        "keeper",
        "--grant",
        "extra",
    ])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    daemon.await_work(&orphan, "waiting");
    daemon.await_work(&second, "waiting");
    daemon.await_work(&granted, "waiting");

    let mut changed = config.clone();
    changed["scopes"]["demo"]["bindings"]
        .as_object_mut()
        .unwrap()
        .remove("shell");
    changed["scopes"]["demo"]["routes"] = json!([]);
    changed["scopes"]["demo"]["bindings"]["keeper"]
        .as_object_mut()
        .unwrap()
        .remove("grants");
    daemon.apply(&changed);
    let reconciled = daemon.json(&["scopes", "reconcile", "demo"]);
    let mut findings: Vec<(String, String, bool)> = reconciled["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["work"].as_str().unwrap().to_owned(),
                f["finding"].as_str().unwrap().to_owned(),
                f["held"].as_bool().unwrap(),
            )
        })
        .collect();
    findings.sort();
    let mut expected = vec![
        (orphan.clone(), "binding_removed".to_owned(), true),
        (second.clone(), "binding_removed".to_owned(), true),
        (granted.clone(), "grant_withdrawn".to_owned(), false),
    ];
    expected.sort();
    assert_eq!(findings, expected);
    assert_eq!(
        daemon.json(&["work", "get", &orphan])["blocked_reason"],
        "binding_removed"
    );
    let again = daemon.json(&["scopes", "reconcile", "demo"]);
    assert!(
        again["findings"].as_array().unwrap().iter().all(|f| f["held"] == false),
        "already held: {again}"
    );

    daemon.json(&["work", "wake", &orphan, "--type", "demo.go"]);
    std::thread::sleep(std::time::Duration::from_millis(700)); // more than a scheduler tick
    assert_eq!(
        daemon.json(&["work", "get", &orphan])["state"],
        "ready",
        "held, so its claim does not fail it"
    );
    let (_, refused) = daemon.json_unchecked(&["work", "release", &orphan]);
    assert!(refused["remedy"].as_str().unwrap().contains("work rebind"), "{refused}");
    daemon.json(&["work", "rebind", &orphan, "--binding", "other"]);
    let done = daemon.await_work(&orphan, "succeeded");
    assert_eq!(done["outcome"]["summary"], "rebound");
    assert_eq!(refused_code(&daemon, &["scopes", "reconcile", "nope"]), "unknown_scope");
}

fn refused_code(daemon: &Daemon, args: &[&str]) -> String {
    daemon.json_unchecked(args).1["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// An event an interrupting route matches, on a key running Work owns, fences the running attempt
/// (the trace says `interrupt`), and the Work's next attempt starts from it once the fenced process
/// is seen to stop; other input on the key is only injected.
#[test]
fn interrupting_input_restarts_the_running_work_from_the_event() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let script =
        format!("case \"$(os context)\" in *demo.steer*) os outcome succeeded --summary steered;; *) {hold};; esac");
    let mut config: Value = serde_json::from_str(&shell_config(&script)).unwrap();
    config["scopes"]["demo"]["routes"] = json!([{"on": "demo.steer", "binding": "shell", "interrupt": true}]);
    let daemon = Daemon::start(Some(&config.to_string()));
    let create = || {
        let args = [
            "work",
            "create",
            "--scope",
            "demo",
            "--binding",
            "shell",
            "--key",
            "ticket:1",
        ];
        daemon.json(&args)["id"].as_str().unwrap().to_owned()
    };
    let (work, socket, token_file) = hold_created(tmp.path(), create);
    let token = read_token(&token_file);
    let traced = |event_type: &str| {
        daemon.json(&[
            "route",
            "--scope",
            "demo",
            "--trace",
            event_type,
            "--correlation-key",
            "ticket:1",
        ])["effect"]
            .clone()
    };
    assert_eq!(traced("demo.note"), "inject");
    assert_eq!(traced("demo.steer"), "interrupt");

    assert_eq!(daemon.emit_event("demo", "demo.note", "ticket:1"), 201);
    assert!(!fenced(&socket, &token), "other input does not interrupt");
    assert_eq!(daemon.emit_event("demo", "demo.steer", "ticket:1"), 201);
    assert!(fenced(&socket, &token), "fenced in the event's transaction");
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "steered");
    let attempts = daemon.attempts(&work);
    assert_eq!(
        (attempts[0]["state"].as_str(), attempts[0]["stopped_at"].is_string()),
        (Some("cancelled"), true),
        "the next attempt waited for the first to stop"
    );
    assert_eq!(attempts.len(), 2);
    let (stopped, started) = (
        attempts[0]["stopped_at"].as_str().unwrap(),
        attempts[1]["started_at"].as_str().unwrap(),
    );
    assert!(started >= stopped, "{started} before {stopped}");
}
