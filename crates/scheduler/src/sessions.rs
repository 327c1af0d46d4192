//! Tool sessions' records: `tool.session.opened` and `tool.session.closed` on the Work's log, and the
//! rule that a session still open when its execution's authority ends is closed `failed` by the host
//! in the transaction that ends it (a declaration, a completion, a cancel).

use conduit_core::{Causation, Event, Execution, NewEvent, SessionOutcome, Source, Timestamp, ToolSession};
use conduit_store::{new_id, Tx};
use serde_json::json;

use crate::HostError;

/// Opens session `id` of `tool_id` for the execution, continuing from the event its segment
/// continues from.
pub fn open_session(
    tx: &mut dyn Tx,
    execution: &Execution,
    scope: &str,
    tool_id: &str,
    id: String,
    now: Timestamp,
) -> Result<ToolSession, HostError> {
    let cause = tx.get_event(&execution.cause_event)?;
    let event_id = new_id();
    let causation = cause
        .as_ref()
        .map(Causation::derived_from)
        .unwrap_or_else(|| Causation::root(&event_id));
    let session = ToolSession {
        id,
        execution_id: execution.id.clone(),
        work_id: execution.work_id.clone(),
        scope: scope.to_owned(),
        tool_id: tool_id.to_owned(),
        opened_event: event_id.clone(),
        opened_at: now,
        closed: None,
    };
    let data = json!({"sessionId": session.id, "toolId": session.tool_id});
    tx.insert_event(session_event(
        event_id,
        "tool.session.opened",
        &session,
        causation,
        data,
        now,
    ))?;
    tx.insert_tool_session(&session)?;
    Ok(session)
}

/// Closes an open session with `outcome`, continuing from its opening event.
pub fn close_session(
    tx: &mut dyn Tx,
    session: &ToolSession,
    outcome: SessionOutcome,
    now: Timestamp,
) -> Result<ToolSession, HostError> {
    let opened: Option<Event> = tx.get_event(&session.opened_event)?;
    let id = new_id();
    let causation = opened
        .as_ref()
        .map(Causation::derived_from)
        .unwrap_or_else(|| Causation::root(&id));
    let data = json!({"sessionId": session.id, "toolId": session.tool_id, "outcome": outcome.as_str()});
    tx.insert_event(session_event(id, "tool.session.closed", session, causation, data, now))?;
    tx.close_tool_session(&session.id, outcome, now)?;
    Ok(ToolSession {
        closed: Some((outcome, now)),
        ..session.clone()
    })
}

/// Closes every session the execution still has open with `failed`: its authority has ended.
pub fn close_open_sessions(tx: &mut dyn Tx, execution_id: &str, now: Timestamp) -> Result<(), HostError> {
    for session in tx.open_tool_sessions(execution_id)? {
        close_session(tx, &session, SessionOutcome::Failed, now)?;
    }
    Ok(())
}

/// Session records are host events, like the toolbelt's call records: they bypass routing, waits
/// and causal bounds, and carry no content.
fn session_event(
    id: String,
    event_type: &str,
    session: &ToolSession,
    causation: Causation,
    data: serde_json::Value,
    at: Timestamp,
) -> NewEvent {
    NewEvent {
        id,
        event_type: event_type.to_owned(),
        source: Source::Toolbelt,
        scope: session.scope.clone(),
        work_id: Some(session.work_id.clone()),
        execution_id: Some(session.execution_id.clone()),
        correlation_key: None,
        causation,
        actor: None,
        data,
        accepted_at: at,
        delivery_id: None,
    }
}
