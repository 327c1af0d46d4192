//! The optional loopback TCP listener: the management API with the same authentication, and
//! nothing but loopback addresses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};

use common::*;

/// A raw HTTP/1.1 GET over TCP: the status.
fn tcp_get(port: u16, path: &str, token: Option<&str>) -> u16 {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A daemon that also listens on a free loopback port, with `env` besides.
fn on_loopback(env: &[(&str, &str)]) -> (Daemon, u16) {
    let mut daemon = Daemon::start(None);
    daemon.stop();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut all = vec![("OPEN_CONDUIT_LISTEN", listen.as_str())];
    all.extend_from_slice(env);
    daemon.launch_with_env(&all);
    (daemon, port)
}

#[test]
fn the_management_api_is_served_on_loopback_with_the_same_authentication() {
    let (daemon, port) = on_loopback(&[]);
    let token = daemon.operator_token();
    assert_eq!(tcp_get(port, "/v1/health", Some(&token)), 200);
    assert_eq!(tcp_get(port, "/v1/tools", Some(&token)), 200);
    assert_eq!(tcp_get(port, "/v1/health", None), 401);
    assert_eq!(
        tcp_get(port, "/.well-known/openwop", None),
        200,
        "discovery on every listener"
    );
    assert_eq!(tcp_get(port, "/v1/health", Some("not-a-token")), 401);
}

#[test]
fn a_non_loopback_address_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["daemon", "--listen", "0.0.0.0:0", "--state"])
        .arg(tmp.path().join("state"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(!tmp.path().join("state").exists(), "refused before anything is created");
}

/// A raw HTTP/1.1 POST of JSON over TCP: the status and the body.
fn tcp_post(port: u16, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned())
}

const SAFE_FETCH: &str = "/v1/host/sample/http/safe-fetch";

#[test]
fn the_conformance_seams_are_off_by_default() {
    let (daemon, port) = on_loopback(&[]);
    let token = daemon.operator_token();
    let body = r#"{"url": "http://169.254.169.254/"}"#;
    assert_eq!(tcp_post(port, SAFE_FETCH, Some(&token), body).0, 404);
}

#[test]
fn the_conformance_seams_judge_fetches_and_install_gates_for_authenticated_operators_only() {
    let (daemon, port) = on_loopback(&[("OPEN_CONDUIT_CONFORMANCE_SEAMS", "1")]);
    let token = daemon.operator_token();
    let seam = |body: &str| {
        let (status, answer) = tcp_post(port, SAFE_FETCH, Some(&token), body);
        assert_eq!(status, 200, "{answer}");
        serde_json::from_str::<serde_json::Value>(&answer).unwrap()
    };
    assert_eq!(tcp_post(port, SAFE_FETCH, None, "{}").0, 401);

    let upgrade = seam(r#"{"url": "http://169.254.169.254/", "init": {"headers": {"Connection": "Upgrade"}}}"#);
    assert_eq!(
        (upgrade["outcome"].as_str(), upgrade["blocked"].as_str()),
        (Some("blocked"), Some("upgrade")),
        "upgrade first"
    );
    let metadata = seam(r#"{"url": "http://169.254.169.254/latest/meta-data/"}"#);
    assert_eq!(metadata["blocked"], "ssrf");
    assert_eq!(metadata["toolCalled"]["transport"], "http");
    assert_eq!(metadata["toolReturned"]["callId"], metadata["toolCalled"]["callId"]);
    let rebind = seam(r#"{"url": "http://rebind.example/", "simulateRebindTo": "169.254.169.254"}"#);
    assert_eq!(
        (rebind["blocked"].as_str(), rebind["class"].as_str()),
        (Some("ssrf"), Some("metadata"))
    );

    let gate = "/v1/host/sample/packs/install-gate";
    let manifest = r#"{"manifest": {"name": "cron", "version": "1.0.0", "runtime": {"language": "process", "entry": "bin/cron", "requires": ["subprocess"]}}, "grantSet": ["net.dns"]}"#;
    let (status, refused) = tcp_post(port, gate, Some(&token), manifest);
    assert_eq!(status, 400);
    assert!(
        refused
            .starts_with(r#"{"error":"pack_runtime_requirement_unmet","unmet":["subprocess"],"manifest":"cron@1.0.0""#),
        "{refused}"
    );
    // The production parser judges the manifest first, as install does: this host runs no `node`.
    let node = manifest.replace(r#""language": "process""#, r#""language": "node""#);
    let (status, invalid) = tcp_post(port, gate, Some(&token), &node);
    assert_eq!(status, 400);
    assert!(
        invalid.contains(r#""error":"invalid_manifest""#) && invalid.contains("/runtime/language"),
        "{invalid}"
    );
    let projected = manifest.replace(r#""grantSet": ["net.dns"]"#, r#""grantSet": [], "gating": false"#);
    let (status, installed) = tcp_post(port, gate, Some(&token), &projected);
    assert_eq!(status, 200);
    assert!(
        installed.contains(r#""requiresProjected":["subprocess"]"#),
        "{installed}"
    );
    let raw = manifest.replace(r#"["subprocess"]"#, r#"["node:dns/promises"]"#);
    assert!(tcp_post(port, gate, Some(&token), &raw).1.contains("invalid_manifest"));

    let work = daemon.create_work("setup", "shell");
    daemon.await_work(&work, "succeeded");
    let events = tcp_get_body(
        port,
        &format!("/v1/host/sample/test/runs/{work}/events?type=demo.hello"),
        &token,
    );
    assert_eq!(events["events"].as_array().unwrap().len(), 1, "{events}");
    assert_eq!(events["events"][0]["runId"], work.as_str());
    let none = tcp_get_body(port, "/v1/host/sample/test/runs/unknown/events", &token);
    assert_eq!(none, serde_json::json!({"events": []}));
    assert_eq!(tcp_post(port, "/v1/host/sample/test/reset", Some(&token), "{}").0, 200);

    let on_socket = http(
        &daemon.management_socket(),
        "POST",
        SAFE_FETCH,
        Some(&token),
        Some(&serde_json::json!({})),
    );
    assert_eq!(on_socket.0, 404, "never on the management socket");
}

fn tcp_get_body(port: u16, path: &str, token: &str) -> serde_json::Value {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap_or("null")).unwrap()
}

/// The run seams start real Work on `examples/conformance.json`'s bindings: a guarded fetch whose
/// audit pair is durable, and a tool session bracketing its calls.
#[test]
fn the_run_seams_drive_real_executions() {
    let (server_port, _) = test_server();
    // A loopback port nothing listens on: the allowance lets the fetch try it, and it fails.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (daemon, port) = on_loopback(&[
        ("OPEN_CONDUIT_CONFORMANCE_SEAMS", "1"),
        (
            "OPEN_CONDUIT_TEST_FETCH_ALLOW",
            &format!("127.0.0.1:{server_port},127.0.0.1:{closed}"),
        ),
    ]);
    let token = daemon.operator_token();
    let run = |path: &str, body: &str| {
        let (status, answer) = tcp_post(port, path, Some(&token), body);
        (status, serde_json::from_str::<serde_json::Value>(&answer).unwrap())
    };
    let unconfigured = run("/v1/host/sample/tools/session-run", "{}");
    assert_eq!(
        (unconfigured.0, unconfigured.1["error"].as_str()),
        (422, Some("unknown_binding"))
    );
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/conformance.json");
    daemon.json(&["config", "apply", examples.to_str().unwrap()]);

    let fetch = "/v1/host/sample/http/safe-fetch-run";
    let (_, fetched) = run(fetch, &format!(r#"{{"url": "http://127.0.0.1:{server_port}/run"}}"#));
    assert_eq!(fetched["outcome"], "fetched", "{fetched}");
    let (_, blocked) = run(fetch, r#"{"url": "http://169.254.169.254/latest/meta-data/"}"#);
    assert_eq!(blocked["outcome"], "blocked");
    let (_, refused) = run(fetch, &format!(r#"{{"url": "http://127.0.0.1:{closed}/"}}"#));
    assert_eq!(
        refused["outcome"], "failed",
        "a connection failure is not the guard's block"
    );
    let run_id = blocked["runId"].as_str().unwrap();
    let called = tcp_get_body(
        port,
        &format!("/v1/host/sample/test/runs/{run_id}/events?type=agent.toolCalled"),
        &token,
    );
    let called: Vec<&serde_json::Value> = called["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["toolName"] == "http.fetch")
        .collect();
    assert_eq!(called.len(), 1);
    assert_eq!(called[0]["payload"]["transport"], "http");

    let (_, session) = run("/v1/host/sample/tools/session-run", "{}");
    assert_eq!(session["outcome"], "completed", "{session}");
    let events = tcp_get_body(
        port,
        &format!(
            "/v1/host/sample/test/runs/{}/events",
            session["runId"].as_str().unwrap()
        ),
        &token,
    );
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .filter(|t| t.starts_with("tool.session.") || t.starts_with("agent.tool"))
        .collect();
    assert_eq!(kinds.first(), Some(&"tool.session.opened"));
    assert_eq!(
        kinds.last(),
        Some(&"tool.session.closed"),
        "the close follows the run's last call record"
    );
    assert_eq!(kinds.iter().filter(|t| **t == "tool.session.closed").count(), 1);
    let closed_at = kinds.iter().position(|t| *t == "tool.session.closed").unwrap();
    assert_eq!(
        kinds[1..closed_at],
        [
            "agent.toolCalled",
            "agent.toolReturned",
            "agent.toolCalled",
            "agent.toolReturned"
        ]
    );
}
