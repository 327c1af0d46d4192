//! Operator controls through the real daemon and CLI: Work cancel fences a live attempt, and wake
//! reports whether it woke the Work.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

#[test]
fn cancel_fences_the_running_attempt_at_once_and_stops_it() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    assert_eq!(toolbelt_call(&socket, &token, "read_context", json!({})).0, 200);

    let cancelled = daemon.json(&["work", "cancel", &work]);
    assert_eq!(cancelled["work"]["state"], "cancelled");
    assert_eq!(cancelled["event"]["type"], "core.work.cancelled");
    assert_eq!(cancelled["event"]["actor"], "operator:local");
    assert!(fenced(&socket, &token), "fenced in the cancel's transaction");
    let execution = &daemon.json(&["executions", "list", "--work", &work])["items"][0];
    assert_eq!(execution["state"], "cancelled");
    wait_until("the attempt's run directory to go", || {
        !socket.parent().unwrap().exists()
    });

    let again = daemon.cli(&["--json", "work", "cancel", &work]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&again.stdout).unwrap()["error"],
        "conflict"
    );
}

#[test]
fn wake_reports_whether_it_woke_the_work() {
    let script = "case \"$(os context)\" in *demo.go*) os outcome succeeded;; *) os wait --for demo.go;; esac";
    let daemon = Daemon::start(Some(&shell_config(script)));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let missed = daemon.json(&["work", "wake", &work, "--type", "demo.other"]);
    assert_eq!(missed["woke"], false);
    let woke = daemon.json(&["work", "wake", &work, "--type", "demo.go", "--data", r#"{"n":1}"#]);
    assert_eq!(woke["woke"], true);
    assert_eq!(woke["event"]["correlation_key"], format!("work:{work}"));
    daemon.await_work(&work, "succeeded");
}

#[test]
fn execution_cancel_holds_the_work_until_a_manual_retry() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let first = daemon.first_execution(&work);

    let cancelled = daemon.json(&["execution", "cancel", &first]);
    assert_eq!(cancelled["execution"]["state"], "cancelled");
    assert_eq!(cancelled["event"]["type"], "core.execution.cancelled");
    assert!(fenced(&socket, &token));
    let held = daemon.json(&["work", "get", &work]);
    assert_eq!(
        (held["state"].as_str(), held["blocked_reason"].as_str()),
        (Some("ready"), Some("operator_cancelled"))
    );
    wait_until("the daemon to see the fenced attempt stop", || {
        daemon.json(&["executions", "list", "--work", &work])["items"][0]["stopped_at"].is_string()
    });
    let known = daemon.json(&["execution", "confirm-stopped", &first]);
    assert_eq!(
        known["event"],
        serde_json::Value::Null,
        "a stop the host saw needs no confirmation"
    );
    std::thread::sleep(std::time::Duration::from_millis(700)); // more than a scheduler tick
    assert_eq!(
        daemon.json(&["executions", "list", "--work", &work])["items"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "held: not claimed"
    );

    let retried = daemon.json(&["work", "retry", &work]);
    assert_eq!(retried["event"]["type"], "core.manual.retry");
    wait_until("a second attempt", || published_runs(tmp.path()).len() == 2);
    let attempts = daemon.json(&["executions", "list", "--work", &work])["items"].clone();
    assert_eq!(attempts[1]["epoch"], 2);
    assert_eq!(
        attempts[1]["cause_event"], retried["event"]["id"],
        "the new attempt continues from the retry"
    );

    let second = attempts[1]["id"].as_str().unwrap();
    let (code, running) = daemon.json_unchecked(&["execution", "confirm-stopped", second]);
    assert_eq!(
        (code, running["error"].as_str()),
        (Some(1), Some("conflict")),
        "cancel it first"
    );

    let refused = daemon.cli(&["--json", "work", "retry", &work]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&refused.stdout).unwrap()["error"],
        "conflict",
        "running Work is not retried"
    );
}

#[test]
fn an_executions_log_is_an_artifact_read_whole_or_by_range() {
    let daemon = Daemon::start(Some(&shell_config("echo hello-log; os outcome succeeded > /dev/null")));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let execution = daemon.first_execution(&work);
    let listed = daemon.json(&["artifacts", "list", "--execution", &execution]);
    let id = format!("log:{execution}");
    assert_eq!(listed["items"][0]["id"], id.as_str());
    let cat = daemon.cli(&["artifacts", "cat", &id]);
    assert_eq!(String::from_utf8_lossy(&cat.stdout).trim(), "hello-log");

    let auth = format!("Bearer {}", daemon.operator_token());
    let path = format!("/v1/artifacts/{}/content", id.replace(':', "%3A"));
    let ranged = |range: &str| {
        let headers = [("Authorization", auth.as_str()), ("Range", range)];
        http_response(&daemon.management_socket(), "GET", &path, &headers, "")
    };
    let partial = ranged("bytes=0-4");
    assert!(partial.starts_with("HTTP/1.1 206"), "{partial}");
    assert!(
        partial.to_ascii_lowercase().contains("content-range: bytes 0-4/10"),
        "{partial}"
    );
    assert!(partial.ends_with("hello"));
    let beyond = ranged("bytes=99-");
    assert!(beyond.starts_with("HTTP/1.1 416"), "{beyond}");
    assert!(beyond.contains("range_not_satisfiable"));
}

/// A declared outcome names files in the working directory; the daemon keeps regular files and
/// refuses links, FIFOs, absent files and paths that leave the directory.
#[test]
fn declared_artifacts_are_kept_and_links_refused() {
    let daemon = Daemon::start_with(|scratch| {
        std::fs::write(scratch.join("outside"), "planted-outside-text").unwrap();
        shell_config(&format!(
            "mkdir out && printf report > out/report.md && ln -s {}/outside link; \
             os outcome succeeded --artifact ../outside 2>/dev/null || echo escape-refused=$?; \
             mkfifo pipe; \
             os outcome succeeded --artifact out/report.md --artifact link --artifact absent --artifact pipe > /dev/null",
            scratch.display()
        ))
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let execution = daemon.first_execution(&work);
    let listed = daemon.json(&["artifacts", "list", "--execution", &execution])["items"].clone();
    let declared: Vec<_> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "declared")
        .collect();
    let report = format!("file:{execution}:0");
    assert_eq!(declared[0]["id"], report.as_str());
    assert_eq!(declared[0]["name"], "out/report.md");
    assert_eq!(declared[0]["size"], 6);
    assert_eq!(
        (declared[1]["refused"].as_str(), declared[2]["refused"].as_str()),
        (Some("artifact_not_regular_file"), Some("artifact_missing"))
    );
    assert_eq!(declared[3]["refused"], "artifact_refused", "a FIFO");

    let cat = daemon.cli(&["artifacts", "cat", &report]);
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "report");
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{execution}")]);
    assert!(String::from_utf8_lossy(&log.stdout).contains("escape-refused=1"));
    let kept = daemon.state.join("artifacts").join(&execution).join("0");
    assert_eq!(mode(&kept), 0o600);

    let auth = format!("Bearer {}", daemon.operator_token());
    let read = |id: &str| {
        let path = format!("/v1/artifacts/{}/content", id.replace(':', "%3A"));
        http_response(
            &daemon.management_socket(),
            "GET",
            &path,
            &[("Authorization", auth.as_str())],
            "",
        )
    };
    let refused = read(&format!("file:{execution}:1"));
    assert!(refused.starts_with("HTTP/1.1 404"), "{refused}");
    assert!(!refused.contains("planted-outside-text"));
    for forged in ["log:../private/operator", "file:../x:0", "file:nothing:0"] {
        assert!(read(forged).starts_with("HTTP/1.1 404"), "{forged}");
    }
}

/// An attempt that declared its artifacts and ended while no daemon watched it still has them kept:
/// recovery copies them before it removes the run directory.
#[test]
fn artifacts_of_an_attempt_that_ended_during_a_restart_are_kept() {
    let tmp = meeting();
    let d = tmp.path().display();
    let script = format!(
        "printf kept > a.txt && os outcome succeeded --artifact a.txt > /dev/null && {}; touch {d}/exited",
        publish_and_hold(tmp.path())
    );
    let mut daemon = Daemon::start(Some(&shell_config(&script)));
    let work = daemon.create_work("demo", "shell");
    wait_until("a held attempt", || !published_runs(tmp.path()).is_empty());
    daemon.kill();
    std::fs::write(tmp.path().join("release"), "").unwrap();
    wait_until("the attempt to end", || tmp.path().join("exited").exists());
    std::thread::sleep(std::time::Duration::from_millis(100));

    daemon.launch();
    daemon.await_work(&work, "succeeded");
    let execution = daemon.first_execution(&work);
    let cat = daemon.cli(&["artifacts", "cat", &format!("file:{execution}:0")]);
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "kept");
}

#[test]
fn doctor_checks_offline_and_through_the_daemon() {
    let mut daemon = Daemon::start(None);
    let up = daemon.cli(&["doctor"]);
    assert_eq!(up.status.code(), Some(0), "{}", String::from_utf8_lossy(&up.stdout));
    assert!(String::from_utf8_lossy(&up.stdout).contains("healthy"));
    daemon.kill();
    let down = daemon.json_unchecked(&["doctor"]);
    assert_eq!(down.0, Some(1), "a daemon that is down is a failed check");
    let checks = down.1["checks"].as_array().unwrap().clone();
    assert_eq!(checks[0]["status"], "ok", "the state directory is owner-only");
    assert_eq!(checks[1]["status"], "fail");
    assert!(
        checks[1]["detail"].as_str().unwrap().contains("open-conduit daemon"),
        "it says what to do next"
    );
}

#[test]
fn scopes_and_waits_are_listed() {
    let daemon = Daemon::start(Some(&shell_config("os wait --for demo.go")));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let scopes = daemon.json(&["scopes"])["items"].clone();
    assert_eq!(scopes[0]["id"], "demo");
    assert_eq!(scopes[0]["bindings"], json!(["shell"]));
    let waits = daemon.json(&["waits", "--work", &work])["items"].clone();
    assert_eq!(
        (waits[0]["state"].as_str(), waits[0]["types"].clone()),
        (Some("armed"), json!(["demo.go"]))
    );
}

/// An operator's event may name a parent it follows from: it is derived (the parent's root, one
/// deeper) under the root's causal bounds; an unknown parent, or one of another scope, is refused.
#[test]
fn an_operators_event_derives_from_a_parent_it_names() {
    let daemon = Daemon::start_with(|_| {
        let mut config: serde_json::Value = serde_json::from_str(&shell_config("true")).unwrap();
        config["scopes"]["other"] = config["scopes"]["demo"].clone();
        config["limits"] = json!({"causal_max_depth": 2});
        config.to_string()
    });
    let emit = |args: &[&str]| daemon.json_unchecked(&[&["emit"], args].concat());
    let (_, root) = emit(&["demo.note", "--scope", "demo"]);
    let root = root["id"].as_str().unwrap().to_owned();
    let (_, child) = emit(&["demo.follow", "--scope", "demo", "--parent", &root]);
    assert_eq!(child["causation"], json!({"parent": root, "root": root, "depth": 1}));
    assert_eq!(
        (child["source"].as_str(), child["actor"].as_str()),
        (Some("core.manual"), Some("operator:local"))
    );
    let chain = daemon.json(&["events", "chain", child["id"].as_str().unwrap()])["items"].clone();
    assert_eq!(chain[0]["id"], root.as_str());

    let (_, grandchild) = emit(&[
        "demo.more",
        "--scope",
        "demo",
        "--parent",
        child["id"].as_str().unwrap(),
    ]);
    let (status, too_deep) = emit(&[
        "demo.most",
        "--scope",
        "demo",
        "--parent",
        grandchild["id"].as_str().unwrap(),
    ]);
    assert_eq!(
        (status, too_deep["error"].as_str()),
        (Some(1), Some("causal_depth_exceeded")),
        "the root's bounds hold"
    );
    assert_eq!(
        emit(&["demo.x", "--scope", "demo", "--parent", "nope"]).1["error"],
        "not_found"
    );
    assert_eq!(
        emit(&["demo.x", "--scope", "other", "--parent", &root]).1["error"],
        "invalid_input",
        "a parent of another scope"
    );
}

/// An action on a Work is a `core.action` event on its own key, stamped with the operator who
/// invoked it, so a wait for it wakes the Work; in a scope it routes like any event.
#[test]
fn an_action_is_a_core_action_event_stamped_with_its_operator() {
    let script =
        "case \"$(os context)\" in *deploy.approve*) os outcome succeeded;; *) os wait --for deploy.approve;; esac";
    let daemon = Daemon::start(Some(&shell_config(script)));
    let issued = daemon.json(&["auth", "operators", "add", "ops", "--role", "operate"]);
    let ops = daemon.scratch().join("ops.token");
    std::fs::write(&ops, issued["token"].as_str().unwrap()).unwrap();
    let as_ops = |args: &[&str]| daemon.json_unchecked(&[&["--token-file", ops.to_str().unwrap()], args].concat());
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");

    let (_, refused) = as_ops(&["act", "core.approve", "--work", &work]);
    assert_eq!(refused["error"], "event_type_not_allowed");
    let (status, acted) = as_ops(&["act", "deploy.approve", "--work", &work, "--data", r#"{"ticket": 7}"#]);
    assert_eq!(status, Some(0), "{acted}");
    let event = &acted["event"];
    assert_eq!(
        (
            event["source"].as_str(),
            event["actor"].as_str(),
            event["type"].as_str()
        ),
        (Some("core.action"), Some("operator:ops"), Some("deploy.approve"))
    );
    assert_eq!(event["correlation_key"], format!("work:{work}"));
    assert_eq!(event["data"], json!({"ticket": 7}));
    assert_eq!(acted["woke"], true);
    daemon.await_work(&work, "succeeded");
    assert_eq!(
        as_ops(&["act", "deploy.approve", "--work", &work]).1["error"],
        "conflict"
    );

    let (_, routed) = as_ops(&[
        "act",
        "demo.requested",
        "--scope",
        "demo",
        "--correlation-key",
        "ticket:9",
    ]);
    let started = daemon.json(&["work", "list"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["keys"].as_array().unwrap().contains(&json!("ticket:9")))
        .cloned()
        .expect("the action's route started a Work owning its key");
    let chain = daemon.events(started["id"].as_str().unwrap());
    assert_eq!(chain[0]["causation"]["root"], routed["event"]["id"]);
    let both = daemon.cli(&["act", "demo.x", "--work", &work, "--scope", "demo"]);
    assert_eq!(both.status.code(), Some(2), "a Work or a scope, not both");
}

/// A declared wait keeps the files it names, as a declared outcome does, when its segment parks.
#[test]
fn a_declared_wait_keeps_its_artifacts() {
    let script = "case \"$(os context)\" in *demo.go*) os outcome succeeded;; \
                  *) printf 'half done' > notes.md; os wait --for demo.go --artifact notes.md --artifact absent;; esac";
    let daemon = Daemon::start(Some(&shell_config(script)));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let parked = daemon.first_execution(&work);
    let listed = daemon.json(&["artifacts", "list", "--execution", &parked])["items"].clone();
    let declared: Vec<&serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "declared")
        .collect();
    assert_eq!(declared.len(), 2, "{listed}");
    assert_eq!(
        (declared[0]["name"].as_str(), declared[1]["refused"].as_str()),
        (Some("notes.md"), Some("artifact_missing"))
    );
    let kept = daemon.cli(&["artifacts", "cat", &format!("file:{parked}:0")]);
    assert_eq!(String::from_utf8_lossy(&kept.stdout), "half done");
    daemon.json(&["work", "wake", &work, "--type", "demo.go"]);
    daemon.await_work(&work, "succeeded");
}
