//! The daemon under connection abuse: thousands of idle and half-sent connections on one
//! execution's toolbelt socket leave the owner's management socket and another execution's socket
//! answering, and the daemon's open files bounded. Loopback only: Unix sockets in a temp dir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use common::holder::Holder;
use common::*;
use serde_json::json;

fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// Runs `check` on a thread of its own; a hung daemon fails the test after a minute instead of
/// hanging it.
fn answers_within_a_minute(what: &str, check: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        check();
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not answer"));
}

/// The p50 and p99 of 200 `read_context` calls, one after another.
fn read_context_latency(socket: &Path, token: &str) -> (Duration, Duration) {
    let mut took: Vec<Duration> = (0..200)
        .map(|_| {
            let started = std::time::Instant::now();
            let (status, _) = toolbelt_call(socket, token, "read_context", json!({}));
            assert_eq!(status, 200);
            started.elapsed()
        })
        .collect();
    took.sort();
    (took[100], took[198])
}

#[test]
fn floods_on_one_toolbelt_socket_leave_the_owner_and_other_executions_served() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, flooded, _) = hold_one(&daemon, tmp.path());
    let (_, other, other_token) = hold_one(&daemon, tmp.path());
    let before = open_files(daemon.pid());
    let quiet = read_context_latency(&other, &read_token(&other_token));

    let idle: Vec<(Holder, usize)> = (0..2).map(|_| Holder::start(&flooded, 10_000, false)).collect();
    let slow = Holder::start(&flooded, 2_000, true);
    let attempted: usize = idle.iter().map(|(_, n)| n).sum::<usize>() + slow.1;
    assert!(attempted > 0, "the flood connected");
    let during = open_files(daemon.pid());
    eprintln!("{attempted} flood connections held; the daemon's open files: {before} before, {during} during");
    assert!(
        during < before + 200,
        "{attempted} flood connections held {} of the daemon's files (before: {before})",
        during - before
    );

    let token = read_token(&other_token);
    answers_within_a_minute("toolbelt calls on another execution", move || {
        let (p50, p99) = read_context_latency(&other, &token);
        // Reported, never asserted: docs/performance.md records these.
        eprintln!("read_context during the flood: p50 {p50:?}, p99 {p99:?} (before: {quiet:?})");
    });
    let management = daemon.management_socket();
    let owner = daemon.operator_token();
    answers_within_a_minute("the owner's health", move || {
        assert_eq!(http(&management, "GET", "/v1/health", Some(&owner), None).0, 200);
    });
    let management = daemon.management_socket();
    let owner = daemon.operator_token();
    answers_within_a_minute("the owner's work create", move || {
        let body = json!({"scope": "demo", "binding": "shell"});
        let auth = format!("Bearer {owner}");
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
            ("Idempotency-Key", "abuse-drill"),
        ];
        assert_eq!(
            http_raw(&management, "POST", "/v1/work", &headers, &body.to_string()).0,
            201
        );
    });
    drop(idle);
    drop(slow);
}

/// The daemon under an open-files limit of 400 has a toolbelt connection budget of one socket's
/// cap (32); thirteen flooded sockets would hold 416 connections without it, more than its files.
#[test]
fn many_flooded_toolbelt_sockets_together_leave_the_owner_room() {
    let tmp = meeting();
    let daemon = Daemon::start_with_open_files(400, &shell_config(&publish_and_hold(tmp.path())));
    let sockets: Vec<_> = (0..13).map(|_| hold_one(&daemon, tmp.path()).1).collect();
    let floods: Vec<(Holder, usize)> = sockets.iter().map(|s| Holder::start(s, 32, false)).collect();
    let attempted: usize = floods.iter().map(|(_, n)| n).sum();
    let during = open_files(daemon.pid());
    eprintln!("{attempted} flood connections on 13 sockets; the daemon's open files: {during} of 400");
    assert!(during < 400, "the daemon kept files of its own: {during}");
    let management = daemon.management_socket();
    let owner = daemon.operator_token();
    answers_within_a_minute("the owner's health", move || {
        assert_eq!(http(&management, "GET", "/v1/health", Some(&owner), None).0, 200);
    });
    drop(floods);
    std::fs::write(tmp.path().join("release"), "").unwrap();
}

#[test]
fn a_half_sent_request_is_closed_after_the_header_timeout() {
    let daemon = Daemon::start(Some(
        &json!({"version": 1, "limits": {"header_timeout_seconds": 1}, "scopes": {}}).to_string(),
    ));
    let mut stream = std::os::unix::net::UnixStream::connect(daemon.management_socket()).unwrap();
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut rest = Vec::new();
    let read = std::io::Read::read_to_end(&mut stream, &mut rest);
    assert!(
        read.is_ok(),
        "the daemon closed the connection instead of waiting: {read:?}"
    );
}

#[test]
fn a_body_that_stops_arriving_is_408_request_timeout() {
    let (_daemon, mut stream) = validate_with_a_body_timeout(r#"{"config_text":"#);
    let answer = answer_to(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"error\":\"request_timeout\""), "{answer}");
}

/// A body's timer is armed the first time it is not ready, however much came before: bytes that
/// keep coming, each before the last one's wait ran out, do not push the deadline back.
#[test]
fn a_body_that_trickles_past_its_deadline_is_408_request_timeout() {
    // The body's first byte comes with the head, so the body is ready when first read.
    let (_daemon, mut stream) = validate_with_a_body_timeout("{");
    // Twenty bytes over six seconds, six times the body's timeout; once the daemon has answered and
    // closed, the writes fail.
    let sent = (0..20)
        .take_while(|_| {
            std::thread::sleep(Duration::from_millis(300));
            stream.write_all(b" ").is_ok()
        })
        .count();
    assert!(sent < 20, "the daemon waited for the whole trickle");
    let answer = answer_to(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

/// A daemon whose request bodies must arrive within a second, and a config validation sent to it
/// with a 100-byte body of which only `first` came with the head.
fn validate_with_a_body_timeout(first: &str) -> (Daemon, std::os::unix::net::UnixStream) {
    let daemon = Daemon::start(Some(
        &json!({"version": 1, "limits": {"body_timeout_seconds": 1}, "scopes": {}}).to_string(),
    ));
    let mut stream = std::os::unix::net::UnixStream::connect(daemon.management_socket()).unwrap();
    let head = format!(
        "POST /v1/config/validate HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{first}",
        daemon.operator_token()
    );
    stream.write_all(head.as_bytes()).unwrap();
    (daemon, stream)
}

/// Everything the daemon sends on `stream` until it closes it.
fn answer_to(stream: &mut std::os::unix::net::UnixStream) -> String {
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(stream, &mut answer);
    answer
}

#[test]
fn oversized_ids_keys_and_event_data_are_refused_before_anything_is_stored() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let execution = daemon.first_execution(&work);
    let audit = || {
        daemon.json(&["audit", "--execution", &execution])["items"]
            .as_array()
            .unwrap()
            .len()
    };
    let before = audit();
    let long = "k".repeat(201);
    let call = json!({"operation": "read_context", "input": {}, "request_id": long});
    let (status, answer) = http(&socket, "POST", "/v1/toolbelt/call", Some(&token), Some(&call));
    assert_eq!((status, answer["error"].as_str()), (400, Some("invalid_input")));
    let auth = format!("Bearer {token}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("Idempotency-Key", long.as_str()),
    ];
    let body = json!({"operation": "read_context", "input": {}}).to_string();
    let (status, answer) = http_raw(&socket, "POST", "/v1/toolbelt/call", &headers, &body);
    assert_eq!((status, answer["error"].as_str()), (400, Some("invalid_input")));
    for (field, value) in [("operation", "o".repeat(129)), ("work_id", "w".repeat(201))] {
        let mut call = json!({"operation": "read_context", "input": {}});
        call[field] = json!(value);
        let (status, answer) = http(&socket, "POST", "/v1/toolbelt/call", Some(&token), Some(&call));
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some("invalid_input")),
            "{field}"
        );
    }
    assert_eq!(audit(), before, "nothing was recorded");
    let at_limit = json!({"operation": "read_context", "input": {}, "request_id": "k".repeat(200)});
    assert_eq!(
        http(&socket, "POST", "/v1/toolbelt/call", Some(&token), Some(&at_limit)).0,
        200,
        "200 bytes pass"
    );
    let emit = |bytes: usize| {
        let input = json!({"type": "demo.big", "data": {"text": "x".repeat(bytes)}});
        toolbelt_call(&socket, &token, "emit", input)
    };
    let (status, answer) = emit(70 * 1024);
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_input")),
        "data past 64 KiB"
    );
    assert_eq!(emit(60 * 1024).0, 200, "data within 64 KiB");

    let owner = format!("Bearer {}", daemon.operator_token());
    let management = daemon.management_socket();
    let create = |key: &str, body: serde_json::Value| {
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", owner.as_str()),
            ("Idempotency-Key", key),
        ];
        http_raw(&management, "POST", "/v1/work", &headers, &body.to_string())
    };
    let keyed = |key: &str| {
        create(
            key,
            json!({"scope": "demo", "binding": "shell", "keys": [long.clone()]}),
        )
    };
    let (status, answer) = keyed("oversized-key");
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_input")),
        "a 201-byte correlation key"
    );
    let keys: Vec<String> = (0..33).map(|i| format!("k{i}")).collect();
    let too_many = create("many-keys", json!({"scope": "demo", "binding": "shell", "keys": keys}));
    assert_eq!(
        (too_many.0, too_many.1["error"].as_str()),
        (400, Some("invalid_input")),
        "33 keys"
    );
    let input = json!({"text": "x".repeat(70 * 1024)});
    let large = create(
        "large-input",
        json!({"scope": "demo", "binding": "shell", "input": input}),
    );
    assert_eq!(
        (large.0, large.1["error"].as_str()),
        (400, Some("invalid_input")),
        "70 KiB of input"
    );
    let (status, answer) = keyed(&long);
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("idempotency_key_required")),
        "a 201-byte key"
    );
    let listed = daemon.json(&["work", "list"])["items"].as_array().unwrap().len();
    assert_eq!(listed, 1, "no Work was created");
}

#[test]
fn a_work_past_its_store_quota_is_refused_new_writes_but_can_still_finish() {
    let tmp = meeting();
    let mut config: serde_json::Value = serde_json::from_str(&shell_config(&publish_and_hold(tmp.path()))).unwrap();
    config["limits"] = json!({"work_store_bytes": 200_000});
    let daemon = Daemon::start(Some(&config.to_string()));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let emit = |n: usize| {
        let body = json!({"operation": "emit", "request_id": format!("e-{n}"),
                          "input": {"type": "demo.big", "data": {"n": n, "text": "x".repeat(10 * 1024)}}});
        http(&socket, "POST", "/v1/toolbelt/call", Some(&token), Some(&body))
    };
    let accepted = (0..100).take_while(|&n| emit(n).0 == 200).count();
    assert!(
        (10..20).contains(&accepted),
        "about 200 KB of 10 KiB events, then refused: {accepted}"
    );
    let (status, answer) = emit(accepted);
    assert_eq!(
        (status, answer["error"].as_str()),
        (422, Some("quota_exceeded")),
        "{answer}"
    );
    assert!(answer["remedy"].as_str().unwrap().contains("work_store_bytes"));
    assert_eq!(
        toolbelt_call(&socket, &token, "read_context", json!({})).1["error"],
        "quota_exceeded"
    );
    let session = json!({"tool_id": "read_context"});
    let opened = http(&socket, "POST", "/v1/toolbelt/sessions", Some(&token), Some(&session));
    assert_eq!(
        (opened.0, opened.1["error"].as_str()),
        (422, Some("quota_exceeded")),
        "no session opens"
    );
    assert_eq!(emit(0).0, 200, "a retry of a committed call replays");

    let declared = toolbelt_call(&socket, &token, "declare_outcome", json!({"status": "succeeded"}));
    assert_eq!(
        declared.0, 200,
        "a Work past its quota can still finish: {}",
        declared.1
    );
    std::fs::write(tmp.path().join("release"), "").unwrap();
    daemon.await_work(&work, "succeeded");
    std::fs::remove_file(tmp.path().join("release")).unwrap();

    let (_, other_socket, other_token) = hold_one(&daemon, tmp.path());
    let other = toolbelt_call(&other_socket, &read_token(&other_token), "read_context", json!({}));
    assert_eq!(other.0, 200, "each Work has its own quota");
    std::fs::write(tmp.path().join("release"), "").unwrap();
}

/// An attempt that writes more than `limits.attempt_output_bytes` of output is stopped (its log
/// says why), so a looping program cannot fill the disk the store is on.
#[test]
fn an_attempt_past_its_output_limit_is_killed() {
    let flood = "while true; do head -c 20000 /dev/zero | tr '\\0' x; sleep 0.1; done";
    let mut config: serde_json::Value = serde_json::from_str(&shell_config(flood)).unwrap();
    config["limits"] = json!({"attempt_output_bytes": 100_000});
    let daemon = Daemon::start(Some(&config.to_string()));
    let work = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&work, "failed");
    assert_eq!(failed["outcome"]["summary"], "killed before it exited");
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{}", daemon.first_execution(&work))]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("limits.attempt_output_bytes"),
        "{}",
        &log[log.len().saturating_sub(300)..]
    );
}
