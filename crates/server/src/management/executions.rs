//! `/v1/executions` and `/v1/audit`: attempts, their operator controls, and the audit trail.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::http::Uri;
use conduit_config::Snapshot;
use conduit_core::{AuditRecord, Execution};
use conduit_scheduler::{cancel_execution, confirm_stopped, Operator};
use conduit_store::{AuditFilter, Tx};
use serde::Deserialize;
use serde_json::json;

use super::access::{found, read_one, NoBody, Reply};
use super::paging::{page_until_now, ByWork, List};
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
    page_until_now(
        &s,
        list,
        move |tx, page| tx.page_executions(work.as_deref(), page),
        |x: &Execution| (x.started_at.0, x.id.clone()),
    )
    .await
}

pub(super) async fn get_execution(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| found(tx.get_execution(&id)?, "execution")).await
}

/// Audit records, oldest first, a page at a time; each filter that is given must match.
pub(super) async fn list_audit(State(s): State<Management>, uri: Uri, Query(q): Query<AuditQuery>) -> Answer {
    let filter = AuditFilter {
        execution: q.execution,
        work: q.work,
        operation: q.operation,
        result: q.result,
    };
    let filters = format!(
        "execution={}&work={}&operation={}&result={}",
        filter.execution.as_deref().unwrap_or(""),
        filter.work.as_deref().unwrap_or(""),
        filter.operation.as_deref().unwrap_or(""),
        filter.result.as_deref().unwrap_or("")
    );
    let list = List::at(&uri, filters, q.cursor, q.limit);
    page_until_now(
        &s,
        list,
        move |tx, page| tx.page_audit(&filter, page),
        |a: &AuditRecord| (a.at.0, a.id.clone()),
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    execution: Option<String>,
    work: Option<String>,
    operation: Option<String>,
    result: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}
