//! Unified run history through the real daemon and CLI: one Work across two attempts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

#[test]
fn a_run_is_one_work_across_its_attempts_with_their_logs_in_order() {
    let script = "case \"$(os context)\" in *demo.go*) echo second-segment; os outcome succeeded;; \
                  *) echo first-segment; os wait --for demo.go;; esac";
    let daemon = Daemon::start(Some(&shell_config(script)));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    daemon.json(&["work", "wake", &work, "--type", "demo.go"]);
    daemon.await_work(&work, "succeeded");

    let runs = daemon.json(&["runs", "list"])["items"].clone();
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(
        (
            runs[0]["work_id"].as_str(),
            runs[0]["attempts"].as_u64(),
            runs[0]["outcome"].as_str()
        ),
        (Some(work.as_str()), Some(2), Some("succeeded"))
    );
    assert!(runs[0]["ended_at"].is_string());
    assert_eq!(
        daemon.json(&["runs", "list", "--in-state", "failed"])["items"],
        serde_json::json!([])
    );

    let run = daemon.json(&["runs", "get", &work]);
    assert_eq!(run["executions"].as_array().unwrap().len(), 2);
    assert!(run["events"].as_array().unwrap().iter().any(|e| e["type"] == "demo.go"));

    let table = daemon.json(&["runs", "table"])["items"][0].clone();
    assert_eq!(
        (
            table["runs"].as_u64(),
            table["succeeded"].as_u64(),
            table["attempts"].as_u64()
        ),
        (Some(1), Some(1), Some(2))
    );

    let log = daemon.cli(&["runs", "log", &work]);
    assert!(log.status.success());
    let log = String::from_utf8(log.stdout).unwrap();
    let (first, second) = (log.find("first-segment"), log.find("second-segment"));
    assert!(first.is_some() && second.is_some() && first < second, "{log}");
    assert!(log.starts_with("== attempt 1"), "{log}");
    let human = String::from_utf8(daemon.cli(&["runs", "list"]).stdout).unwrap();
    assert!(human.starts_with("WORK") && human.contains(&work[..8]), "{human}");
}
