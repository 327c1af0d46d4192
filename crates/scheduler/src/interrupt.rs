//! Interrupting input: an event an interrupting route matches, on a key running Work of that
//! route's binding owns, fences the Work's attempt (cancelled, tokens revoked, so the daemon stops
//! its process) and makes the Work ready to continue from the event. The Work is held
//! (`blocked_reason: interrupted`) until the host sees the fenced process end (or an operator
//! confirms it stopped), so two processes never act for one Work.

use conduit_config::Snapshot;
use conduit_core::work::INTERRUPTED;
use conduit_core::{Event, ExecutionState, Source, Timestamp, WorkState};
use conduit_store::Tx;

use crate::fence::cancel_running;
use crate::work::owner_of;
use crate::HostError;

/// Interrupts the running Work that owns the event's key, when an interrupting route of its
/// binding matches the event.
pub fn interrupt_running(tx: &mut dyn Tx, config: &Snapshot, event: &Event, now: Timestamp) -> Result<(), HostError> {
    let Some(key) = &event.correlation_key else {
        return Ok(());
    };
    let Some(mut work) = owner_of(tx, key)? else {
        return Ok(());
    };
    // A Work's own emissions (and the host's records of its calls) never interrupt it.
    let own =
        matches!(event.source, Source::Execution(_) | Source::Toolbelt) && event.work_id.as_ref() == Some(&work.id);
    let interrupts = !own
        && work.state == WorkState::Running
        && work.scope == event.scope
        && config.interrupts(&work.scope, &work.binding, &event.event_type);
    if !interrupts {
        return Ok(());
    }
    for mut x in tx
        .executions_of_work(&work.id)?
        .into_iter()
        .filter(|x| x.state == ExecutionState::Running)
    {
        cancel_running(tx, &mut x, now)?;
    }
    work.state = WorkState::Ready;
    work.wake_event = event.id.clone();
    // An operator's hold stays: releasing it waits for the stop too (see `release_work`).
    work.blocked_reason.get_or_insert_with(|| INTERRUPTED.to_owned());
    work.updated_at = now;
    tx.update_work(&work)?;
    Ok(())
}
