//! Tool sessions on the toolbelt (RFC 0078 §D): an execution opens a session of one of its granted
//! operations, tags calls with its `session_id`, and closes it. Opening and closing pass the same
//! ordered checks as a call of that operation; the records are content-free events on the Work's log.

use conduit_core::names::DECLARING_OPERATIONS;
use conduit_core::{ErrorCode, Refusal, SessionOutcome, ToolSession};
use conduit_scheduler::{close_session, open_session, HostError};
use conduit_store::{derived_id, new_id, Tx};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::authority::Authority;
use crate::checks;
use crate::token::Presented;
use crate::{CallRequest, Toolbelt};

/// `POST /v1/toolbelt/sessions`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenSession {
    pub tool_id: String,
    /// Makes a retried open return the session the first one opened.
    pub request_id: Option<String>,
}

/// `POST /v1/toolbelt/sessions/{id}/close`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseSession {
    pub outcome: SessionOutcome,
}

impl Toolbelt {
    /// Opens a session of `tool_id`, which the token must be allowed to call right now.
    pub fn open_session(
        &self,
        socket_execution: &str,
        presented: &Presented,
        request: &OpenSession,
    ) -> Result<Value, Refusal> {
        crate::check_request_id(request.request_id.as_deref())?;
        let now = self.clock.now();
        let config = self.caught_up_config()?;
        let as_call = CallRequest::of(&request.tool_id);
        let opened = self.store.write(|tx| -> Result<ToolSession, HostError> {
            let lease = checks::live_lease(tx, socket_execution, presented, now)?;
            let registry = self.registry();
            let a = checks::authorize(&config, &registry, lease, &as_call, now)?;
            registry.requirement_met(&request.tool_id, &config.package_grant(), config.package_gating())?;
            if DECLARING_OPERATIONS.contains(&request.tool_id.as_str()) {
                return Err(Refusal::invalid_input(
                    "a declaration ends the execution's authority: call it outside a session",
                )
                .into());
            }
            let id = match &request.request_id {
                Some(key) => derived_id(&[&a.execution.id, "tool-session", key]),
                None => new_id(),
            };
            match tx.get_tool_session(&id)? {
                Some(s) if s.tool_id == request.tool_id => Ok(s),
                Some(_) => Err(Refusal::new(
                    ErrorCode::RequestConflict,
                    "the request id opened a session of another tool",
                )
                .into()),
                None => {
                    checks::within_quota(tx, &config, &a, &request.tool_id)?;
                    open_session(
                        tx,
                        &a.execution,
                        a.cause.as_deref(),
                        &a.work.scope,
                        &request.tool_id,
                        id,
                        now,
                    )
                }
            }
        });
        opened.map(|s| answer(&s)).map_err(|e| e.refusal())
    }

    /// Closes one of the execution's sessions. Closing a closed session again with the same outcome
    /// answers as the first close did; another outcome is `409 session_not_open`.
    pub fn close_session(
        &self,
        socket_execution: &str,
        presented: &Presented,
        session_id: &str,
        request: &CloseSession,
    ) -> Result<Value, Refusal> {
        if request.outcome == SessionOutcome::Parked {
            return Err(Refusal::invalid_input("a session is closed `completed` or `failed`"));
        }
        let now = self.clock.now();
        let closed = self.store.write(|tx| -> Result<ToolSession, HostError> {
            let lease = checks::live_lease(tx, socket_execution, presented, now)?;
            let a = checks::check_lease(lease, now)?;
            let session = own_session(tx, &a, session_id)?;
            match session.closed {
                None => close_session(tx, &session, request.outcome, now),
                Some((outcome, _)) if outcome == request.outcome => Ok(session),
                Some(_) => Err(not_open().into()),
            }
        });
        closed.map(|s| answer(&s)).map_err(|e| e.refusal())
    }
}

/// The session a call names: open, this execution's, and of the operation being called.
pub fn check_call_session(tx: &mut dyn Tx, a: &Authority, request: &CallRequest) -> Result<(), HostError> {
    let Some(id) = &request.session_id else { return Ok(()) };
    let session = own_session(tx, a, id)?;
    if !session.is_open() {
        return Err(not_open().into());
    }
    if session.tool_id != request.operation || DECLARING_OPERATIONS.contains(&request.operation.as_str()) {
        return Err(Refusal::invalid_input("`session_id` names a session of another operation").into());
    }
    Ok(())
}

/// A session of the caller's execution; any other id is `404`, whoever's it is.
fn own_session(tx: &mut dyn Tx, a: &Authority, id: &str) -> Result<ToolSession, HostError> {
    tx.get_tool_session(id)?
        .filter(|s| s.execution_id == a.execution.id)
        .ok_or_else(|| Refusal::not_found("tool session").into())
}

fn not_open() -> Refusal {
    Refusal::new(ErrorCode::SessionNotOpen, "the tool session is closed")
        .with_remedy("open a new session with POST /v1/toolbelt/sessions")
}

fn answer(s: &ToolSession) -> Value {
    json!({
        "session_id": s.id,
        "tool_id": s.tool_id,
        "state": if s.is_open() { "open" } else { "closed" },
        "outcome": s.closed.map(|(o, _)| o.as_str()),
    })
}
