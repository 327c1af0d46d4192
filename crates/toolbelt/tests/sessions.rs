//! Tool sessions (RFC 0078 §D): the bracket on the Work's durable log, the host closing sessions
//! when authority ends, and every refusal of a session a caller may not use.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use conduit_core::execution::SegmentEnd;
use conduit_core::{ErrorCode, Event, SessionOutcome};
use conduit_scheduler::{complete, Claim};
use conduit_toolbelt::{CloseSession, OpenSession, Presented};
use serde_json::{json, Value};

fn open(h: &Harness, claim: &Claim, token: &str, tool: &str, request_id: Option<&str>) -> Result<Value, ErrorCode> {
    let request = OpenSession {
        tool_id: tool.into(),
        request_id: request_id.map(str::to_owned),
    };
    h.toolbelt
        .open_session(&claim.execution.id, &Presented::new(token), &request)
        .map_err(|r| r.code)
}

fn close(h: &Harness, claim: &Claim, token: &str, id: &str, outcome: SessionOutcome) -> Result<Value, ErrorCode> {
    h.toolbelt
        .close_session(
            &claim.execution.id,
            &Presented::new(token),
            id,
            &CloseSession { outcome },
        )
        .map_err(|r| r.code)
}

fn in_session(h: &Harness, claim: &Claim, token: &str, operation: &str, session: &str) -> Result<Value, ErrorCode> {
    let input = if operation == "emit" {
        json!({"type": "demo.step"})
    } else {
        json!({})
    };
    let request = json!({"operation": operation, "input": input, "session_id": session});
    h.call_at(claim, token, request, T0)
}

/// The session and call records on the Work's log, in acceptance order.
fn bracket(h: &Harness, claim: &Claim) -> Vec<Event> {
    h.store
        .read(|tx| tx.list_events(Some(&claim.work.id), 1000))
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type.starts_with("tool.session.") || e.event_type.starts_with("agent.tool"))
        .collect()
}

fn session_id(answer: &Value) -> String {
    answer["session_id"].as_str().unwrap().to_owned()
}

#[test]
fn a_session_brackets_its_calls_on_the_durable_log() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let id = session_id(&open(&h, &claim, &token, "emit", None).unwrap());
    in_session(&h, &claim, &token, "emit", &id).unwrap();
    in_session(&h, &claim, &token, "emit", &id).unwrap();
    let closed = close(&h, &claim, &token, &id, SessionOutcome::Completed).unwrap();
    assert_eq!(
        (closed["state"].as_str(), closed["outcome"].as_str()),
        (Some("closed"), Some("completed"))
    );

    let log = bracket(&h, &claim);
    let types: Vec<&str> = log.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "tool.session.opened",
            "agent.toolCalled",
            "agent.toolReturned",
            "agent.toolCalled",
            "agent.toolReturned",
            "tool.session.closed"
        ]
    );
    assert!(log.windows(2).all(|w| w[0].sequence < w[1].sequence));
    assert_eq!(log[0].data, json!({"sessionId": id, "toolId": "emit"}), "content-free");
    assert_eq!(
        log[5].data,
        json!({"sessionId": id, "toolId": "emit", "outcome": "completed"})
    );
    assert_eq!(log[1].data["sessionId"], id.as_str(), "each call names its session");
    assert_eq!(log[5].causation.parent.as_deref(), Some(log[0].id.as_str()));
}

#[test]
fn a_declaration_ends_authority_and_the_host_closes_open_sessions_failed() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let id = session_id(&open(&h, &claim, &token, "read_context", None).unwrap());
    h.call(&claim, &token, "declare_outcome", json!({"status": "succeeded"}))
        .unwrap();
    let closed = bracket(&h, &claim)
        .into_iter()
        .find(|e| e.event_type == "tool.session.closed");
    assert_eq!(closed.unwrap().data["outcome"], "failed");
    assert_eq!(
        close(&h, &claim, &token, &id, SessionOutcome::Completed),
        Err(ErrorCode::AuthorityReleased)
    );
}

#[test]
fn a_segment_that_ends_without_declaring_closes_its_sessions_failed() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let id = session_id(&open(&h, &claim, &token, "emit", None).unwrap());
    h.store
        .write(|tx| complete(tx, &claim.execution.id, SegmentEnd::Exited(0), Default::default(), T0))
        .unwrap();
    let session = h.store.read(|tx| tx.get_tool_session(&id)).unwrap().unwrap();
    assert_eq!(session.closed.map(|(o, _)| o), Some(SessionOutcome::Failed));
}

#[test]
fn a_retried_open_or_close_completes_the_same_operation() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let first = open(&h, &claim, &token, "emit", Some("r1")).unwrap();
    assert_eq!(open(&h, &claim, &token, "emit", Some("r1")).unwrap(), first);
    assert_eq!(
        open(&h, &claim, &token, "read_context", Some("r1")),
        Err(ErrorCode::RequestConflict)
    );
    let id = session_id(&first);
    let closed = close(&h, &claim, &token, &id, SessionOutcome::Completed).unwrap();
    assert_eq!(
        close(&h, &claim, &token, &id, SessionOutcome::Completed).unwrap(),
        closed
    );
    assert_eq!(
        close(&h, &claim, &token, &id, SessionOutcome::Failed),
        Err(ErrorCode::SessionNotOpen)
    );
    let opened = bracket(&h, &claim)
        .iter()
        .filter(|e| e.event_type == "tool.session.opened")
        .count();
    assert_eq!(opened, 1);
}

#[test]
fn sessions_refuse_what_the_caller_may_not_use() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    assert_eq!(
        open(&h, &claim, &token, "notes.view", None),
        Err(ErrorCode::Forbidden),
        "not granted"
    );
    assert_eq!(open(&h, &claim, &token, "emit", None).map(|_| ()).err(), None);
    assert_eq!(
        open(&h, &claim, &token, "wait", None),
        Err(ErrorCode::InvalidInput),
        "a declaration"
    );
    assert_eq!(open(&h, &claim, "not-a-token", "emit", None), Err(ErrorCode::Forbidden));

    let emit = session_id(&open(&h, &claim, &token, "emit", None).unwrap());
    assert_eq!(
        in_session(&h, &claim, &token, "read_context", &emit),
        Err(ErrorCode::InvalidInput)
    );
    assert_eq!(
        in_session(&h, &claim, &token, "emit", "no-such-session"),
        Err(ErrorCode::NotFound)
    );
    close(&h, &claim, &token, &emit, SessionOutcome::Completed).unwrap();
    assert_eq!(
        in_session(&h, &claim, &token, "emit", &emit),
        Err(ErrorCode::SessionNotOpen)
    );

    let (other, other_token) = h.attempt();
    let theirs = session_id(&open(&h, &other, &other_token, "emit", None).unwrap());
    assert_eq!(
        in_session(&h, &claim, &token, "emit", &theirs),
        Err(ErrorCode::NotFound)
    );
    assert_eq!(
        close(&h, &claim, &token, &theirs, SessionOutcome::Completed),
        Err(ErrorCode::NotFound),
        "another execution's session is not this one's to close"
    );
}
