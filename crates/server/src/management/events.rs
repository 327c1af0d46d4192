//! `/v1/events`: an operator's events, the event log a page at a time, and causal chains.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::Uri;
use axum::http::{HeaderMap, StatusCode};
use conduit_config::Snapshot;
use conduit_core::{Event, Role};
use conduit_scheduler::{check_operator_type, emit_event, Operator, OperatorEvent};
use conduit_store::{EventFilter, Tx};
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::{admit, found, read, read_one};
use super::kept_events::ServedEvent;
use super::paging::{page, time, List};
use super::state::Management;
use crate::clock::now;
use crate::envelope::Answer;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Emit {
    #[serde(rename = "type")]
    event_type: String,
    scope: String,
    #[serde(default)]
    data: Value,
    correlation_key: Option<String>,
    /// The id of an event this one derives from.
    parent: Option<String>,
}

/// An operator's event, stamped with the operator as its actor and routed at once: a `core.manual`
/// root, or derived from the `parent` it names.
pub(super) async fn emit(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let check = |req: &Emit| check_operator_type(&req.event_type);
    let admitted = admit(&headers, &uri, body, Role::Operate, check).await?;
    let run = |tx: &mut dyn Tx, config: &Snapshot, by: &Operator<'_>, req: Emit| {
        let event = OperatorEvent {
            event_type: req.event_type,
            scope: req.scope,
            data: req.data,
            correlation_key: req.correlation_key,
            parent: req.parent,
        };
        let event = emit_event(tx, config, event, by, now())?;
        Ok((StatusCode::CREATED, serde_json::to_value(event).unwrap_or_default()))
    };
    admitted.once(&s, Box::new(run)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EventQuery {
    work: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    since: Option<String>,
    /// Only events accepted after the one with this sequence number (how a follower resumes).
    after: Option<i64>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// Events in acceptance order, a page at a time.
pub(super) async fn list_events(State(s): State<Management>, uri: Uri, Query(q): Query<EventQuery>) -> Answer {
    let filter = EventFilter {
        work: q.work,
        event_type: q.event_type,
        since: q.since.as_deref().map(|t| time("since", t)).transpose()?,
    };
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let filters = format!(
        "work={}&type={}&since={}&after={}",
        text(&filter.work),
        text(&filter.event_type),
        filter.since.map_or(String::new(), |t| t.0.to_string()),
        q.after.map_or(String::new(), |a| a.to_string()),
    );
    let list = List::at(&uri, filters, q.cursor, q.limit).after(q.after.map(Value::from));
    let kept = s.kept_events.clone();
    page(
        &s,
        list,
        |tx| Ok(tx.max_sequence()?),
        move |tx, page| kept.page(tx, &filter, page),
        |e: &ServedEvent| e.sequence,
    )
    .await
}

pub(super) async fn get_event(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| found(tx.get_event(&id)?, "event")).await
}

/// The causal chain of an event: its root first, each parent in turn, ending with the event.
pub(super) async fn chain(State(s): State<Management>, Path(id): Path<String>) -> Answer {
    read(&s, move |tx| {
        let mut chain: Vec<Event> = Vec::new();
        let mut next = Some(id);
        while let Some(id) = next.take() {
            let event = found(tx.get_event(&id)?, "event")?;
            next = event.causation.parent.clone();
            chain.push(event);
        }
        chain.reverse();
        Ok(json!({ "items": chain }))
    })
    .await
}
