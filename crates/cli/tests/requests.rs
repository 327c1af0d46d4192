//! The management API's request rules through the real socket: strict bodies and envelopes, and
//! Idempotency-Key replay and conflict.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

fn post(daemon: &Daemon, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let auth = format!("Bearer {}", daemon.operator_token());
    let mut all = vec![("Authorization", auth.as_str())];
    all.extend_from_slice(headers);
    http_raw(&daemon.management_socket(), "POST", path, &all, body)
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

fn work_body() -> String {
    json!({"scope": "setup", "binding": "shell"}).to_string()
}

#[test]
fn a_mutation_needs_an_idempotency_key_and_a_retry_completes_the_same_operation() {
    let daemon = Daemon::start(None);
    let (status, body) = post(&daemon, "/v1/work", &[JSON], &work_body());
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("idempotency_key_required"))
    );
    assert!(
        daemon.json(&["work", "list"])["items"].as_array().unwrap().is_empty(),
        "nothing was created"
    );

    let key = ("Idempotency-Key", "create-1");
    let first = post(&daemon, "/v1/work", &[JSON, key], &work_body());
    let retry = post(&daemon, "/v1/work", &[JSON, key], &work_body());
    assert_eq!(first.0, 201);
    assert_eq!(retry, first, "the replay is the original status and body");
    assert_eq!(daemon.json(&["work", "list"])["items"].as_array().unwrap().len(), 1);

    let other = json!({"scope": "setup", "binding": "shell", "input": {"n": 2}}).to_string();
    let (status, body) = post(&daemon, "/v1/work", &[JSON, key], &other);
    assert_eq!((status, body["error"].as_str()), (409, Some("idempotency_conflict")));
    let event = json!({"type": "demo.noted", "scope": "setup"}).to_string();
    let (status, body) = post(&daemon, "/v1/events", &[JSON, key], &event);
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("idempotency_conflict")),
        "bound to the path too"
    );
}

#[test]
fn the_cli_retries_with_the_same_key() {
    let daemon = Daemon::start(None);
    let args = ["--idempotency-key", "k-7", "emit", "demo.noted", "--scope", "setup"];
    let first = daemon.json(&args);
    let again = daemon.json(&args);
    assert_eq!(first["id"], again["id"]);
    let noted = daemon.json(&["events", "list"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "demo.noted")
        .count();
    assert_eq!(noted, 1);
}

#[test]
fn strict_requests_are_refused_and_change_nothing() {
    let daemon = Daemon::start(None);
    let key = ("Idempotency-Key", "strict");
    /// What is wrong, the path, the headers and the body.
    type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, String);
    let cases: [Case; 7] = [
        (
            "text content type",
            "/v1/work",
            vec![("Content-Type", "text/plain"), key],
            work_body(),
        ),
        ("no content type", "/v1/work", vec![key], work_body()),
        ("a query string", "/v1/work?x=1", vec![JSON, key], work_body()),
        (
            "a duplicate key",
            "/v1/work",
            vec![JSON, key],
            r#"{"scope":"setup","scope":"setup","binding":"shell"}"#.into(),
        ),
        (
            "a null",
            "/v1/work",
            vec![JSON, key],
            r#"{"scope":"setup","binding":"shell","input":null}"#.into(),
        ),
        (
            "an unknown field",
            "/v1/work",
            vec![JSON, key],
            r#"{"scope":"setup","binding":"shell","owner":"x"}"#.into(),
        ),
        ("not JSON", "/v1/work", vec![JSON, key], "{".into()),
    ];
    for (what, path, headers, body) in cases {
        let (status, answer) = post(&daemon, path, &headers, &body);
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some("invalid_request")),
            "{what}"
        );
        assert!(
            !answer["message"].as_str().unwrap().contains("setup"),
            "{what}: the message echoes the body"
        );
    }
    let big = json!({"scope": "setup", "binding": "shell", "input": "x".repeat(1024 * 1024)}).to_string();
    let (status, answer) = post(&daemon, "/v1/work", &[JSON, key], &big);
    assert_eq!(
        (status, answer["error"].as_str()),
        (413, Some("body_too_large")),
        "over 1 MiB"
    );
    assert!(daemon.json(&["work", "list"])["items"].as_array().unwrap().is_empty());
}

/// The header `name` of a raw response, if present.
fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    response.lines().take_while(|l| !l.is_empty()).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn single_reads_carry_an_etag_and_answer_304_until_they_change() {
    let daemon = Daemon::start(Some(&shell_config("sleep 0.3; os outcome succeeded")));
    let work = daemon.create_work("demo", "shell");
    let auth = format!("Bearer {}", daemon.operator_token());
    let path = format!("/v1/work/{work}");
    let get = |extra: Option<(&str, &str)>| {
        let mut headers = vec![("Authorization", auth.as_str())];
        headers.extend(extra);
        http_response(&daemon.management_socket(), "GET", &path, &headers, "")
    };
    let first = get(None);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let etag = header(&first, "etag").expect("an ETag").to_owned();
    daemon.await_work(&work, "succeeded");
    let changed = get(Some(("If-None-Match", etag.as_str())));
    assert!(
        changed.starts_with("HTTP/1.1 200"),
        "the Work changed, so its revision did"
    );
    let current = header(&changed, "etag").unwrap().to_owned();
    assert_ne!(current, etag);
    let cached = get(Some(("If-None-Match", current.as_str())));
    assert!(cached.starts_with("HTTP/1.1 304"), "{cached}");
    assert_eq!(header(&cached, "etag"), Some(current.as_str()));
}

/// The catalog's descriptors and the active configuration are single reads with revisions too.
#[test]
fn tools_and_the_configuration_carry_etags() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let (status, etag) = revalidate(&daemon, "/v1/tools/emit", None);
    assert_eq!(status, 200);
    let etag = etag.expect("a descriptor carries an ETag");
    assert_eq!(revalidate(&daemon, "/v1/tools/emit", Some(&etag)).0, 304);
    assert_eq!(
        revalidate(&daemon, "/v1/tools/read_context", Some(&etag)).0,
        200,
        "another descriptor"
    );
    assert_revisions(&daemon, "/v1/config", || {
        daemon.json(&["config", "set", "/limits", r#"{"causal_max_depth": 7}"#]);
    });
}

#[test]
fn lists_page_with_authenticated_cursors_bound_to_their_filters_and_upper_bound() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let token = daemon.operator_token();
    let get = |path: &str| http(&daemon.management_socket(), "GET", path, Some(&token), None);
    for i in 0..7 {
        daemon.json(&[
            "emit",
            "demo.paged",
            "--scope",
            "demo",
            "--data",
            &format!(r#"{{"i":{i}}}"#),
        ]);
    }
    let (status, first) = get("/v1/events?limit=3");
    assert_eq!(status, 200);
    assert_eq!(first["items"].as_array().unwrap().len(), 3);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    daemon.json(&["emit", "demo.later", "--scope", "demo"]); // after the traversal began

    let mut seen: Vec<i64> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    let mut next = Some(cursor.clone());
    while let Some(c) = next {
        let (status, page) = get(&format!("/v1/events?limit=3&cursor={c}"));
        assert_eq!(status, 200, "{page}");
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["sequence"].as_i64().unwrap()),
        );
        next = page["next_cursor"].as_str().map(str::to_owned);
    }
    assert_eq!(
        seen.len(),
        7,
        "the traversal stops at the upper bound its first page captured"
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]));

    let mut tampered = cursor.clone().into_bytes();
    tampered[5] = if tampered[5] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for (what, path) in [
        ("tampered", format!("/v1/events?limit=3&cursor={tampered}")),
        ("other filters", format!("/v1/events?limit=3&work=x&cursor={cursor}")),
        ("another list", format!("/v1/executions?limit=3&cursor={cursor}")),
    ] {
        let (status, body) = get(&path);
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_cursor")),
            "{what}"
        );
    }
    let (status, body) = get("/v1/events?limit=0");
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_request")));

    // Expiry: the same position re-sealed with the daemon's own key, once as it was (accepted, so
    // the re-sealing is faithful) and once with its 15 minutes over.
    let cursors = daemon.cursors();
    let position = cursors
        .open(
            &cursor,
            "/v1/events",
            "work=&type=&since=&after=",
            conduit_core::Timestamp(0),
        )
        .unwrap_or_else(|_| panic!("the daemon's cursor opens with its key"));
    let resealed = cursors.seal(&position);
    assert_eq!(get(&format!("/v1/events?limit=3&cursor={resealed}")).0, 200);
    let expired = cursors.seal(&conduit_server::Position {
        expires: position.expires - 15 * 60 * 1000,
        ..position
    });
    let (status, body) = get(&format!("/v1/events?limit=3&cursor={expired}"));
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_cursor")),
        "expired"
    );
}

#[test]
fn the_cli_follows_cursors_to_the_last_page() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let auth = format!("Bearer {}", daemon.operator_token());
    for i in 0..105 {
        let key = format!("k{i}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Idempotency-Key", key.as_str()),
        ];
        let body = json!({"type": "demo.many", "scope": "demo"}).to_string();
        assert_eq!(
            http_raw(&daemon.management_socket(), "POST", "/v1/events", &headers, &body).0,
            201
        );
    }
    let (_, first) = http(
        &daemon.management_socket(),
        "GET",
        "/v1/events",
        Some(&daemon.operator_token()),
        None,
    );
    assert_eq!(
        first["items"].as_array().unwrap().len(),
        100,
        "a page holds 100 by default"
    );
    let all = daemon.json(&["events", "list"])["items"].as_array().unwrap().len();
    assert_eq!(all, 105, "the CLI read every page");
}

#[test]
fn the_openapi_document_is_served_to_operators() {
    let daemon = Daemon::start(None);
    let (status, doc) = http(
        &daemon.management_socket(),
        "GET",
        "/v1/openapi.json",
        Some(&daemon.operator_token()),
        None,
    );
    assert_eq!((status, doc["openapi"].as_str()), (200, Some("3.1.0")));
    assert!(doc["paths"]["/v1/work/{id}/cancel"]["post"].is_object());
    let (status, _) = http(&daemon.management_socket(), "GET", "/v1/openapi.json", None, None);
    assert_eq!(status, 401);
}
