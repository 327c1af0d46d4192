//! Actions: what an operator invokes by name on a Work or in a scope (`open-conduit act`), the host
//! accepting a `core.action` event stamped with the operator as its actor. On a Work, the event is
//! on the Work's own key, so a wait for its type wakes it; in a scope, it routes like any event.

use conduit_config::Snapshot;
use conduit_core::names::work_key;
use conduit_core::{ErrorCode, Event, NewEvent, Refusal, Source, Timestamp, WorkState};
use conduit_store::Tx;
use serde_json::Value;

use crate::accept::accept;
use crate::control::{check_operator_type, operator_root, Operator};
use crate::work::owner_of;
use crate::HostError;

/// Where an action is invoked.
pub enum ActionTarget {
    /// On one unfinished Work (its own key).
    Work(String),
    /// In a scope, on an optional correlation key.
    Scope { scope: String, key: Option<String> },
}

/// An action: its type (namespaced, outside the host's families), where, and its data.
pub struct Action {
    pub action: String,
    pub target: ActionTarget,
    pub data: Value,
}

/// Invokes an action: accepts its `core.action` event, stamped with the operator, and answers it
/// and whether it woke a waiting Work.
pub fn act(
    tx: &mut dyn Tx,
    config: &Snapshot,
    action: Action,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<(Event, bool), HostError> {
    check_operator_type(&action.action)?;
    // The Work the action is addressed to (one it names), and the waiting Work it may wake (that
    // one, or the owner of the key it is invoked on).
    let (scope, addressed, key, waiting) = match action.target {
        ActionTarget::Work(id) => {
            let work = tx.get_work(&id)?.ok_or_else(|| Refusal::not_found("Work"))?;
            if work.state.is_terminal() {
                return Err(Refusal::new(ErrorCode::Conflict, "the Work has already finished").into());
            }
            let waiting = (work.state == WorkState::Waiting).then(|| id.clone());
            (work.scope, Some(id.clone()), Some(work_key(&id)), waiting)
        }
        ActionTarget::Scope { scope, key } => {
            let owner = match &key {
                Some(key) => owner_of(tx, key)?,
                None => None,
            };
            let waiting = owner.filter(|w| w.state == WorkState::Waiting).map(|w| w.id);
            (scope, None, key, waiting)
        }
    };
    if !config.scope_enabled(&scope) {
        return Err(Refusal::new(ErrorCode::UnknownScope, "no enabled scope has this id").into());
    }
    let event = NewEvent {
        source: Source::Action,
        work_id: addressed,
        correlation_key: key,
        ..operator_root(&scope, "operator.action", &action.action, action.data, by, now)
    };
    let event = accept(tx, config, event, now)?;
    let woke = match &waiting {
        Some(id) => tx.get_work(id)?.is_some_and(|w| w.state == WorkState::Ready),
        None => false,
    };
    Ok((event, woke))
}
