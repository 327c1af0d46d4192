//! `http.fetch` from a real execution through the real daemon: a fetch of a local test server
//! (reachable only through the test allowance) with a granted secret as its Authorization, a
//! metadata fetch refused `ssrf_blocked`, and the durable audit pair of both.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

fn fetch_config(script: &str) -> String {
    let mut config = granting(
        script,
        json!([
            "emit",
            "read_context",
            "declare_outcome",
            "wait",
            "create_work",
            "http.fetch"
        ]),
    );
    config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = json!(["api"]);
    config["secrets"] = json!({"api": "cmd:printf planted-fetch-secret"});
    config.to_string()
}

#[test]
fn an_execution_fetches_through_the_guard_and_every_call_is_audited() {
    let (port, heads) = test_server();
    let allow = format!("127.0.0.1:{port}");
    let daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_TEST_FETCH_ALLOW", &allow)], |scratch| {
        let d = scratch.display();
        fetch_config(&format!(
            "os call http.fetch --input '{{\"url\":\"http://127.0.0.1:{port}/hello\",\"secret\":\"api\"}}' > {d}/fetched.json; \
             os call http.fetch --input '{{\"url\":\"http://169.254.169.254/latest/meta-data/\"}}' 2> {d}/blocked.txt; \
             echo \"exit=$?\" >> {d}/blocked.txt; os outcome succeeded"
        ))
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");

    let log = daemon.cli(&["runs", "log", &work]);
    let log = String::from_utf8_lossy(&log.stdout);
    let fetched: Value = serde_json::from_str(&std::fs::read_to_string(daemon.scratch().join("fetched.json")).unwrap())
        .unwrap_or_else(|_| panic!("the fetch answered: {log}"));
    assert_eq!(
        (fetched["status"].as_i64(), fetched["body"].as_str()),
        (Some(200), Some("hello"))
    );
    let blocked = std::fs::read_to_string(daemon.scratch().join("blocked.txt")).unwrap();
    assert!(
        blocked.starts_with("ssrf_blocked:") && blocked.contains("metadata"),
        "{blocked}"
    );
    assert!(blocked.contains("exit=1"), "{blocked}");
    assert!(
        !blocked.contains("169.254"),
        "the refusal names the class, never the address"
    );

    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "the blocked fetch connected nowhere");
    assert!(
        heads[0].contains("authorization: Bearer planted-fetch-secret"),
        "{}",
        heads[0]
    );

    let events = daemon.events(&work);
    let of = |kind: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == kind && e["data"]["toolName"] == "http.fetch")
            .cloned()
            .collect()
    };
    let (called, returned) = (of("agent.toolCalled"), of("agent.toolReturned"));
    assert_eq!((called.len(), returned.len()), (2, 2));
    assert!(called.iter().all(|e| e["data"]["transport"] == "http"));
    let statuses: Vec<&str> = returned.iter().map(|e| e["data"]["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["ok", "error"], "the blocked call is audited too");
    for (c, r) in called.iter().zip(&returned) {
        assert_eq!(
            r["causation"]["parent"], c["id"],
            "toolReturned continues from its toolCalled"
        );
    }
    assert!(
        !contains(&store_files(&daemon.state), "planted-fetch-secret"),
        "the secret is never stored"
    );
    assert!(!daemon.log().contains("planted-fetch-secret"));
}

/// Without the allowance, the same local server is loopback and refused: the allowance is what
/// opens it, and only test builds read it.
#[test]
fn without_the_allowance_a_local_server_is_loopback() {
    let (port, heads) = test_server();
    let daemon = Daemon::start_with(|scratch| {
        let d = scratch.display();
        fetch_config(&format!(
            "os call http.fetch --input '{{\"url\":\"http://127.0.0.1:{port}/\"}}' 2> {d}/refused.txt; os outcome succeeded"
        ))
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let refused = std::fs::read_to_string(daemon.scratch().join("refused.txt")).unwrap();
    assert!(
        refused.starts_with("ssrf_blocked:") && refused.contains("loopback"),
        "{refused}"
    );
    assert!(heads.lock().unwrap().is_empty());
}

/// A call in flight when the daemon dies is not left open on the Work's log: recovery pairs its
/// `agent.toolCalled` with an `agent.toolReturned` whose status is `lost`.
#[test]
fn a_call_in_flight_at_a_crash_is_recorded_lost_by_recovery() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts and never answers: the fetch stays in flight until the daemon dies.
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().collect();
        drop(held);
    });
    let allow = format!("127.0.0.1:{port}");
    let tmp = meeting();
    let d = tmp.path().display().to_string();
    let mut daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_TEST_FETCH_ALLOW", &allow)], |_| {
        fetch_config(&format!(
            "os call http.fetch --input '{{\"url\":\"http://127.0.0.1:{port}/never\"}}' > /dev/null 2>&1; \
             while [ -d {d} ] && [ ! -f {d}/release ]; do sleep 0.05; done; os outcome succeeded"
        ))
    });
    let work = daemon.create_work("demo", "shell");
    let fetch_records = |daemon: &Daemon, kind: &str| -> Vec<Value> {
        daemon
            .events(&work)
            .into_iter()
            .filter(|e| e["type"] == kind && e["data"]["toolName"] == "http.fetch")
            .collect()
    };
    wait_until("the fetch is in flight", || {
        !fetch_records(&daemon, "agent.toolCalled").is_empty()
    });
    daemon.kill();
    daemon.launch_with_env(&[("OPEN_CONDUIT_TEST_FETCH_ALLOW", &allow)]);
    let called = fetch_records(&daemon, "agent.toolCalled");
    let returned = fetch_records(&daemon, "agent.toolReturned");
    assert_eq!((called.len(), returned.len()), (1, 1), "paired once: {returned:?}");
    assert_eq!(returned[0]["data"]["status"], "lost");
    assert_eq!(returned[0]["data"]["callId"], called[0]["data"]["callId"]);
    assert_eq!(returned[0]["causation"]["parent"], called[0]["id"]);
    std::fs::write(tmp.path().join("release"), "").unwrap();
    daemon.await_work(&work, "succeeded");
    assert_eq!(
        fetch_records(&daemon, "agent.toolReturned").len(),
        1,
        "the adopted attempt adds none"
    );
}

/// `replayPolicy: non-deterministic` (RFC 0078): the host keeps the observable result, so a call
/// retried with its request id answers exactly as the first did and fetches nothing again.
#[test]
fn a_fetch_retried_with_its_request_id_replays_without_fetching_again() {
    let (port, heads) = test_server();
    let allow = format!("127.0.0.1:{port}");
    let tmp = meeting();
    let daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_TEST_FETCH_ALLOW", &allow)], |_| {
        fetch_config(&publish_and_hold(tmp.path()))
    });
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let body = json!({"operation": "http.fetch", "request_id": "fetch-1",
                      "input": {"url": format!("http://127.0.0.1:{port}/once")}});
    let first = http(&socket, "POST", "/v1/toolbelt/call", Some(&token), Some(&body));
    let again = http(&socket, "POST", "/v1/toolbelt/call", Some(&token), Some(&body));
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(first, again, "the same observable result");
    assert_eq!(heads.lock().unwrap().len(), 1, "fetched once");
    std::fs::write(tmp.path().join("release"), "").unwrap();
}
