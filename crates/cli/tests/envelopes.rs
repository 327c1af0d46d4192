//! Every answer of both sockets is the flat JSON envelope with a stable code, whatever goes wrong:
//! no credential, the wrong credential class, a method a route does not take, a bad query, a body
//! over 1 MiB, a path that is not UTF-8, a request target or header section past its bound. One row per route of the management API's own table (which
//! the OpenAPI document matches) and per route of an execution's toolbelt socket.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use common::*;
use serde_json::Value;

/// Sends a request and reads the answer; a server that answers before reading a whole oversized
/// body may close the connection mid-write, so a failed write is not the test's failure.
fn send(socket: &Path, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String, Value) {
    send_with(socket, method, path, token, "", body)
}

/// [`send`] with `extra` header lines (each ending in CRLF).
fn send_with(
    socket: &Path,
    method: &str,
    path: &str,
    token: Option<&str>,
    extra: &str,
    body: &str,
) -> (u16, String, Value) {
    let mut stream = UnixStream::connect(socket).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}Content-Type: application/json\r\n\
         Idempotency-Key: envelope-{}\r\n{extra}Content-Length: {}\r\n\r\n",
        std::process::id(),
        body.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()));
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let content_type = response
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type: ").map(str::to_owned))
        .unwrap_or_default();
    let json = response.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, content_type, serde_json::from_str(json).unwrap_or(Value::Null))
}

/// Asserts an answer is `status` with `code` in the envelope.
fn refused(what: &str, got: (u16, String, Value), status: u16, code: &str) {
    let (got_status, content_type, body) = got;
    assert_eq!(
        (got_status, body["error"].as_str()),
        (status, Some(code)),
        "{what}: {body}"
    );
    assert!(content_type.starts_with("application/json"), "{what}: {content_type}");
    assert!(body["message"].is_string(), "{what}: {body}");
}

fn oversized() -> String {
    format!("{{\"x\":\"{}\"}}", "a".repeat(1024 * 1024))
}

#[test]
fn every_management_route_answers_every_kind_of_bad_request_in_the_envelope() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, _, token_file) = hold_one(&daemon, tmp.path());
    let execution = read_token(&token_file);
    let owner = daemon.operator_token();
    let socket = daemon.management_socket();
    let big = oversized();
    for (route, method) in conduit_server::management_routes() {
        let method = method.to_uppercase();
        let path = route.replace("{id}", "x").replace("{name}", "x");
        let what = format!("{method} {route}");
        if route == "/.well-known/openwop" {
            assert_eq!(
                send(&socket, &method, &path, None, "").0,
                200,
                "{what} needs no credential"
            );
            continue;
        }
        refused(&what, send(&socket, &method, &path, None, "{}"), 401, "unauthenticated");
        let class = send(&socket, &method, &path, Some(&execution), "{}");
        refused(&what, class, 403, "wrong_credential_class");
        // A read may check its credential inside its own read, but nothing it finds wrong with
        // the request answers before the credential does.
        let bad_query = format!("{path}?limit=x&cursor=%ff&bogus=1");
        let unknown = send(&socket, &method, &bad_query, Some("not-a-credential"), "{}");
        refused(&what, unknown, 401, "unauthenticated");
        let class = send(&socket, &method, &bad_query, Some(&execution), "{}");
        refused(&what, class, 403, "wrong_credential_class");
        refused(
            &what,
            send(&socket, "PUT", &path, Some(&owner), "{}"),
            405,
            "method_not_allowed",
        );
        let (status, content_type, body) = send(
            &socket,
            &method,
            &format!("{path}?limit=x&bogus=%ff"),
            Some(&owner),
            "{}",
        );
        assert!(
            content_type.starts_with("application/json"),
            "{what} with a bad query: {content_type}"
        );
        assert!(
            status < 400 || body["error"].is_string(),
            "{what} with a bad query: {status} {body}"
        );
        assert_ne!(status, 500, "{what} with a bad query");
        if route.contains('{') {
            let invalid = route.replace("{id}", "%ff").replace("{name}", "%ff");
            refused(
                &what,
                send(&socket, &method, &invalid, Some(&owner), "{}"),
                400,
                "invalid_request",
            );
        }
        if method == "POST" {
            refused(
                &what,
                send(&socket, &method, &path, Some(&owner), &big),
                413,
                "body_too_large",
            );
        }
    }
    for unserved in ["/v1/toolbelt/call", "/v1/toolbelt/guidance", "/v1/no/such/route"] {
        let class = send(&socket, "POST", unserved, Some(&execution), "{}");
        refused(unserved, class, 403, "wrong_credential_class");
        refused(
            unserved,
            send(&socket, "GET", unserved, None, ""),
            401,
            "unauthenticated",
        );
        refused(
            unserved,
            send(&socket, "GET", unserved, Some(&owner), ""),
            404,
            "not_found",
        );
        // A read routed before its check: the 404 is the credential's refusal to anyone else.
        let class = send(&socket, "GET", unserved, Some(&execution), "");
        refused(unserved, class, 403, "wrong_credential_class");
        let unknown = send(&socket, "GET", unserved, Some("not-a-credential"), "");
        refused(unserved, unknown, 401, "unauthenticated");
    }
    // A safe method a route does not take: the 405 is the credential's refusal too.
    for method in ["OPTIONS", "TRACE"] {
        let unknown = send(&socket, method, "/v1/work", Some("not-a-credential"), "");
        refused(method, unknown, 401, "unauthenticated");
        refused(
            method,
            send(&socket, method, "/v1/work", Some(&owner), ""),
            405,
            "method_not_allowed",
        );
    }
    assert!(daemon.cli(&["health"]).status.success(), "the daemon kept serving");
}

#[test]
fn every_toolbelt_route_answers_every_kind_of_bad_request_in_the_envelope() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let big = oversized();
    let routes = [
        ("POST", "/v1/toolbelt/call"),
        ("POST", "/v1/toolbelt/sessions"),
        ("POST", "/v1/toolbelt/sessions/x/close"),
        ("GET", "/v1/toolbelt/guidance"),
        ("GET", "/v1/toolbelt/serving?capability=git.credential"),
        ("GET", "/v1/tools"),
        ("GET", "/v1/tools/emit"),
    ];
    for (method, path) in routes {
        let what = format!("{method} {path}");
        refused(&what, send(&socket, method, path, None, "{}"), 401, "unauthenticated");
        refused(
            &what,
            send(&socket, "PUT", path, Some(&token), "{}"),
            405,
            "method_not_allowed",
        );
        if method == "POST" {
            refused(
                &what,
                send(&socket, method, path, Some(&token), &big),
                413,
                "body_too_large",
            );
        }
    }
    refused(
        "an unserved path",
        send(&socket, "GET", "/v1/work", Some(&token), ""),
        404,
        "not_found",
    );
    refused(
        "an unserved path",
        send(&socket, "GET", "/v1/work", None, ""),
        404,
        "not_found",
    );
    let (status, _) = toolbelt_call(&socket, &token, "read_context", serde_json::json!({}));
    assert_eq!(status, 200, "the socket kept serving");
}

#[test]
fn a_long_request_target_or_header_section_is_answered_in_the_envelope_on_both_sockets() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, toolbelt, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let owner = daemon.operator_token();
    // Past the envelope's 100, within the 128 hyper parses.
    let many: String = (0..120).map(|i| format!("X-Filler-{i}: y\r\n")).collect();
    let wide = format!("X-Filler: {}\r\n", "y".repeat(40 * 1024));
    for (socket, path, credential) in [
        (daemon.management_socket(), "/v1/work", owner.as_str()),
        (toolbelt, "/v1/tools", token.as_str()),
    ] {
        let long = format!("{path}?scope={}", "s".repeat(9 * 1024));
        for credential in [Some(credential), None] {
            let what = format!("{path} with credential {}", credential.is_some());
            refused(&what, send(&socket, "GET", &long, credential, ""), 414, "uri_too_long");
            for extra in [&many, &wide] {
                let answer = send_with(&socket, "GET", path, credential, extra, "");
                refused(&what, answer, 431, "headers_too_large");
            }
        }
        let within = format!("{path}?scope={}", "s".repeat(4 * 1024));
        assert_ne!(
            send(&socket, "GET", &within, Some(credential), "").0,
            414,
            "4 KiB is within"
        );
    }
}
