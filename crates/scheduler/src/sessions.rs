//! The host's records about an execution (`core.toolbelt` events: the toolbelt's call records and
//! tool sessions), and tool sessions' rule: a session still open when its execution's authority
//! ends is closed `failed` by the host in the transaction that ends it (a declaration, a
//! completion, a cancel).

use std::collections::HashSet;

use conduit_core::tool_call::{CallRecord, ToolReturned, TOOL_CALLED, TOOL_RETURNED};
use conduit_core::{Causation, Event, Execution, NewRecord, Parent, SessionOutcome, Source, Timestamp, ToolSession};
use conduit_store::{new_id, Tx};
use serde_json::json;

use crate::HostError;

/// A record the host appends about an execution (source `core.toolbelt`): its call records and
/// tool sessions. Such events bypass routing, waits and causal bounds, and carry no content. Its
/// data is a JSON value, or (`HostRecord<&str>`) JSON text already.
pub struct HostRecord<'a, D = serde_json::Value> {
    pub id: String,
    pub event_type: &'a str,
    pub data: D,
    pub at: Timestamp,
}

/// Appends `record` to the Work's log, continuing from `parent` (else starting its own chain).
pub fn append_host_record(
    tx: &mut dyn Tx,
    execution: &Execution,
    scope: &str,
    parent: Option<&Event>,
    record: HostRecord<'_>,
) -> Result<Event, HostError> {
    let text = record.data.to_string();
    let written = HostRecord {
        id: record.id,
        event_type: record.event_type,
        data: text.as_str(),
        at: record.at,
    };
    let (causation, sequence) = append_host_text(tx, execution, scope, parent.map(Parent::from), &written)?;
    Ok(Event {
        id: written.id,
        sequence,
        event_type: record.event_type.to_owned(),
        source: Source::Toolbelt,
        scope: scope.to_owned(),
        work_id: Some(execution.work_id.clone()),
        execution_id: Some(execution.id.clone()),
        correlation_key: None,
        causation,
        actor: None,
        data: record.data,
        accepted_at: record.at,
    })
}

/// Appends a host record whose data is JSON text already, continuing from `parent` (else starting
/// its own chain): the one place a host record's row is made. Answers its causation and
/// acceptance sequence.
pub fn append_host_text(
    tx: &mut dyn Tx,
    execution: &Execution,
    scope: &str,
    parent: Option<Parent<'_>>,
    record: &HostRecord<'_, &str>,
) -> Result<(Causation, i64), HostError> {
    let causation = Causation::continuing(parent, &record.id);
    let sequence = tx.insert_record(&NewRecord {
        id: &record.id,
        event_type: record.event_type,
        scope,
        work_id: &execution.work_id,
        execution_id: &execution.id,
        causation: &causation,
        data: record.data,
        accepted_at: record.at,
    })?;
    Ok((causation, sequence))
}

/// Opens session `id` of `tool_id` for the execution, continuing from `cause`, the event its segment
/// continues from.
pub fn open_session(
    tx: &mut dyn Tx,
    execution: &Execution,
    cause: Option<&Event>,
    scope: &str,
    tool_id: &str,
    id: String,
    now: Timestamp,
) -> Result<ToolSession, HostError> {
    let record = HostRecord {
        id: new_id(),
        event_type: "tool.session.opened",
        data: json!({"sessionId": id, "toolId": tool_id}),
        at: now,
    };
    let opened = append_host_record(tx, execution, scope, cause, record)?;
    let session = ToolSession {
        id,
        execution_id: execution.id.clone(),
        work_id: execution.work_id.clone(),
        scope: scope.to_owned(),
        tool_id: tool_id.to_owned(),
        opened_event: opened.id,
        opened_at: now,
        closed: None,
    };
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
    let opened = tx.get_event(&session.opened_event)?;
    let execution = tx
        .get_execution(&session.execution_id)?
        .ok_or_else(|| conduit_core::Refusal::not_found("execution"))?;
    let record = HostRecord {
        id: new_id(),
        event_type: "tool.session.closed",
        data: json!({"sessionId": session.id, "toolId": session.tool_id, "outcome": outcome.as_str()}),
        at: now,
    };
    append_host_record(tx, &execution, &session.scope, opened.as_ref(), record)?;
    tx.close_tool_session(&session.id, outcome, now)?;
    Ok(ToolSession {
        closed: Some((outcome, now)),
        ..session.clone()
    })
}

/// Closes every session the execution still has open with `outcome`: its authority has ended.
pub fn close_open_sessions(
    tx: &mut dyn Tx,
    execution_id: &str,
    outcome: SessionOutcome,
    now: Timestamp,
) -> Result<(), HostError> {
    for session in tx.open_tool_sessions(execution_id)? {
        close_session(tx, &session, outcome, now)?;
    }
    Ok(())
}

/// Pairs every call of `execution` still without its `agent.toolReturned` with one whose status is
/// `lost`: run by recovery, when no handler of the daemon that died can still answer, so a call
/// the crash interrupted does not stay open on the Work's log forever. What the call did before
/// the crash is unknown, which is what `lost` says. Answers how many were paired.
pub fn close_unpaired_calls(tx: &mut dyn Tx, execution: &Execution, now: Timestamp) -> Result<usize, HostError> {
    let events = tx.list_events(Some(&execution.work_id), usize::MAX >> 1)?;
    let returned: HashSet<&str> = events
        .iter()
        .filter(|e| e.event_type == TOOL_RETURNED)
        .filter_map(|e| e.causation.parent.as_deref())
        .collect();
    let unpaired: Vec<&Event> = events
        .iter()
        .filter(|e| e.event_type == TOOL_CALLED && e.execution_id.as_deref() == Some(execution.id.as_str()))
        .filter(|e| !returned.contains(e.id.as_str()))
        .collect();
    for called in &unpaired {
        let data = ToolReturned {
            agent_id: &execution.id,
            tool_name: called.data["toolName"].as_str().unwrap_or_default(),
            call_id: called.data["callId"].as_str().unwrap_or_default(),
            status: "lost",
            duration_ms: now.0 - called.accepted_at.0,
        }
        .data();
        let record = HostRecord {
            id: new_id(),
            event_type: TOOL_RETURNED,
            data,
            at: now,
        };
        append_host_record(tx, execution, &called.scope, Some(called), record)?;
    }
    Ok(unpaired.len())
}
