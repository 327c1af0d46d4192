//! Waits: registration with backscan, waking by events, and timeouts.

use conduit_config::Snapshot;
use conduit_core::names::work_key;
use conduit_core::{
    Causation, Duration, Event, Execution, NewEvent, Parent, Source, Timestamp, Wait, WaitState, WorkState,
};
use conduit_store::{new_id, Tx};
use serde_json::json;

use crate::causal::record;
use crate::HostError;

/// Wakes every armed wait `event` satisfies: the wait is satisfied and its Work is ready to resume,
/// continuing from `event`.
pub(crate) fn wake_waits(tx: &mut dyn Tx, event: &Event, now: Timestamp) -> Result<(), HostError> {
    // A wait matches on a correlation key: an event without one wakes nothing.
    let Some(key) = &event.correlation_key else {
        return Ok(());
    };
    for wait in tx.armed_waits_for_key(key)?.into_iter().filter(|w| w.matches(event)) {
        resolve(tx, wait, WaitState::Satisfied, &event.id, now)?;
    }
    Ok(())
}

/// Registers a declared wait for the segment `execution` ended. A type-only wait subscribes on the
/// Work's keys. Events accepted since the segment's watermark are scanned first, so one that arrived
/// while the segment was finishing still wakes it. Returns whether the Work is already ready again.
pub(crate) fn register(
    tx: &mut dyn Tx,
    execution: &Execution,
    types: Vec<String>,
    keys: Vec<String>,
    timeout: Option<Duration>,
    work_keys: &[String],
    now: Timestamp,
) -> Result<bool, HostError> {
    let keys = if keys.is_empty() { work_keys.to_vec() } else { keys };
    let wait = Wait {
        id: new_id(),
        work_id: execution.work_id.clone(),
        execution_id: execution.id.clone(),
        types,
        keys,
        watermark: execution.watermark,
        timeout_at: timeout.map(|t| now.plus(t)),
        state: WaitState::Armed,
        satisfied_by: None,
        created_at: now,
    };
    tx.insert_wait(&wait)?;
    let backlog = tx.events_between_for_keys(wait.watermark, i64::MAX, &wait.keys)?;
    match backlog.into_iter().find(|e| wait.matches(e)) {
        Some(event) => {
            resolve(tx, wait, WaitState::Satisfied, &event.id, now)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Times out every armed wait whose timer is due: a `core.wait.timed_out` event records it and the
/// Work resumes from that event.
pub fn fire_due_timers(tx: &mut dyn Tx, config: &Snapshot, now: Timestamp) -> Result<usize, HostError> {
    let due: Vec<Wait> = tx.armed_waits_due(now)?;
    let fired = due.len();
    for wait in due {
        let Some(execution) = tx.get_execution(&wait.execution_id)? else {
            continue;
        };
        let cause = tx.get_event(&execution.cause_event)?;
        let id = new_id();
        let event = NewEvent {
            id: id.clone(),
            event_type: "core.wait.timed_out".into(),
            source: Source::Scheduler,
            scope: execution.scope.clone(),
            work_id: Some(wait.work_id.clone()),
            execution_id: Some(execution.id.clone()),
            correlation_key: Some(work_key(&wait.work_id)),
            causation: Causation::continuing(cause.as_ref().map(Parent::from), &id),
            actor: None,
            data: json!({"wait": wait.id, "types": wait.types}),
            accepted_at: now,
            delivery_id: None,
        };
        let event = record(tx, config, event)?;
        resolve(tx, wait, WaitState::TimedOut, &event.id, now)?;
    }
    Ok(fired)
}

fn resolve(tx: &mut dyn Tx, mut wait: Wait, state: WaitState, by: &str, now: Timestamp) -> Result<(), HostError> {
    wait.state = state;
    wait.satisfied_by = Some(by.to_owned());
    tx.update_wait(&wait)?;
    if let Some(mut work) = tx.get_work(&wait.work_id)? {
        if work.state == WorkState::Waiting {
            work.state = WorkState::Ready;
            work.wake_event = by.to_owned();
            work.updated_at = now;
            tx.update_work(&work)?;
        }
    }
    Ok(())
}
