//! `/v1/work` and `/v1/waits`: create, list and read Work; cancel, wake and retry it; hold, release,
//! rebind and attach it; its waits.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::Uri;
use axum::http::{HeaderMap, StatusCode};
use conduit_config::Snapshot;
use conduit_core::{ErrorCode, Event, Refusal, Role, Wait, Work, WorkState};
use conduit_scheduler::{
    attach_key, cancel_work, check_operator_type, create_work, hold_work, rebind_work, release_work, retry_work,
    wake_work, NewWork, Operator,
};
use conduit_store::{Tx, WorkFilter};
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::{admit, found, read_one, NoBody, Reply};
use super::paging::{page_until_now, ByWork, List};
use super::state::Management;
use crate::clock::now;
use crate::envelope::Answer;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateWork {
    scope: String,
    binding: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    keys: Vec<String>,
    /// Binding grants the Work takes.
    #[serde(default)]
    grants: Vec<String>,
}

/// Manual Work: ready Work and its root `core.work.created`, in one transaction; its ids derive from
/// the Idempotency-Key, so a retried request creates the same Work.
pub(super) async fn create(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let admitted = admit(&headers, &uri, body, Role::Operate, |_: &CreateWork| Ok(())).await?;
    let run = |tx: &mut dyn Tx, config: &Snapshot, by: &Operator<'_>, req: CreateWork| {
        let new = NewWork {
            keys: req.keys,
            grants: req.grants,
            id_seed: Some(format!("operator/{}", by.seed)),
            ..NewWork::manual(&req.scope, &req.binding, req.input, Some(by.actor.to_owned()))
        };
        let (work, _) = create_work(tx, config, new, None, now())?;
        Ok((StatusCode::CREATED, serde_json::to_value(work).unwrap_or_default()))
    };
    admitted.once(&s, Box::new(run)).await
}

/// Cancels unfinished Work: a `core.work.cancelled` event and full fencing in one transaction.
pub(super) fn cancel(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: NoBody) -> Reply {
    let event = cancel_work(tx, config, id, by, now())?;
    Ok(json!({"work": tx.get_work(id)?, "event": event}))
}

/// Retries held or failed Work.
pub(super) fn retry(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: NoBody) -> Reply {
    steered(retry_work(tx, config, id, by, now())?)
}

/// Holds unfinished Work from being claimed until it is released.
pub(super) fn hold(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: NoBody) -> Reply {
    steered(hold_work(tx, config, id, by, now())?)
}

/// Releases Work an operator held.
pub(super) fn release(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: NoBody) -> Reply {
    steered(release_work(tx, config, id, by, now())?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Rebind {
    binding: String,
}

/// Rebinds Work that is not running to another binding of its scope.
pub(super) fn rebind(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, req: Rebind) -> Reply {
    steered(rebind_work(tx, config, id, &req.binding, by, now())?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Attach {
    key: String,
}

/// Attaches a correlation key to unfinished Work.
pub(super) fn attach(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, req: Attach) -> Reply {
    steered(attach_key(tx, config, id, &req.key, by, now())?)
}

fn steered((work, event): (Work, Event)) -> Reply {
    Ok(json!({"work": work, "event": event}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wake {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(default)]
    data: Value,
}

/// Emits an event on the Work's own key and reports whether it woke the Work.
pub(super) async fn wake(
    State(s): State<Management>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    body: Body,
) -> Answer {
    let check = |req: &Wake| check_operator_type(&req.event_type);
    let admitted = admit(&headers, &uri, body, Role::Operate, check).await?;
    let run = move |tx: &mut dyn Tx, config: &Snapshot, by: &Operator<'_>, req: Wake| {
        let (event, woke) = wake_work(tx, config, &id, &req.event_type, req.data, by, now())?;
        Ok((StatusCode::OK, json!({"event": event, "woke": woke})))
    };
    admitted.once(&s, Box::new(run)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkQuery {
    scope: Option<String>,
    state: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// Work, newest first, a page at a time.
pub(super) async fn list_work(State(s): State<Management>, uri: Uri, Query(q): Query<WorkQuery>) -> Answer {
    let state = match q.state.as_deref() {
        Some(text) => Some(WorkState::parse(text).ok_or_else(|| {
            Refusal::new(ErrorCode::InvalidRequest, "unknown Work state")
                .with_remedy("use ready, running, waiting, succeeded, failed or cancelled")
        })?),
        None => None,
    };
    let filters = format!(
        "scope={}&state={}",
        q.scope.as_deref().unwrap_or(""),
        q.state.as_deref().unwrap_or("")
    );
    let filter = WorkFilter { scope: q.scope, state };
    let list = List::at(&uri, filters, q.cursor, q.limit);
    page_until_now(
        &s,
        list,
        move |tx, page| tx.page_work(&filter, page),
        |w: &Work| (w.created_at.0, w.id.clone()),
    )
    .await
}

pub(super) async fn get_work(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| found(tx.get_work(&id)?, "Work")).await
}

/// Waits in every state, oldest first, a page at a time.
pub(super) async fn list_waits(State(s): State<Management>, uri: Uri, Query(q): Query<ByWork>) -> Answer {
    let (list, work) = q.list(&uri);
    page_until_now(
        &s,
        list,
        move |tx, page| tx.page_waits(work.as_deref(), page),
        |w: &Wait| (w.created_at.0, w.id.clone()),
    )
    .await
}
