//! A binding's failure policy through the real daemon: failed exits, programs that cannot start
//! and segments lost while no daemon watched are tried again after a backoff, up to the limit, and
//! a retry by hand starts the count over.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::*;
use serde_json::{json, Value};

/// `shell_config(script)` whose binding retries up to `max_attempts` times, one second apart.
fn retrying(script: &str, max_attempts: u32) -> Value {
    let mut config: Value = serde_json::from_str(&shell_config(script)).unwrap();
    config["scopes"]["demo"]["bindings"]["shell"]["retry"] = json!({"max_attempts": max_attempts, "backoff": "1s"});
    config
}

#[test]
fn a_failing_exit_is_retried_up_to_the_limit_and_fails_with_the_last_reason() {
    let mut daemon = Daemon::start(Some(&retrying("exit 3", 3).to_string()));
    let work = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&work, "failed");
    assert_eq!(
        failed["outcome"]["summary"],
        "exited with status 3 (the last of 3 attempts)"
    );
    assert_eq!(
        failed["failed_attempts"], 2,
        "two retries after the first attempt: {failed}"
    );
    let tried = daemon.attempts(&work);
    assert_eq!(tried.len(), 3);
    let epochs: Vec<&Value> = tried.iter().map(|x| &x["epoch"]).collect();
    assert_eq!(epochs, [1, 2, 3]);

    // A retry by hand gets the whole policy again.
    daemon.json(&["work", "retry", &work]);
    daemon.await_work(&work, "failed");
    wait_until("three more attempts", || daemon.attempts(&work).len() == 6);
    let again = daemon.await_work(&work, "failed");
    assert_eq!(
        again["outcome"]["summary"],
        "exited with status 3 (the last of 3 attempts)"
    );

    // Without a policy a failure is final: the negative control of the count above.
    daemon.apply(&serde_json::from_str(&shell_config("exit 3")).unwrap());
    let once = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&once, "failed");
    assert_eq!(failed["outcome"]["summary"], "exited with status 3");
    assert_eq!(daemon.attempts(&once).len(), 1);
    daemon.stop();
}

#[test]
fn a_program_that_cannot_start_is_retried_then_fails_saying_why() {
    let mut config = retrying("unused", 2);
    config["scopes"]["demo"]["bindings"]["shell"]["config"]["command"] = json!(["/no/such/agent"]);
    let daemon = Daemon::start(Some(&config.to_string()));
    let work = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&work, "failed");
    let summary = failed["outcome"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("not found (ENOENT)") && summary.ends_with("(the last of 2 attempts)"),
        "{summary}"
    );
    assert_eq!(daemon.attempts(&work).len(), 2);
}

/// The drill: the daemon is killed, the attempt's process dies while none watches, and the next
/// daemon judges the segment lost and retries it.
#[test]
fn a_segment_lost_across_a_restart_is_retried() {
    let tmp = meeting();
    let d = tmp.path().display();
    let script = format!(
        "if [ -f {d}/held-once ]; then os outcome succeeded --summary retried; exit 0; fi; \
         touch {d}/held-once; echo $$ > {d}/pid; {}",
        publish_and_hold(tmp.path())
    );
    let mut daemon = Daemon::start(Some(&retrying(&script, 2).to_string()));
    let work = daemon.create_work("demo", "shell");
    wait_until("a held attempt", || !published_runs(tmp.path()).is_empty());
    daemon.kill();
    let pid = std::fs::read_to_string(tmp.path().join("pid")).unwrap();
    kill_group(&pid);

    daemon.launch();
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "retried");
    let tried = daemon.attempts(&work);
    assert_eq!(tried.len(), 2);
    assert_eq!(
        tried[0]["outcome"]["summary"],
        "ended unobserved; its exit status is unknown"
    );
}

/// A Work waiting out a long backoff runs again at once when retried by hand.
#[test]
fn a_retry_by_hand_cuts_a_backoff_short() {
    let mut config = retrying("exit 3", 3);
    config["scopes"]["demo"]["bindings"]["shell"]["retry"]["backoff"] = json!("1h");
    let daemon = Daemon::start(Some(&config.to_string()));
    let work = daemon.create_work("demo", "shell");
    wait_until("the first failure", || {
        daemon.json(&["work", "get", &work])["failed_attempts"] == 1
    });
    let waiting = daemon.json(&["work", "get", &work]);
    assert_eq!(waiting["state"], "ready");
    assert!(waiting["not_before"].is_string(), "{waiting}");
    daemon.json(&["work", "retry", &work]);
    wait_until("the retried attempt", || daemon.attempts(&work).len() == 2);
}
