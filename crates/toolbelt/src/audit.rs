//! The records a call leaves: a `toolbelt.called` / `toolbelt.rejected` audit record for every call,
//! and `agent.toolCalled` / `agent.toolReturned` on the Work's event log for every call that reaches
//! its operation (OpenWOP's payload shapes).

use conduit_core::tool_call::{CallRecord, ToolCalled, ToolReturned, Transport, TOOL_CALLED, TOOL_RETURNED};
use conduit_core::{AuditKind, AuditRecord, Causation, Parent, Timestamp};
use conduit_scheduler::{append_host_text, HostError, HostRecord};
use conduit_store::{new_id, Tx};

use crate::authority::Authority;
use crate::CallRequest;

/// One call as the records see it.
pub struct Call<'a> {
    pub socket_execution: &'a str,
    pub request: &'a CallRequest,
    /// SHA-256 of the input's RFC 8785 form: records carry this, never the input.
    pub input_hash: String,
    pub started: Timestamp,
    /// How the call reaches its tool.
    pub transport: Transport,
}

/// A record's optional attributes: `toolbelt.refusal` (why a genuine token was refused) and
/// `toolbelt.gate` (the gate that parked or refused the call).
#[derive(Debug, Default, Clone, Copy)]
pub struct Marks<'a> {
    pub refusal: Option<&'a str>,
    pub gate: Option<&'a str>,
}

/// Writes the call's audit record.
pub fn record(
    tx: &mut dyn Tx,
    call: &Call<'_>,
    authority: Option<&Authority>,
    kind: AuditKind,
    result: &str,
    marks: Marks<'_>,
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
        gate: marks.gate.map(str::to_owned),
        refusal: marks.refusal.map(str::to_owned),
        input_hash: call.input_hash.clone(),
        duration_ms: now.0 - call.started.0,
        at: now,
    })?;
    Ok(())
}

/// `agent.toolCalled` as it was written: what its `agent.toolReturned` continues from.
#[derive(Debug, Clone)]
pub struct Called {
    pub id: String,
    pub causation: Causation,
    pub call_id: String,
}

impl Called {
    /// What its `agent.toolReturned` continues from.
    pub fn parent(&self) -> Parent<'_> {
        Parent {
            id: &self.id,
            causation: &self.causation,
        }
    }
}

/// Appends `agent.toolCalled`, continuing from the event the segment continues from.
pub fn tool_called(tx: &mut dyn Tx, call: &Call<'_>, a: &Authority) -> Result<Called, HostError> {
    let id = new_id();
    let call_id = call.request.request_id.clone().unwrap_or_else(|| id.clone());
    let data = ToolCalled {
        agent_id: &a.execution.id,
        tool_name: &call.request.operation,
        call_id: &call_id,
        args_hash: &call.input_hash,
        principal: &["execution:", &a.execution.id].concat(),
        transport: call.transport,
        session_id: call.request.session_id.as_deref(),
    }
    .text();
    let record = HostRecord {
        id,
        event_type: TOOL_CALLED,
        data: data.as_str(),
        at: call.started,
    };
    let cause = a.cause.as_deref().map(Parent::from);
    let (causation, _) = append_host_text(tx, &a.execution, &a.work.scope, cause, &record)?;
    Ok(Called {
        id: record.id,
        causation,
        call_id,
    })
}

/// Appends `agent.toolReturned`, caused by the `agent.toolCalled` it answers.
pub fn tool_returned(
    tx: &mut dyn Tx,
    call: &Call<'_>,
    a: &Authority,
    called: &Called,
    status: &str,
    now: Timestamp,
) -> Result<(), HostError> {
    let data = ToolReturned {
        agent_id: &a.execution.id,
        tool_name: &call.request.operation,
        call_id: &called.call_id,
        status,
        duration_ms: now.0 - call.started.0,
    }
    .text();
    let record = HostRecord {
        id: new_id(),
        event_type: TOOL_RETURNED,
        data: data.as_str(),
        at: now,
    };
    append_host_text(tx, &a.execution, &a.work.scope, Some(called.parent()), &record)?;
    Ok(())
}
