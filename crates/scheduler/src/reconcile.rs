//! Scope reconcile: brings a scope's unfinished Work in line with the active generation. Work whose
//! binding the generation no longer runs would fail at its next claim; reconcile holds it instead
//! (`blocked_reason: binding_removed`), so an operator can rebind it (which releases it) or cancel
//! it. Work whose taken grants its binding no longer offers is reported: those operations are
//! simply no longer granted.

use conduit_config::Snapshot;
use conduit_core::work::BINDING_REMOVED;
use conduit_core::{Refusal, Timestamp, WorkState};
use conduit_store::{Tx, WorkFilter};
use serde::Serialize;
use serde_json::json;

use crate::causal::record;
use crate::control::{control_event, Operator};
use crate::HostError;

/// What reconcile found of one Work, and whether it held it.
#[derive(Debug, Serialize)]
pub struct Finding {
    pub work: String,
    pub state: WorkState,
    pub binding: String,
    /// `binding_removed` or `grant_withdrawn`.
    pub finding: &'static str,
    pub held: bool,
}

/// Reconciles the scope's ready and waiting Work (up to the store's list bound per state) with the
/// active generation; running Work finishes under the generation its attempt pinned.
pub fn reconcile_scope(
    tx: &mut dyn Tx,
    config: &Snapshot,
    scope: &str,
    by: &Operator<'_>,
    now: Timestamp,
) -> Result<Vec<Finding>, HostError> {
    if config.scope(scope).is_none() {
        return Err(Refusal::unknown_scope().into());
    }
    let mut findings = Vec::new();
    for state in [WorkState::Ready, WorkState::Waiting] {
        let filter = WorkFilter {
            scope: Some(scope.to_owned()),
            state: Some(state),
        };
        for mut work in tx.list_work(&filter)? {
            if config.executable(scope, &work.binding).is_none() {
                let held = work.blocked_reason.is_none();
                if held {
                    // One request holds many Works: each event's id derives from its own Work.
                    let seed = format!("{}/{}", by.seed, work.id);
                    let each = Operator {
                        actor: by.actor,
                        seed: &seed,
                    };
                    let data = json!({"reason": BINDING_REMOVED});
                    let held_event = control_event(scope, &work.id, "core.work.held", data, &each, now);
                    record(tx, config, held_event)?;
                    work.blocked_reason = Some(BINDING_REMOVED.to_owned());
                    work.updated_at = now;
                    tx.update_work(&work)?;
                }
                findings.push(finding(&work, BINDING_REMOVED, held));
            } else if work
                .grants
                .iter()
                .any(|g| !config.offers_grant(scope, &work.binding, g))
            {
                findings.push(finding(&work, "grant_withdrawn", false));
            }
        }
    }
    Ok(findings)
}

fn finding(work: &conduit_core::Work, finding: &'static str, held: bool) -> Finding {
    Finding {
        work: work.id.clone(),
        state: work.state,
        binding: work.binding.clone(),
        finding,
        held,
    }
}
