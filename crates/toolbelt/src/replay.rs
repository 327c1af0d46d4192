//! Request ids: a retried request replays its committed result; a changed body is a conflict.

use conduit_core::{ErrorCode, Refusal, RequestRecord, Timestamp};
use conduit_scheduler::HostError;
use conduit_store::Tx;
use serde_json::Value;

use crate::checks::Authority;
use crate::CallRequest;

/// The committed answer of an earlier call with this request id, for the same execution and
/// operation; `request_conflict` when that call's input differed.
pub fn lookup(
    tx: &mut dyn Tx,
    a: &Authority,
    request: &CallRequest,
    input_hash: &str,
) -> Result<Option<Value>, HostError> {
    let Some(request_id) = &request.request_id else {
        return Ok(None);
    };
    match tx.get_request(&a.execution.id, &request.operation, request_id)? {
        Some(record) if record.body_hash == input_hash => Ok(Some(record.response)),
        Some(_) => Err(Refusal::new(
            ErrorCode::RequestConflict,
            "this request id was already used with a different input",
        )
        .with_remedy("use a new request id for a new request")
        .into()),
        None => Ok(None),
    }
}

/// Records the committed answer of a call made with a request id.
pub fn store(
    tx: &mut dyn Tx,
    a: &Authority,
    request: &CallRequest,
    input_hash: &str,
    answer: &Value,
    now: Timestamp,
) -> Result<(), HostError> {
    let Some(request_id) = &request.request_id else {
        return Ok(());
    };
    tx.insert_request(&RequestRecord {
        execution_id: a.execution.id.clone(),
        operation: request.operation.clone(),
        request_id: request_id.clone(),
        body_hash: input_hash.to_owned(),
        status: 200,
        response: answer.clone(),
        created_at: now,
    })?;
    Ok(())
}
