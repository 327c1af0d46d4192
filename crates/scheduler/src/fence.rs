//! Fencing an attempt: its authority ended (tokens revoked, tool sessions closed) and, for one
//! cancelled while it ran, its stop noted once the host sees its process end. Work an interrupt
//! held is released then, when none of its fenced attempts may still be running.

use conduit_core::session::SessionOutcome;
use conduit_core::work::INTERRUPTED;
use conduit_core::{Execution, ExecutionState, Timestamp};
use conduit_store::Tx;

use crate::HostError;

/// Ends an execution's authority: its tokens revoked and its open tool sessions closed.
pub(crate) fn end_authority(tx: &mut dyn Tx, execution_id: &str, now: Timestamp) -> Result<(), HostError> {
    tx.revoke_execution_tokens(execution_id, now)?;
    crate::close_open_sessions(tx, execution_id, SessionOutcome::Failed, now)
}

/// Cancels a running attempt: cancelled now, its authority ended.
pub(crate) fn cancel_running(tx: &mut dyn Tx, x: &mut Execution, now: Timestamp) -> Result<(), HostError> {
    x.state = ExecutionState::Cancelled;
    x.ended_at = Some(now);
    tx.update_execution(x)?;
    end_authority(tx, &x.id, now)
}

/// The host saw a fenced attempt's process end: its stop needs no operator's confirmation.
pub(crate) fn note_stopped(tx: &mut dyn Tx, mut x: Execution, now: Timestamp) -> Result<(), HostError> {
    if x.state == ExecutionState::Cancelled && x.stopped_at.is_none() {
        x.stopped_at = Some(now);
        tx.update_execution(&x)?;
        release_interrupted(tx, &x.work_id, now)?;
    }
    Ok(())
}

/// Releases Work an interrupt held once none of its fenced attempts may still be running.
pub(crate) fn release_interrupted(tx: &mut dyn Tx, work_id: &str, now: Timestamp) -> Result<(), HostError> {
    let Some(mut work) = tx.get_work(work_id)? else {
        return Ok(());
    };
    if work.blocked_reason.as_deref() != Some(INTERRUPTED) {
        return Ok(());
    }
    let unstopped = tx
        .executions_of_work(work_id)?
        .iter()
        .any(|x| x.state == ExecutionState::Cancelled && x.stopped_at.is_none());
    if !unstopped {
        work.blocked_reason = None;
        work.updated_at = now;
        tx.update_work(&work)?;
    }
    Ok(())
}
