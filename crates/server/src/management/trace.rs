//! Route trace and samples: how the router would handle a hypothetical event now.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_config::Snapshot;
use conduit_core::names::{is_event_type, is_reserved_type};
use conduit_core::{ErrorCode, Refusal, Role, Source};
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
/// A type one of the scope's samples is named after is traced with that sample's source, key and
/// data, where the request leaves them out.
pub async fn trace(
    State(s): State<Management>,
    headers: HeaderMap,
    uri: Uri,
    Path(scope): Path<String>,
    body: Body,
) -> Answer {
    operator(Role::View).await?;
    check_mutation(&headers, &uri)?;
    let req: Hypothetical = parse_body(&read_body(body).await?)?;
    check_type(&req.event_type)?;
    let config = s.config.get();
    if config.scope(&scope).is_none() {
        return Err(Failure(Refusal::unknown_scope()));
    }
    let sample = route_samples(&config, &scope, s.registry.get().samples())
        .into_iter()
        .find(|sample| sample.name == req.event_type);
    let source = match (&req.source, &sample) {
        (None, Some(sample)) => sample.source.clone(),
        (given, _) => traced_source(&config, &scope, given.as_deref())?,
    };
    let probe = Probe {
        event_type: req.event_type,
        source,
        correlation_key: req.correlation_key.or_else(|| sample.as_ref()?.correlation_key.clone()),
        work_id: req.work_id,
        data: match (req.data, sample) {
            (Value::Null, Some(sample)) => sample.data,
            (data, _) => data,
        },
        scope,
    };
    let store = s.store.clone();
    let answer = blocking(move || store.read(|tx| Ok::<_, Failure>(trace_route(tx, &config, probe, now())?))).await?;
    ok(StatusCode::OK, &answer)
}

/// `GET /v1/scopes/{id}/route/samples`: the sample events the scope's route handlers offer.
pub async fn samples(State(s): State<Management>, Path(scope): Path<String>) -> Answer {
    operator(Role::View).await?;
    let config = s.config.get();
    if config.scope(&scope).is_none() {
        return Err(Failure(Refusal::unknown_scope()));
    }
    let items = route_samples(&config, &scope, s.registry.get().samples());
    ok(StatusCode::OK, &json!({ "items": items }))
}

/// An event acceptance would refuse is refused, not explained: `422 invalid_request`.
fn check_type(event_type: &str) -> Result<(), Failure> {
    if !is_event_type(event_type) {
        return Err(untraceable("an event type is namespaced: `family.name`"));
    }
    if is_reserved_type(event_type) {
        return Err(untraceable("core, agent, tool and toolbelt events belong to the host"));
    }
    Ok(())
}

/// The traced event's source: an operator's (the default) or an action's, or an ingress's that
/// accepts its events in this scope. A source no ingress registers, and an ingress that delivers
/// into another scope, are refused as acceptance would refuse their events.
fn traced_source(config: &Snapshot, scope: &str, source: Option<&str>) -> Result<Source, Failure> {
    match source {
        None | Some("core.manual") => return Ok(Source::Manual),
        Some("core.action") => return Ok(Source::Action),
        Some(_) => {}
    }
    let name = source.unwrap_or_default();
    match config.ingress_scope(name) {
        Some(accepted) if accepted == scope => Ok(Source::Ingress(name.to_owned())),
        Some(_) => Err(untraceable("this ingress accepts its events in another scope")),
        None => Err(untraceable(
            "an unknown source: an operator traces core.manual or core.action events, or an ingress's that accepts events in this scope",
        )),
    }
}

/// The seed answers trace refusals `422`, where other request refusals are `400`.
fn untraceable(message: &str) -> Failure {
    Failure(Refusal::operation(ErrorCode::InvalidRequest.as_str(), message))
}
