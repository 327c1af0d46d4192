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
use super::paging::{page, page_until_now, time, ByWork, List};
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

/// Audit records, oldest first, a page at a time; each filter that is given must match, and
/// `since`/`until` bound the time recorded (`since` inclusive, `until` exclusive).
pub(super) async fn list_audit(State(s): State<Management>, uri: Uri, Query(q): Query<AuditQuery>) -> Answer {
    let since = q.since.as_deref().map(|t| time("since", t)).transpose()?;
    let until = q.until.as_deref().map(|t| time("until", t)).transpose()?;
    let filter = AuditFilter {
        execution: q.execution,
        work: q.work,
        operation: q.operation,
        result: q.result,
        since,
    };
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let filters = format!(
        "execution={}&work={}&operation={}&result={}&since={}&until={}",
        text(&filter.execution),
        text(&filter.work),
        text(&filter.operation),
        text(&filter.result),
        since.map_or(String::new(), |t| t.0.to_string()),
        until.map_or(String::new(), |t| t.0.to_string()),
    );
    let list = List::at(&uri, filters, q.cursor, q.limit);
    let upper = move |_: &mut dyn Tx| Ok(until.map_or(now().0, |u| (u.0 - 1).min(now().0)));
    page(
        &s,
        list,
        upper,
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
    since: Option<String>,
    until: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}
