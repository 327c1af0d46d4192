//! `/v1/executions` and `/v1/audit`: attempts, their operator controls, and the audit trail.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::http::Uri;
use conduit_config::Snapshot;
use conduit_core::Execution;
use conduit_scheduler::{cancel_execution, confirm_stopped, Operator};
use conduit_store::Tx;
use serde_json::json;

use super::access::{found, read, read_one, NoBody, Reply};
use super::paging::{page, ByExecution, ByWork};
use super::state::Management;
use crate::clock::now;
use crate::envelope::Answer;

/// Cancels one attempt and holds its Work until a manual retry.
pub(super) fn cancel_attempt(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: NoBody) -> Reply {
    let (execution, event) = cancel_execution(tx, config, id, by, now())?;
    Ok(json!({"execution": execution, "event": event}))
}

/// An operator's confirmation that a cancelled attempt's process is gone.
pub(super) fn confirm_attempt_stopped(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: NoBody) -> Reply {
    let (execution, event) = confirm_stopped(tx, config, id, by, now())?;
    Ok(json!({"execution": execution, "event": event}))
}

/// Executions, oldest first, a page at a time.
pub(super) async fn list_executions(State(s): State<Management>, uri: Uri, Query(q): Query<ByWork>) -> Answer {
    let (list, work) = q.list(&uri);
    page(
        &s,
        list,
        |_| Ok(now().0),
        move |tx, page| tx.page_executions(work.as_deref(), page),
        |x: &Execution| (x.started_at.0, x.id.clone()),
    )
    .await
}

pub(super) async fn get_execution(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| found(tx.get_execution(&id)?, "execution")).await
}

const AUDIT_PAGE: usize = 1000;

pub(super) async fn list_audit(State(s): State<Management>, Query(q): Query<ByExecution>) -> Answer {
    read(&s, move |tx| {
        Ok(json!({ "items": tx.list_audit(q.execution.as_deref(), AUDIT_PAGE)? }))
    })
    .await
}
