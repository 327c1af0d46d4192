//! Route trace and samples: how the router would handle a hypothetical event now.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_core::names::{is_event_type, is_reserved_type};
use conduit_core::{ErrorCode, Refusal, Role};
use conduit_scheduler::{samples as route_samples, trace as trace_route, Probe};
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::operator;
use super::state::Management;
use crate::clock::now;
use crate::envelope::{blocking, check_mutation, ok, parse_body, read_body, Answer, Failure};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Hypothetical {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    correlation_key: Option<String>,
    #[serde(default)]
    work_id: Option<String>,
    #[serde(default)]
    data: Value,
}

/// `POST /v1/scopes/{id}/route/trace`: a read, so it takes no Idempotency-Key and records nothing.
pub async fn trace(
    State(s): State<Management>,
    headers: HeaderMap,
    uri: Uri,
    Path(scope): Path<String>,
    body: Body,
) -> Answer {
    operator(Role::View)?;
    check_mutation(&headers, &uri)?;
    let req: Hypothetical = parse_body(&read_body(body).await?)?;
    check_traceable(&req)?;
    let config = s.config.get();
    if config.scope(&scope).is_none() {
        return Err(Failure(Refusal::unknown_scope()));
    }
    let probe = Probe {
        scope,
        event_type: req.event_type,
        correlation_key: req.correlation_key,
        work_id: req.work_id,
        data: req.data,
    };
    let store = s.store.clone();
    let answer = blocking(move || store.read(|tx| Ok::<_, Failure>(trace_route(tx, &config, probe, now())?))).await?;
    ok(StatusCode::OK, &answer)
}

/// `GET /v1/scopes/{id}/route/samples`: the sample events the scope's routes offer.
pub async fn samples(State(s): State<Management>, Path(scope): Path<String>) -> Answer {
    operator(Role::View)?;
    let config = s.config.get();
    if config.scope(&scope).is_none() {
        return Err(Failure(Refusal::unknown_scope()));
    }
    let items: Vec<Value> = route_samples(&config, &scope)
        .into_iter()
        .map(|t| json!({"name": t, "type": t}))
        .collect();
    ok(StatusCode::OK, &json!({ "items": items }))
}

/// An event acceptance would refuse is refused, not explained: `422 invalid_request`.
fn check_traceable(req: &Hypothetical) -> Result<(), Failure> {
    if !is_event_type(&req.event_type) {
        return Err(untraceable("an event type is namespaced: `family.name`"));
    }
    if is_reserved_type(&req.event_type) {
        return Err(untraceable("core, agent, tool and toolbelt events belong to the host"));
    }
    match req.source.as_deref() {
        None | Some("core.manual") | Some("core.action") => Ok(()),
        Some(_) => Err(untraceable(
            "an operator traces core.manual or core.action events; no ingress registers another source",
        )),
    }
}

/// The seed answers trace refusals `422`, where other request refusals are `400`.
fn untraceable(message: &str) -> Failure {
    Failure(Refusal::operation(ErrorCode::InvalidRequest.as_str(), message))
}
