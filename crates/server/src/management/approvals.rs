//! `/v1/approvals`: the human extension's pending decisions. Reading takes `view`; deciding takes
//! `operate` and, where the rule names approvers, being one of them. A decision is an event on the
//! Work's own key (`approval.decided`), stamped with the deciding operator as actor, so it wakes
//! the parked Work; the resumed caller's repeated call then passes (approved) or is refused.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Uri};
use conduit_config::Snapshot;
use conduit_core::approval::{may_decide, Approval, ApprovalState};
use conduit_core::{ErrorCode, Refusal, Timestamp};
use conduit_scheduler::{wake_work, Operator};
use conduit_store::Tx;
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::{read_one, Reply};
use super::paging::{page_until_now, List};
use super::state::Management;
use crate::clock::now;
use crate::envelope::{Answer, Failure};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByState {
    state: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// Approvals, optionally in one state, oldest first, a page at a time.
pub async fn list(State(s): State<Management>, uri: Uri, Query(q): Query<ByState>) -> Answer {
    let state = match q.state.as_deref() {
        None => None,
        Some(text) => Some(ApprovalState::parse(text).ok_or_else(|| {
            Failure(Refusal::invalid_input(
                "`state` is pending, approved, denied, expired, used or cancelled",
            ))
        })?),
    };
    let list = List::at(
        &uri,
        format!("state={}", q.state.as_deref().unwrap_or("")),
        q.cursor,
        q.limit,
    );
    page_until_now(
        &s,
        list,
        move |tx, page| tx.page_approvals(state, page),
        |a: &Approval| (a.requested_at.0, a.id.clone()),
    )
    .await
}

pub async fn show(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| {
        tx.get_approval(&id)?
            .ok_or_else(|| Failure(Refusal::not_found("approval")))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Approve {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Deny {
    reason: String,
}

pub(super) fn approve(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: Approve) -> Reply {
    decide(tx, config, by, id, ApprovalState::Approved, None)
}

pub(super) fn deny(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, deny: Deny) -> Reply {
    decide(tx, config, by, id, ApprovalState::Denied, Some(deny.reason))
}

/// Records a decision on a pending approval and wakes its Work, in one transaction.
fn decide(
    tx: &mut dyn Tx,
    config: &conduit_config::Snapshot,
    by: &Operator<'_>,
    id: &str,
    decision: ApprovalState,
    reason: Option<String>,
) -> Result<Value, Failure> {
    let mut approval = tx
        .get_approval(id)?
        .ok_or_else(|| Failure(Refusal::not_found("approval")))?;
    if !may_decide(&approval, by.actor) {
        return Err(Failure(Refusal::new(
            ErrorCode::Forbidden,
            "this rule names other approvers",
        )));
    }
    let at = now();
    ensure_pending(&approval, tx, at)?;
    approval.state = decision;
    approval.reason = reason.clone();
    approval.decided_by = Some(by.actor.to_owned());
    approval.decided_at = Some(at);
    tx.put_approval(&approval)?;
    let mut data = json!({"approvalId": approval.id, "operation": approval.operation, "decision": decision.as_str()});
    if let Some(reason) = reason {
        data["reason"] = json!(reason);
    }
    let (event, woke) = wake_work(tx, config, &approval.work_id, "approval.decided", data, by, at)?;
    Ok(json!({"approval": approval, "event": event, "woke": woke}))
}

/// Only a pending approval that has not run out of time, of Work still going, can be decided.
fn ensure_pending(approval: &Approval, tx: &mut dyn Tx, at: Timestamp) -> Result<(), Failure> {
    let conflict = |why: &str| Err(Failure(Refusal::new(ErrorCode::Conflict, why)));
    if approval.state != ApprovalState::Pending {
        return conflict("the approval was already decided");
    }
    if approval.expires_at.is_some_and(|due| at.0 >= due.0) {
        return conflict("the approval expired before it was decided");
    }
    if tx.get_work(&approval.work_id)?.is_none_or(|w| w.state.is_terminal()) {
        return conflict("the approval's Work has finished");
    }
    Ok(())
}
