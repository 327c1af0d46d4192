//! Request ids: a retried request replays its committed result; a changed body is a conflict; a
//! retry while the first call still runs is `request_in_progress`, so one request id never runs a
//! handler twice.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use conduit_core::{ErrorCode, Refusal, RequestRecord, Timestamp};
use conduit_scheduler::HostError;
use conduit_store::{StoreError, Tx};
use serde_json::Value;

use crate::authority::Authority;
use crate::{Answer, CallRequest};

/// The committed result of an earlier call with this request id, for the same execution and
/// operation (an answer, or an operation's refusal); `request_conflict` when that call's input
/// differed.
pub fn lookup(
    tx: &mut dyn Tx,
    a: &Authority,
    request: &CallRequest,
    input_hash: &str,
) -> Result<Option<Result<Value, Refusal>>, HostError> {
    let Some(request_id) = &request.request_id else {
        return Ok(None);
    };
    match tx.get_request(&a.execution.id, &request.operation, request_id)? {
        Some(record) if record.body_hash == input_hash => Ok(Some(stored_result(record))),
        Some(_) => Err(Refusal::new(
            ErrorCode::RequestConflict,
            "this request id was already used with a different input",
        )
        .with_remedy("use a new request id for a new request")
        .into()),
        None => Ok(None),
    }
}

fn stored_result(record: RequestRecord) -> Result<Value, Refusal> {
    if record.status == 200 {
        return Ok(record.response);
    }
    let text = |field: &str| record.response[field].as_str().unwrap_or_default().to_owned();
    Err(Refusal::operation(&text("error"), text("message")))
}

/// Records the committed result of a call made with a request id. An answer written as text is
/// kept as the value it stands for; text too deep to read back is the store's refusal, not a kept
/// `null`.
pub fn store(
    tx: &mut dyn Tx,
    a: &Authority,
    request: &CallRequest,
    input_hash: &str,
    answer: Result<&Answer, &Refusal>,
    now: Timestamp,
) -> Result<(), HostError> {
    let Some(request_id) = &request.request_id else {
        return Ok(());
    };
    let (status, response) = match answer {
        Ok(answer) => (200, answer.clone().into_value().map_err(StoreError::from)?),
        Err(refusal) => (
            refusal.code.http_status(),
            serde_json::to_value(refusal).unwrap_or_default(),
        ),
    };
    tx.insert_request(&RequestRecord {
        execution_id: a.execution.id.clone(),
        operation: request.operation.clone(),
        request_id: request_id.clone(),
        body_hash: input_hash.to_owned(),
        status,
        response,
        created_at: now,
    })?;
    Ok(())
}

/// The execution, operation and request id of a call.
type Key = (String, String, String);

/// Extension calls with a request id whose handler is running now. Builtins need none: they run
/// and commit in one transaction, so a retry finds their record.
#[derive(Clone, Default)]
pub struct InFlight(Arc<Mutex<HashSet<Key>>>);

/// A call's place in [`InFlight`], given up when dropped (whichever way the call ends).
pub struct Running {
    in_flight: InFlight,
    key: Key,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.in_flight.calls().remove(&self.key);
    }
}

impl InFlight {
    /// Marks the call running, or refuses it while another call with its request id runs.
    pub fn claim(&self, a: &Authority, request: &CallRequest) -> Result<Option<Running>, Refusal> {
        let Some(request_id) = &request.request_id else {
            return Ok(None);
        };
        let key = (a.execution.id.clone(), request.operation.clone(), request_id.clone());
        if !self.calls().insert(key.clone()) {
            return Err(Refusal::new(
                ErrorCode::RequestInProgress,
                "a call with this request id is still running",
            )
            .with_remedy("retry when it has answered: the retry replays its result"));
        }
        Ok(Some(Running {
            in_flight: self.clone(),
            key,
        }))
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashSet<Key>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
