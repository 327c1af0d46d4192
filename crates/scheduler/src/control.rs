//! Operator controls: cancel Work (a control event and full fencing in one transaction), wake it (an
//! ordinary event on the Work's own key that reports whether it woke it), retry it, cancel or confirm
//! an attempt, and an operator's own events.

use conduit_config::Snapshot;
use conduit_core::approval::ApprovalState;
use conduit_core::names::{is_event_type, is_reserved_type, work_key};
use conduit_core::work::BINDING_REMOVED;
use conduit_core::{
    Causation, ErrorCode, Event, Execution, ExecutionState, NewEvent, Refusal, Source, Timestamp, WaitState, Work,
    WorkState,
};
use conduit_store::{derived_id, Tx};
use serde_json::{json, Value};

use crate::accept::accept;
use crate::causal::record;
use crate::fence::{cancel_running, release_interrupted};
use crate::HostError;

/// Who asks, and the identity seed their request derives ids from.
pub struct Operator<'a> {
    pub actor: &'a str,
    pub seed: &'a str,
}

/// Cancels unfinished Work: records `core.work.cancelled`, marks the Work cancelled, fences its
/// running attempt (cancelled, tokens revoked, so its next call is refused and its supervisor stops
/// it at the next lease renewal), cancels its armed waits and its pending approvals, all in one
/// transaction.
pub fn cancel_work(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<Event, HostError> {
    let mut work = tx.get_work(id)?.ok_or_else(|| Refusal::not_found("Work"))?;
    if work.state.is_terminal() {
        return Err(Refusal::new(ErrorCode::Conflict, "the Work has already finished").into());
    }
    let event = record(
        tx,
        config,
        control_event(&work.scope, id, "core.work.cancelled", json!({}), by, now),
    )?;
    for mut x in tx
        .executions_of_work(id)?
        .into_iter()
        .filter(|x| x.state == ExecutionState::Running)
    {
        cancel_running(tx, &mut x, now)?;
    }
    for mut wait in tx.armed_waits_of_work(id)? {
        wait.state = WaitState::Cancelled;
        wait.satisfied_by = Some(event.id.clone());
        tx.update_wait(&wait)?;
    }
    for mut approval in tx.pending_approvals_of_work(id)? {
        approval.state = ApprovalState::Cancelled;
        approval.decided_by = Some(by.actor.to_owned());
        approval.decided_at = Some(now);
        tx.put_approval(&approval)?;
    }
    work.state = WorkState::Cancelled;
    work.updated_at = now;
    tx.update_work(&work)?;
    Ok(event)
}

/// Emits `event_type` on the Work's own key and reports whether it woke the Work.
pub fn wake_work(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    event_type: &str,
    data: Value,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Event, bool), HostError> {
    let before = tx.get_work(id)?.ok_or_else(|| Refusal::not_found("Work"))?;
    let event = accept(
        tx,
        config,
        control_event(&before.scope, id, event_type, data, by, now),
        now,
    )?;
    let after = tx.get_work(id)?.map(|w| w.state);
    let woke = before.state == WorkState::Waiting && after == Some(WorkState::Ready);
    Ok((event, woke))
}

/// An operator's event for a scope, not addressed to one Work.
pub struct OperatorEvent {
    pub event_type: String,
    pub scope: String,
    pub data: Value,
    pub correlation_key: Option<String>,
    /// An event it derives from (in the same scope); `None`: a new root.
    pub parent: Option<String>,
}

/// An operator emits namespaced types outside the host's families; checked before anything is keyed.
pub fn check_operator_type(event_type: &str) -> Result<(), Refusal> {
    if !is_event_type(event_type) {
        return Err(Refusal::new(
            ErrorCode::InvalidRequest,
            "an event type is namespaced: `family.name`",
        ));
    }
    if is_reserved_type(event_type) {
        return Err(Refusal::new(
            ErrorCode::EventTypeNotAllowed,
            "core, agent, tool and toolbelt events belong to the host",
        ));
    }
    Ok(())
}

/// An operator's event, stamped with the operator as its actor and routed at once: a `core.manual`
/// root, or derived from a parent event of the same scope (under the parent's causal bounds).
pub fn emit_event(
    tx: &mut dyn Tx,
    config: &Snapshot,
    event: OperatorEvent,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<Event, HostError> {
    if !config.scope_enabled(&event.scope) {
        return Err(Refusal::new(ErrorCode::UnknownScope, "no enabled scope has this id").into());
    }
    let root = operator_root(&event.scope, "operator.event", &event.event_type, event.data, by, now);
    let causation = match &event.parent {
        None => root.causation.clone(),
        Some(parent) => Causation::derived_from(&parent_in(tx, parent, &event.scope)?),
    };
    let accepted = NewEvent {
        correlation_key: event.correlation_key,
        causation,
        ..root
    };
    accept(tx, config, accepted, now)
}

/// The parent an operator's event names: an event of the same scope.
fn parent_in(tx: &mut dyn Tx, id: &str, scope: &str) -> Result<Event, HostError> {
    let parent = tx.get_event(id)?.ok_or_else(|| Refusal::not_found("parent event"))?;
    if parent.scope != scope {
        return Err(Refusal::invalid_input("the parent event is in another scope").into());
    }
    Ok(parent)
}

/// An operator's root event on the Work's own key, its id derived from the request.
pub(crate) fn control_event(
    scope: &str,
    work: &str,
    event_type: &str,
    data: Value,
    by: &Operator<'_>,
    now: Timestamp,
) -> NewEvent {
    NewEvent {
        work_id: Some(work.to_owned()),
        correlation_key: Some(work_key(work)),
        ..operator_root(scope, event_type, event_type, data, by, now)
    }
}

/// An operator's root event in `scope`, its id derived from the request's seed and `purpose`.
pub(crate) fn operator_root(
    scope: &str,
    purpose: &str,
    event_type: &str,
    data: Value,
    by: &Operator<'_>,
    now: Timestamp,
) -> NewEvent {
    let id = derived_id(&[by.seed, purpose]);
    NewEvent {
        causation: Causation::root(&id),
        id,
        event_type: event_type.to_owned(),
        source: Source::Manual,
        scope: scope.to_owned(),
        work_id: None,
        execution_id: None,
        correlation_key: None,
        actor: Some(by.actor.to_owned()),
        data,
        accepted_at: now,
        delivery_id: None,
    }
}

/// Why a held Work is not claimed.
pub const OPERATOR_CANCELLED: &str = "operator_cancelled";

/// Cancels one running attempt: fences it (cancelled, tokens revoked) and holds its Work from being
/// claimed again (`blocked_reason = operator_cancelled`) until a manual retry.
pub fn cancel_execution(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Execution, Event), HostError> {
    let mut x = tx.get_execution(id)?.ok_or_else(|| Refusal::not_found("execution"))?;
    if x.state != ExecutionState::Running {
        return Err(Refusal::new(ErrorCode::Conflict, "the execution is not running").into());
    }
    let mut work = tx.get_work(&x.work_id)?.ok_or_else(|| Refusal::not_found("Work"))?;
    let data = json!({"execution": x.id});
    let event = record(
        tx,
        config,
        control_event(&work.scope, &work.id, "core.execution.cancelled", data, by, now),
    )?;
    cancel_running(tx, &mut x, now)?;
    work.state = WorkState::Ready;
    work.blocked_reason = Some(OPERATOR_CANCELLED.to_owned());
    work.updated_at = now;
    tx.update_work(&work)?;
    Ok((x, event))
}

/// Retries Work that is held, waiting out a retry backoff, or failed: a `core.manual.retry` event,
/// and the Work ready again now (its hold, backoff and outcome cleared), its next attempt
/// continuing from that event. Cancelled Work is final.
pub fn retry_work(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Work, Event), HostError> {
    let mut work = tx.get_work(id)?.ok_or_else(|| Refusal::not_found("Work"))?;
    refuse_unconfirmed_stop(tx, id)?;
    if work.blocked_reason.as_deref() == Some(BINDING_REMOVED)
        && config.executable(&work.scope, &work.binding).is_none()
    {
        return Err(
            Refusal::new(ErrorCode::Conflict, "its binding is gone from the configuration")
                .with_remedy(format!("rebind it: `open-conduit work rebind {id} --binding NAME`"))
                .into(),
        );
    }
    let held = work.state == WorkState::Ready && (work.blocked_reason.is_some() || work.not_before.is_some());
    if !held && work.state != WorkState::Failed {
        return Err(Refusal::new(
            ErrorCode::Conflict,
            "only held, backing-off or failed Work can be retried",
        )
        .with_remedy(retry_remedy(work.state))
        .into());
    }
    let event = record(
        tx,
        config,
        control_event(&work.scope, id, "core.manual.retry", json!({}), by, now),
    )?;
    work.state = WorkState::Ready;
    work.blocked_reason = None;
    work.outcome = None;
    // A retry by hand starts the binding's policy over: its full count of attempts, now.
    work.failed_attempts = 0;
    work.not_before = None;
    work.wake_event = event.id.clone();
    work.updated_at = now;
    tx.update_work(&work)?;
    Ok((work, event))
}

/// A fenced attempt whose process is not known to be gone could still be acting for its Work: the
/// Work is not retried until the host saw it end or an operator confirms it stopped.
pub(crate) fn refuse_unconfirmed_stop(tx: &mut dyn Tx, work: &str) -> Result<(), HostError> {
    let unconfirmed = tx
        .executions_of_work(work)?
        .into_iter()
        .find(|x| x.state == ExecutionState::Cancelled && x.stopped_at.is_none());
    match unconfirmed {
        None => Ok(()),
        Some(x) => Err(Refusal::new(
            ErrorCode::Conflict,
            "a cancelled attempt of this Work is not yet known to have stopped",
        )
        .with_remedy(format!(
            "wait for the daemon to stop it, or once its process is gone run `open-conduit execution confirm-stopped {}`",
            x.id
        ))
        .into()),
    }
}

/// An operator's word that a fenced attempt's process is gone (the host could not see it end, e.g.
/// it was started by an earlier daemon): records `core.execution.stopped` and the stop. Confirming
/// a stop already known changes nothing and answers the execution as it is.
pub fn confirm_stopped(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Execution, Option<Event>), HostError> {
    let mut x = tx.get_execution(id)?.ok_or_else(|| Refusal::not_found("execution"))?;
    if x.state == ExecutionState::Running {
        return Err(Refusal::new(ErrorCode::Conflict, "the execution is still running")
            .with_remedy(format!("cancel it first: `open-conduit execution cancel {id}`"))
            .into());
    }
    if x.stopped_at.is_some() || x.state != ExecutionState::Cancelled {
        return Ok((x, None));
    }
    let data = json!({"execution": x.id});
    let event = record(
        tx,
        config,
        control_event(&x.scope, &x.work_id, "core.execution.stopped", data, by, now),
    )?;
    x.stopped_at = Some(now);
    tx.update_execution(&x)?;
    release_interrupted(tx, &x.work_id, now)?;
    Ok((x, Some(event)))
}

/// What to do instead of retrying Work in `state`.
fn retry_remedy(state: WorkState) -> &'static str {
    match state {
        WorkState::Succeeded | WorkState::Cancelled => {
            "it has finished and stays finished; create new Work (`open-conduit work create`) to run it again"
        }
        WorkState::Running => "cancel its running attempt first (`open-conduit work cancel`), or wait for it to finish",
        WorkState::Waiting => "it waits for an event: wake it (`open-conduit work wake`) or cancel it",
        _ => "it is ready and runs when a daemon claims it",
    }
}
