//! Attempts: claim, lease renewal, completion and adoption after a restart.

use conduit_config::Snapshot;
use conduit_core::execution::{settle, SegmentEnd, Settlement};
use conduit_core::retry::{is_retryable, RetryPolicy};
use conduit_core::{
    Declaration, Duration, Execution, ExecutionState, Outcome, OutcomeStatus, Timestamp, Work, WorkState,
};
use conduit_store::{new_id, Tx};

use crate::fence::{end_authority, note_stopped};
use crate::waits::register;
use crate::HostError;

/// How long a lease lasts without renewal, unless the daemon is told otherwise. The daemon renews
/// at a third of it.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A daemon as it leases attempts: its instance id, and how long each lease lasts unrenewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lessee {
    pub owner: String,
    pub lease: Duration,
}

impl Lessee {
    /// `owner`, leasing for [`DEFAULT_LEASE`].
    pub fn new(owner: impl Into<String>) -> Lessee {
        Lessee {
            owner: owner.into(),
            lease: DEFAULT_LEASE,
        }
    }

    fn lease_from(&self, now: Timestamp) -> Timestamp {
        now.plus(self.lease)
    }
}

/// A claimed attempt: the execution (epoch n+1, leased to the owner) and its Work, now running.
#[derive(Debug, Clone)]
pub struct Claim {
    pub execution: Execution,
    pub work: Work,
}

/// Claims the oldest ready Work whose scope is enabled, as a new execution with the next epoch.
pub fn claim_next(
    tx: &mut dyn Tx,
    config: &Snapshot,
    lessee: &Lessee,
    now: Timestamp,
) -> Result<Option<Claim>, HostError> {
    let Some(mut work) = tx
        .ready_work(16, now)?
        .into_iter()
        .find(|w| config.scope_enabled(&w.scope))
    else {
        return Ok(None);
    };
    let Some(timeout) = config.executable(&work.scope, &work.binding).map(|e| e.timeout()) else {
        // The binding left the configuration: nothing can run this Work.
        return fail_unrunnable(tx, work, now).map(|()| None);
    };
    work.epoch += 1;
    work.state = WorkState::Running;
    work.not_before = None;
    work.updated_at = now;
    let execution = Execution {
        id: new_id(),
        work_id: work.id.clone(),
        scope: work.scope.clone(),
        binding: work.binding.clone(),
        epoch: work.epoch,
        owner: lessee.owner.clone(),
        state: ExecutionState::Running,
        cause_event: work.wake_event.clone(),
        watermark: tx.max_sequence()?,
        declaration: None,
        outcome: None,
        exit_code: None,
        pid: None,
        generation: config.generation(),
        lease_expires_at: lessee.lease_from(now),
        deadline_at: now.plus(timeout),
        started_at: now,
        ended_at: None,
        stopped_at: None,
        agent_session: None,
        agent_usage: None,
    };
    tx.update_work(&work)?;
    tx.insert_execution(&execution)?;
    Ok(Some(Claim { execution, work }))
}

fn fail_unrunnable(tx: &mut dyn Tx, mut work: Work, now: Timestamp) -> Result<(), HostError> {
    work.state = WorkState::Failed;
    work.outcome = Some(conduit_core::Outcome {
        status: OutcomeStatus::Failed,
        summary: Some(
            "its binding is no longer in the configuration, or names an executor the host does not run".into(),
        ),
        source: conduit_core::OutcomeSource::Exit,
    });
    work.not_before = None;
    work.updated_at = now;
    Ok(tx.update_work(&work)?)
}

/// Extends a running attempt's lease, if it still holds it at `epoch`. Returns whether it does.
pub fn renew_lease(
    tx: &mut dyn Tx,
    execution_id: &str,
    epoch: u32,
    lessee: &Lessee,
    now: Timestamp,
) -> Result<bool, HostError> {
    let Some(mut x) = tx.get_execution(execution_id)? else {
        return Ok(false);
    };
    if x.state != ExecutionState::Running || x.epoch != epoch || x.owner != lessee.owner {
        return Ok(false);
    }
    x.lease_expires_at = lessee.lease_from(now);
    tx.update_execution(&x)?;
    Ok(true)
}

/// Records the process id of a started attempt, so a restarted daemon can tell whether it lives.
pub fn record_pid(tx: &mut dyn Tx, execution_id: &str, pid: i32) -> Result<(), HostError> {
    if let Some(mut x) = tx.get_execution(execution_id)? {
        x.pid = Some(pid);
        tx.update_execution(&x)?;
    }
    Ok(())
}

/// Applies a finished segment: its declared outcome or wait, else its exit status, where a
/// failure `retry` allows another attempt for makes the Work ready again after its backoff.
/// Revokes the execution's tokens. A segment that is no longer running is left as it is
/// (completion is idempotent), but a fenced one's process is now known to be gone.
pub fn complete(
    tx: &mut dyn Tx,
    execution_id: &str,
    end: SegmentEnd,
    retry: RetryPolicy,
    now: Timestamp,
) -> Result<Option<Execution>, HostError> {
    let Some(mut x) = tx.get_execution(execution_id)? else {
        return Ok(None);
    };
    if x.state != ExecutionState::Running {
        note_stopped(tx, x, now)?;
        return Ok(None);
    }
    let Some(mut work) = tx.get_work(&x.work_id)? else {
        return Ok(None);
    };
    x.exit_code = match end {
        SegmentEnd::Exited(code) => Some(code),
        SegmentEnd::Killed
        | SegmentEnd::Lost
        | SegmentEnd::Abandoned
        | SegmentEnd::ExitUnknown
        | SegmentEnd::FailedToStart(_)
        | SegmentEnd::SecretUnavailable
        | SegmentEnd::SandboxUnavailable
        | SegmentEnd::EndpointUnavailable => None,
    };
    x.ended_at = Some(now);
    work.updated_at = now;
    let retryable = is_retryable(x.declaration.as_ref(), end);
    match settle(x.declaration.as_ref(), end) {
        Settlement::Finished(outcome) => {
            let succeeded = outcome.status == OutcomeStatus::Succeeded;
            x.state = if succeeded {
                ExecutionState::Succeeded
            } else {
                ExecutionState::Failed
            };
            x.outcome = Some(outcome.clone());
            let failed = work.failed_attempts + 1;
            match retry.for_end(end).next_attempt_at(failed, now).filter(|_| retryable) {
                Some(at) => {
                    work.state = WorkState::Ready;
                    work.failed_attempts = failed;
                    work.not_before = Some(at);
                }
                None => {
                    work.state = if succeeded {
                        WorkState::Succeeded
                    } else {
                        WorkState::Failed
                    };
                    work.outcome = Some(last_of_attempts(outcome, retryable.then_some(failed)));
                    work.not_before = None;
                }
            }
        }
        Settlement::Wait { types, keys, timeout } => {
            x.state = ExecutionState::Waiting;
            work.state = WorkState::Waiting;
            work.failed_attempts = 0;
            tx.update_work(&work)?;
            let ready = register(tx, &x, types, keys, timeout, &work.keys, now)?;
            if ready {
                // The backscan woke it: reload what the wake wrote.
                work = tx.get_work(&work.id)?.unwrap_or(work);
            }
        }
    }
    tx.update_execution(&x)?;
    tx.update_work(&work)?;
    end_authority(tx, &x.id, now)?;
    Ok(Some(x))
}

/// A Work's final outcome after `attempts` retried attempts failed in a row: the last one's,
/// saying how many there were.
fn last_of_attempts(mut outcome: Outcome, attempts: Option<u32>) -> Outcome {
    if let (Some(n @ 2..), Some(summary)) = (attempts, outcome.summary.as_mut()) {
        summary.push_str(&format!(" (the last of {n} attempts)"));
    }
    outcome
}

/// Whether `execution` is its Work's first attempt to start a process: every earlier attempt is
/// one a start gate parked before it started (which keeps the next attempt "first"). An attempt
/// that failed, even before it started, means the gates were passed: a retry is not asked again
/// (and cannot reset the retry count by parking).
pub fn first_to_start(tx: &mut dyn Tx, execution: &Execution) -> Result<bool, HostError> {
    let earlier = tx.executions_of_work(&execution.work_id)?;
    Ok(earlier
        .iter()
        .all(|x| x.id == execution.id || (x.pid.is_none() && x.state == ExecutionState::Waiting)))
}

/// Settles an attempt a start gate stopped before its process started: `declaration` (the gate's
/// wait, or a failed outcome carrying the gate's refusal) is applied as if the segment had declared
/// it and ended, so the Work waits or fails and the attempt's token is revoked.
pub fn settle_unstarted(
    tx: &mut dyn Tx,
    execution_id: &str,
    declaration: Declaration,
    now: Timestamp,
) -> Result<Option<Execution>, HostError> {
    let Some(mut x) = tx.get_execution(execution_id)? else {
        return Ok(None);
    };
    if x.state != ExecutionState::Running || x.declaration.is_some() {
        // Fenced before any process started (an interrupt during its start gate): nothing runs.
        if x.pid.is_none() {
            note_stopped(tx, x, now)?;
        }
        return Ok(None);
    }
    x.declaration = Some(declaration);
    tx.update_execution(&x)?;
    complete(tx, execution_id, SegmentEnd::Exited(0), RetryPolicy::default(), now)
}

/// Whether a daemon starting as `instance` adopts a running attempt leased to `owner`. On a store of
/// its own, every running attempt is its state directory's (and releases before instance ids were
/// kept leased under a fresh id at each start). On a shared store, another owner's attempt belongs
/// to another daemon, whose processes and sockets this one cannot reach.
pub fn adopts_on_start(owner: &str, instance: &str, shared_store: bool) -> bool {
    !shared_store || owner == instance
}

/// Adopts a running attempt left by an earlier daemon instance: the next epoch, this owner, a fresh
/// lease. The caller issues the rotated token in the same transaction.
pub fn adopt(tx: &mut dyn Tx, execution_id: &str, lessee: &Lessee, now: Timestamp) -> Result<Option<Claim>, HostError> {
    let Some(mut x) = tx.get_execution(execution_id)? else {
        return Ok(None);
    };
    let Some(mut work) = tx.get_work(&x.work_id)? else {
        return Ok(None);
    };
    if x.state != ExecutionState::Running {
        return Ok(None);
    }
    work.epoch += 1;
    work.updated_at = now;
    x.epoch = work.epoch;
    x.owner = lessee.owner.clone();
    x.lease_expires_at = lessee.lease_from(now);
    tx.update_work(&work)?;
    tx.update_execution(&x)?;
    Ok(Some(Claim { execution: x, work }))
}

/// Takes over an attempt its daemon abandoned ([`Execution::abandoned_for`]): its calls in flight
/// are recorded lost, then its segment is completed as abandoned, which revokes its tokens and, under
/// `retry`, makes its Work ready for the next epoch. `None` when it is no longer abandoned: its
/// daemon renewed the lease, or another daemon took it over first.
pub fn take_over(
    tx: &mut dyn Tx,
    execution_id: &str,
    instance: &str,
    retry: RetryPolicy,
    now: Timestamp,
) -> Result<Option<Execution>, HostError> {
    let Some(x) = tx.get_execution(execution_id)? else {
        return Ok(None);
    };
    if !x.abandoned_for(instance, now) {
        return Ok(None);
    }
    crate::close_unpaired_calls(tx, &x, now)?;
    complete(tx, execution_id, SegmentEnd::Abandoned, retry, now)
}

#[cfg(test)]
mod tests;
