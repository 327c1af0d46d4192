//! The records a call leaves: a `toolbelt.called` / `toolbelt.rejected` audit record for every call,
//! and `agent.toolCalled` / `agent.toolReturned` on the Work's event log for every call that reaches
//! its operation (OpenWOP's payload shapes).

use conduit_core::{AuditKind, AuditRecord, Causation, Event, NewEvent, Source, Timestamp};
use conduit_scheduler::HostError;
use conduit_store::{new_id, Tx};
use serde_json::json;

use crate::checks::Authority;
use crate::CallRequest;

/// One call as the records see it.
pub struct Call<'a> {
    pub socket_execution: &'a str,
    pub request: &'a CallRequest,
    /// SHA-256 of the input's RFC 8785 form: records carry this, never the input.
    pub input_hash: String,
    pub started: Timestamp,
}

/// Writes the call's audit record.
pub fn record(
    tx: &mut dyn Tx,
    call: &Call<'_>,
    authority: Option<&Authority>,
    kind: AuditKind,
    result: &str,
    refusal: Option<&str>,
    now: Timestamp,
) -> Result<(), HostError> {
    tx.insert_audit(&AuditRecord {
        id: new_id(),
        kind,
        operation: call.request.operation.clone(),
        execution_id: call.socket_execution.to_owned(),
        work_id: authority.map(|a| a.work.id.clone()),
        scope: authority.map(|a| a.work.scope.clone()),
        request_id: call.request.request_id.clone(),
        result: result.to_owned(),
        gate: None,
        refusal: refusal.map(str::to_owned),
        input_hash: call.input_hash.clone(),
        duration_ms: now.0 - call.started.0,
        at: now,
    })?;
    Ok(())
}

/// Appends `agent.toolCalled`, continuing from the event the segment continues from.
pub fn tool_called(tx: &mut dyn Tx, call: &Call<'_>, a: &Authority) -> Result<Event, HostError> {
    let cause = tx.get_event(&a.execution.cause_event)?;
    let id = new_id();
    let call_id = call.request.request_id.clone().unwrap_or_else(|| id.clone());
    let mut data = json!({
        "agentId": a.execution.id,
        "toolName": call.request.operation,
        "callId": call_id,
        "argsHash": call.input_hash,
        "principal": format!("execution:{}", a.execution.id),
        "transport": "toolbelt",
    });
    if let Some(session) = &call.request.session_id {
        data["sessionId"] = json!(session);
    }
    let causation = cause
        .as_ref()
        .map(Causation::derived_from)
        .unwrap_or_else(|| Causation::root(&id));
    Ok(tx.insert_event(host_event(id, "agent.toolCalled", a, causation, data, call.started))?)
}

/// Appends `agent.toolReturned`, caused by the `agent.toolCalled` it answers.
pub fn tool_returned(
    tx: &mut dyn Tx,
    call: &Call<'_>,
    a: &Authority,
    called: &Event,
    status: &str,
    now: Timestamp,
) -> Result<(), HostError> {
    let data = json!({
        "agentId": a.execution.id,
        "toolName": call.request.operation,
        "callId": called.data["callId"],
        "status": status,
        "durationMs": now.0 - call.started.0,
    });
    let event = host_event(
        new_id(),
        "agent.toolReturned",
        a,
        Causation::derived_from(called),
        data,
        now,
    );
    tx.insert_event(event)?;
    Ok(())
}

/// The toolbelt's records are host events: they bypass routing, waits and causal bounds.
fn host_event(
    id: String,
    event_type: &str,
    a: &Authority,
    causation: Causation,
    data: serde_json::Value,
    at: Timestamp,
) -> NewEvent {
    NewEvent {
        id,
        event_type: event_type.to_owned(),
        source: Source::Toolbelt,
        scope: a.work.scope.clone(),
        work_id: Some(a.work.id.clone()),
        execution_id: Some(a.execution.id.clone()),
        correlation_key: None,
        causation,
        actor: None,
        data,
        accepted_at: at,
        delivery_id: None,
    }
}
