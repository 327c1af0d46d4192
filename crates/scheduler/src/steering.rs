//! An operator steering unfinished Work without ending it: hold it from being claimed and release
//! it, rebind it to another binding of its scope, attach a correlation key to it. Each records a
//! control event on the Work's own key, in the same transaction as its effect.

use conduit_config::Snapshot;
use conduit_core::names::HOST_KEY_NAMESPACES;
use conduit_core::work::BINDING_REMOVED;
use conduit_core::{ErrorCode, Event, Refusal, Timestamp, Work, WorkState};
use conduit_store::{StoreError, Tx};
use serde_json::{json, Value};

use crate::causal::{check_key, record};
use crate::control::{control_event, refuse_unconfirmed_stop, Operator, OPERATOR_CANCELLED};
use crate::work::{check_grants, check_target, MAX_KEYS};
use crate::HostError;

/// Why a Work an operator holds is not claimed, until they release it.
pub const OPERATOR_HELD: &str = "operator_held";

/// Holds unfinished Work: it is not claimed again until released. A running attempt goes on (cancel
/// it to stop it); its next segment, and a waiting Work once woken, stay ready and unclaimed.
pub fn hold_work(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Work, Event), HostError> {
    let mut work = unfinished(tx, id)?;
    if let Some(reason) = &work.blocked_reason {
        let why = format!("the Work is already held ({reason})");
        return Err(Refusal::new(ErrorCode::Conflict, why).into());
    }
    let event = steer(tx, config, &work, "core.work.held", json!({}), by, now)?;
    work.blocked_reason = Some(OPERATOR_HELD.to_owned());
    Ok((save(tx, work, now)?, event))
}

/// Releases Work an operator held, so it is claimed again when ready.
pub fn release_work(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Work, Event), HostError> {
    let mut work = unfinished(tx, id)?;
    refuse_unconfirmed_stop(tx, id)?;
    match work.blocked_reason.as_deref() {
        Some(OPERATOR_HELD) => {}
        // Its binding is back in the configuration: it can run again.
        Some(BINDING_REMOVED) if config.executable(&work.scope, &work.binding).is_some() => {}
        Some(OPERATOR_CANCELLED) => {
            return Err(Refusal::new(ErrorCode::Conflict, "its attempt was cancelled, not held")
                .with_remedy(format!("retry it: `open-conduit work retry {id}`"))
                .into())
        }
        Some(BINDING_REMOVED) => {
            return Err(
                Refusal::new(ErrorCode::Conflict, "its binding is gone from the configuration")
                    .with_remedy(format!("rebind it: `open-conduit work rebind {id} --binding NAME`"))
                    .into(),
            )
        }
        _ => return Err(Refusal::new(ErrorCode::Conflict, "the Work is not held").into()),
    }
    let event = steer(tx, config, &work, "core.work.released", json!({}), by, now)?;
    work.blocked_reason = None;
    Ok((save(tx, work, now)?, event))
}

/// Rebinds Work that is not running to another binding of its scope that offers every grant it took:
/// its next attempt runs that binding. A running attempt is pinned to its binding, so it must end
/// first.
pub fn rebind_work(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    binding: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Work, Event), HostError> {
    let mut work = unfinished(tx, id)?;
    if work.state == WorkState::Running {
        return Err(Refusal::new(ErrorCode::Conflict, "the Work has a running attempt")
            .with_remedy("hold it and let the attempt end, or cancel the attempt, then rebind it")
            .into());
    }
    check_target(config, &work.scope, binding)?;
    check_grants(config, &work.scope, binding, &work.grants).map_err(|_| {
        Refusal::new(
            ErrorCode::Conflict,
            "the binding does not offer every grant the Work took",
        )
        .with_remedy("rebind it to a binding that offers the same grants")
    })?;
    if work.binding == binding {
        return Err(Refusal::new(ErrorCode::Conflict, "the Work already runs this binding").into());
    }
    let data = json!({"from": work.binding, "to": binding});
    let event = steer(tx, config, &work, "core.work.rebound", data, by, now)?;
    work.binding = binding.to_owned();
    // Held for its missing binding, it runs again on the one it has now.
    if work.blocked_reason.as_deref() == Some(BINDING_REMOVED) {
        work.blocked_reason = None;
    }
    Ok((save(tx, work, now)?, event))
}

/// Attaches a correlation key to unfinished Work: events on it route to the Work, and its armed
/// waits that subscribe on the Work's keys subscribe on it too. A key another Work owns is
/// `conflict`; the host's own key namespaces (`work:`, ...) are not attached by hand.
pub fn attach_key(
    tx: &mut dyn Tx,
    config: &Snapshot,
    id: &str,
    key: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Work, Event), HostError> {
    check_key(key)?;
    let namespace = key.split_once(':').map(|(ns, _)| ns);
    if namespace.is_some_and(|ns| HOST_KEY_NAMESPACES.contains(&ns)) {
        return Err(
            Refusal::invalid_input("keys in the host's namespaces (work:, core:, execution:) are its own").into(),
        );
    }
    let mut work = unfinished(tx, id)?;
    if work.keys.iter().any(|k| k == key) {
        return Err(Refusal::new(ErrorCode::Conflict, "the Work already owns this key").into());
    }
    // Its own key, and at most as many more as creation allows.
    if work.keys.len() > MAX_KEYS {
        return Err(Refusal::invalid_input(format!(
            "a Work owns at most {MAX_KEYS} correlation keys besides its own"
        ))
        .into());
    }
    let event = steer(tx, config, &work, "core.work.attached", json!({"key": key}), by, now)?;
    tx.attach_work_key(id, key).map_err(|e| match e {
        StoreError::KeyTaken => HostError::from(
            Refusal::new(ErrorCode::Conflict, "another Work owns this key")
                .with_remedy("attach a key no other Work owns, or cancel the Work that owns it"),
        ),
        e => e.into(),
    })?;
    for mut wait in tx.armed_waits_of_work(id)? {
        if same_keys(&wait.keys, &work.keys) {
            wait.keys.push(key.to_owned());
            tx.resubscribe_wait(&wait)?;
        }
    }
    work.keys.push(key.to_owned());
    Ok((save(tx, work, now)?, event))
}

/// A wait that subscribes on exactly the Work's keys (a type-only wait) follows them.
fn same_keys(wait: &[String], work: &[String]) -> bool {
    wait.len() == work.len() && wait.iter().all(|k| work.contains(k))
}

fn unfinished(tx: &mut dyn Tx, id: &str) -> Result<Work, HostError> {
    let work = tx.get_work(id)?.ok_or_else(|| Refusal::not_found("Work"))?;
    if work.state.is_terminal() {
        return Err(Refusal::new(ErrorCode::Conflict, "the Work has already finished").into());
    }
    Ok(work)
}

/// Records the control event of a steering action on the Work's own key.
fn steer(
    tx: &mut dyn Tx,
    config: &Snapshot,
    work: &Work,
    event_type: &str,
    data: Value,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<Event, HostError> {
    record(
        tx,
        config,
        control_event(&work.scope, &work.id, event_type, data, by, now),
    )
}

fn save(tx: &mut dyn Tx, mut work: Work, now: Timestamp) -> Result<Work, HostError> {
    work.updated_at = now;
    tx.update_work(&work)?;
    Ok(work)
}
