//! The request builders' paths and bodies.
use serde_json::json;

use super::*;

fn get(path: &str) -> Request {
    Request::Get(path.to_owned())
}

#[test]
fn requests_encode_ids_and_leave_out_absent_parameters() {
    for (request, expected) in [
        (health(), get("/v1/health")),
        (list_work(None, None), get("/v1/work")),
        (
            list_work(Some("a b"), Some("ready")),
            get("/v1/work?scope=a%20b&state=ready"),
        ),
        (list_work(None, Some("failed")), get("/v1/work?state=failed")),
        (get_work("w/1"), get("/v1/work/w%2F1")),
        (
            list_events(
                &EventQuery {
                    work: Some("w:1".into()),
                    ..Default::default()
                },
                None,
            ),
            get("/v1/events?work=w%3A1"),
        ),
        (
            list_events(
                &EventQuery {
                    event_type: Some("a.b".into()),
                    since: None,
                    work: None,
                },
                Some(7),
            ),
            get("/v1/events?type=a.b&after=7"),
        ),
        (event_chain("e/1"), get("/v1/events/e%2F1/chain")),
        (list_executions(None), get("/v1/executions")),
        (
            list_audit(&AuditQuery {
                execution: Some("x/1"),
                ..AuditQuery::default()
            }),
            get("/v1/audit?execution=x%2F1"),
        ),
    ] {
        assert_eq!(request, expected);
    }
}

#[test]
fn create_work_sends_keys_grants_and_input_only_when_given() {
    assert_eq!(
        create_work("setup", "shell", NewWork::default()),
        post("/v1/work", json!({"scope": "setup", "binding": "shell"}))
    );
    let new = NewWork {
        input: Some(json!({"n": 1})),
        keys: vec!["k1".into(), "k2".into()],
        grants: vec!["deploy".into()],
    };
    assert_eq!(
        create_work("setup", "shell", new),
        post(
            "/v1/work",
            json!({"scope": "setup", "binding": "shell", "input": {"n": 1}, "keys": ["k1", "k2"], "grants": ["deploy"]})
        )
    );
}

#[test]
fn emit_sends_type_scope_and_optional_fields() {
    assert_eq!(
        emit(
            "demo.hello",
            "setup",
            Some(json!({"x": true})),
            Some("pr:1".into()),
            None
        ),
        post(
            "/v1/events",
            json!({"type": "demo.hello", "scope": "setup", "data": {"x": true}, "correlation_key": "pr:1"})
        )
    );
}

#[test]
fn state_dir_prefers_absolute_xdg_then_home() {
    let os = |s: &str| Some(OsString::from(s));
    for (xdg, home, expected) in [
        (os("/x"), os("/h"), Some("/x/open-conduit")),
        (os(""), os("/h"), Some("/h/.local/state/open-conduit")),
        (os("rel"), os("/h"), Some("/h/.local/state/open-conduit")),
        (None, os("/h"), Some("/h/.local/state/open-conduit")),
        (None, os(""), None),
        (None, None, None),
    ] {
        assert_eq!(default_state_dir(xdg, home), expected.map(PathBuf::from));
    }
}

#[test]
fn explicit_endpoint_and_token_file_need_no_state_dir() {
    let locations = Locations {
        state: None,
        endpoint: Some("/run/m.sock".into()),
        token_file: Some("/run/t".into()),
        idempotency_key: None,
        limit: None,
    };
    let connection = locations.connection().expect("connection");
    assert_eq!(connection.socket(), Path::new("/run/m.sock"));
}

#[test]
fn missing_socket_says_the_daemon_is_not_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("management.sock");
    let connection = Connection::new(socket.clone(), dir.path().join("token"));
    let Err(Failure::Transport(message)) = send(&connection, &health()) else {
        panic!("expected a transport failure");
    };
    assert!(message.contains("not running"), "{message}");
    assert!(message.contains(&socket.display().to_string()), "{message}");
}
