//! The execution's side: its toolbelt socket and token from the environment, and the calls it
//! makes (`docs/api.md`, "Toolbelt socket").

use std::ffi::OsString;
use std::path::PathBuf;

use conduit_core::toolbelt_env::{OS_ENDPOINT, OS_TOKEN_FILE};
use serde_json::{json, Value};

use crate::connection::{post, Connection, Request};
use crate::json::{object, strings};
use crate::report::Failure;

/// The exit status of `os` when a gate parked the call (the segment should end now).
pub const PARKED_EXIT: u8 = 3;

const CALL_PATH: &str = "/v1/toolbelt/call";
const GUIDANCE_PATH: &str = "/v1/toolbelt/guidance";
const SESSIONS_PATH: &str = "/v1/toolbelt/sessions";

/// The toolbelt connection described by `OS_ENDPOINT` and `OS_TOKEN_FILE`.
pub fn connection_from_env() -> Result<Connection, Failure> {
    connection_from(std::env::var_os(OS_ENDPOINT), std::env::var_os(OS_TOKEN_FILE))
}

/// What to tell an agent whose segment now waits: a gate parked its call (it should make the same
/// call again when resumed), or the operation declared a wait (a translated wait: its output is the
/// call's result). `None` for any other answer.
pub fn parked_message(answer: &Value) -> Option<String> {
    const RELEASED: &str = "This segment's authority is released, so end it now; the execution is resumed when \
                            the wait ends";
    if let Some(wait) = answer.get("wait") {
        let operation = answer["operation"].as_str().unwrap_or("the operation");
        return Some(format!(
            "`{operation}` declared a wait: an event of type {} on {} is awaited. {RELEASED}.",
            wait["types"], wait["keys"]
        ));
    }
    let parked = answer.get("parked")?;
    let gate = parked["gate"].as_str().unwrap_or("a");
    let awaited = match answer["output"]["approval_id"].as_str() {
        Some(id) => format!("a person's approval (approval {id})"),
        None => format!("an event of type {}", parked["wait"]["types"]),
    };
    Some(format!(
        "parked by the `{gate}` gate: {awaited} is awaited. {RELEASED}, and should then make the same call again."
    ))
}

/// Any operation: `{"operation", "input", "request_id"?}`.
pub fn call(operation: &str, input: Value, request_id: Option<String>) -> Request {
    call_in(operation, input, request_id, None)
}

/// Any operation, inside an open tool session when `session` names one.
pub fn call_in(operation: &str, input: Value, request_id: Option<String>, session: Option<String>) -> Request {
    let body = object([
        ("operation", Some(operation.into())),
        ("input", Some(input)),
        ("request_id", request_id.map(Value::from)),
        ("session_id", session.map(Value::from)),
    ]);
    post(CALL_PATH, body)
}

/// `POST /v1/toolbelt/sessions`: a session of `operation`.
pub fn open_session(operation: &str) -> Request {
    post(SESSIONS_PATH, json!({ "tool_id": operation }))
}

/// `POST /v1/toolbelt/sessions/{id}/close`.
pub fn close_session(id: &str, failed: bool) -> Request {
    let path = format!("{SESSIONS_PATH}/{}/close", conduit_client::percent_encode_segment(id));
    post(&path, json!({ "outcome": if failed { "failed" } else { "completed" } }))
}

pub fn emit(
    event_type: &str,
    data: Option<Value>,
    correlation_key: Option<String>,
    request_id: Option<String>,
) -> Request {
    let input = object([
        ("type", Some(event_type.into())),
        ("data", data),
        ("correlation_key", correlation_key.map(Value::from)),
    ]);
    call("emit", input, request_id)
}

/// `status` is `succeeded` or `failed`.
pub fn declare_outcome(status: &str, summary: Option<String>, artifacts: Vec<String>) -> Request {
    let input = object([
        ("status", Some(status.into())),
        ("summary", summary.map(Value::from)),
        ("artifacts", strings(artifacts)),
    ]);
    call("declare_outcome", input, None)
}

pub fn read_context() -> Request {
    call("read_context", json!({}), None)
}

/// `timeout` is passed through as given (`"10m"`, `"30s"`); the host validates it.
pub fn wait(types: Vec<String>, keys: Vec<String>, timeout: Option<String>, artifacts: Vec<String>) -> Request {
    let input = object([
        ("types", Some(types.into())),
        ("keys", strings(keys)),
        ("timeout", timeout.map(Value::from)),
        ("artifacts", strings(artifacts)),
    ]);
    call("wait", input, None)
}

pub fn create_work(binding: &str, input: Option<Value>, keys: Vec<String>, request_id: Option<String>) -> Request {
    let input = object([
        ("binding", Some(binding.into())),
        ("input", input),
        ("keys", strings(keys)),
    ]);
    call("create_work", input, request_id)
}

pub fn guidance() -> Request {
    Request::Get(GUIDANCE_PATH.to_owned())
}

/// `GET /v1/tools`: the execution's catalog.
pub fn tools() -> Request {
    Request::Get("/v1/tools".to_owned())
}

/// `GET /v1/tools/{id}`: one tool's descriptor.
pub fn tool(id: &str) -> Request {
    Request::Get(format!("/v1/tools/{}", conduit_client::percent_encode_segment(id)))
}

fn connection_from(endpoint: Option<OsString>, token_file: Option<OsString>) -> Result<Connection, Failure> {
    let required = |name: &str, value: Option<OsString>| {
        value.filter(|v| !v.is_empty()).map(PathBuf::from).ok_or_else(|| {
            Failure::Local(format!(
                "{name} is not set: os runs inside an Open Conduit execution, which sets \
                 {OS_ENDPOINT} and {OS_TOKEN_FILE}"
            ))
        })
    };
    let connection = Connection::new(required(OS_ENDPOINT, endpoint)?, required(OS_TOKEN_FILE, token_file)?);
    Ok(connection.with_dial_patience(DIAL_PATIENCE))
}

/// How long `os` waits for its toolbelt socket to answer again: a restarting daemon adopts the
/// running attempts and serves their sockets again within seconds.
const DIAL_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn body(request: Request) -> Value {
        match request {
            Request::Post { path, body } if path == CALL_PATH => body,
            other => panic!("expected a toolbelt call, got {other:?}"),
        }
    }

    #[test]
    fn calls_carry_operation_input_and_only_given_fields() {
        for (request, expected) in [
            (
                emit("demo.hello", None, None, None),
                json!({"operation": "emit", "input": {"type": "demo.hello"}}),
            ),
            (
                emit("demo.hello", Some(json!([1])), Some("k".into()), Some("r1".into())),
                json!({"operation": "emit", "input": {"type": "demo.hello", "data": [1], "correlation_key": "k"}, "request_id": "r1"}),
            ),
            (
                declare_outcome("failed", Some("broke".into()), vec!["out/log.txt".into()]),
                json!({"operation": "declare_outcome", "input": {"status": "failed", "summary": "broke", "artifacts": ["out/log.txt"]}}),
            ),
            (read_context(), json!({"operation": "read_context", "input": {}})),
            (
                wait(vec!["a.b".into(), "c.d".into()], vec![], Some("10m".into()), vec![]),
                json!({"operation": "wait", "input": {"types": ["a.b", "c.d"], "timeout": "10m"}}),
            ),
            (
                wait(vec!["a.b".into()], vec!["pr:1".into()], None, vec!["notes.md".into()]),
                json!({"operation": "wait", "input": {"types": ["a.b"], "keys": ["pr:1"], "artifacts": ["notes.md"]}}),
            ),
            (
                create_work("shell", Some(json!({"n": 2})), vec!["k".into()], Some("r2".into())),
                json!({"operation": "create_work", "input": {"binding": "shell", "input": {"n": 2}, "keys": ["k"]}, "request_id": "r2"}),
            ),
            (
                call("http.fetch", json!({"url": "https://example.org"}), None),
                json!({"operation": "http.fetch", "input": {"url": "https://example.org"}}),
            ),
        ] {
            assert_eq!(body(request), expected);
        }
    }

    #[test]
    fn missing_environment_says_where_os_runs() {
        let os = |s: &str| Some(OsString::from(s));
        for (endpoint, token_file, missing) in [
            (None, os("/t"), OS_ENDPOINT),
            (os(""), os("/t"), OS_ENDPOINT),
            (os("/s"), None, OS_TOKEN_FILE),
        ] {
            let Err(Failure::Local(message)) = connection_from(endpoint, token_file) else {
                panic!("expected a local failure for {missing}");
            };
            assert!(message.starts_with(missing), "{message}");
            assert!(message.contains("inside an Open Conduit execution"), "{message}");
        }
        let connection = connection_from(os("/s"), os("/t")).expect("connection");
        assert_eq!(connection.socket(), std::path::Path::new("/s"));
    }
}
