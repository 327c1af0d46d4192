//! What operators changed: every management request that changes something and succeeds is
//! recorded with the acting operator, the route and the request's path, before its answer is sent;
//! `GET /v1/audit/operators` lists the records. A keyed mutation records its change in its own
//! transaction (`crate::recording`); anything else is recorded here after it, a keyed request's
//! record then failing its answer when it cannot be written (the client's retry writes it).

use axum::body::{to_bytes, Body};
use axum::extract::{MatchedPath, Query, Request, State};
use axum::http::{header, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use conduit_core::canonical::canonical_hash;
use conduit_core::{ErrorCode, OperatorAction, Refusal, Role};
use conduit_store::new_id;
use serde::Deserialize;
use serde_json::Value;

use super::access::operator;
use super::paging::{page_until_now, List};
use super::state::Management;
use crate::clock::now;
use crate::envelope::{blocking, Answer, Failure, MAX_BODY};
use crate::recording::Recording;

/// Routes that take a body by `POST` but change nothing.
const READS_BY_POST: [&str; 2] = ["/v1/config/validate", "/v1/scopes/{id}/route/trace"];

/// The most of an answer read to pick its kept fields (the API's answers to changes are small).
const ANSWER_READ: usize = 4 * 1024 * 1024;

/// Changes that take no Idempotency-Key: each request is its own change, and its answer (a new
/// token, answered once) is sent even when its record cannot be written.
const UNKEYED: [&str; 2] = ["/v1/auth/rotate", "/v1/auth/operators"];

/// Opens a recording for each request that may change something; a change whose keyed mutation
/// did not write its record in its own transaction is recorded here, before its answer is sent.
pub(super) async fn recorded(
    State(s): State<Management>,
    matched: MatchedPath,
    request: Request,
    next: Next,
) -> Response {
    let changes = !request.method().is_safe() && !READS_BY_POST.contains(&matched.as_str());
    // A change's credential was checked before its handler ran, so this crosses to no store.
    let by = if changes { operator(Role::View).await.ok() } else { None };
    let Some(by) = by else {
        return next.run(request).await;
    };
    let route = format!("{} {}", request.method(), matched.as_str());
    let recording = Recording::new(by.principal(), route, request.uri().path().to_owned());
    let keyed = !UNKEYED.contains(&matched.as_str());
    let key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| k.trim().to_owned())
        .filter(|_| keyed);
    // The body is read here to bind a keyed record to it, as the key binds the request.
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, MAX_BODY).await else {
        return Failure(Refusal::new(ErrorCode::BodyTooLarge, "the body is larger than 1 MiB")).into_response();
    };
    let body_hash = canonical_hash(&serde_json::from_slice(&body).unwrap_or_default());
    let request = Request::from_parts(parts, Body::from(body));
    let response = recording.clone().scope(next.run(request)).await;
    if !response.status().is_success() || recording.is_written() {
        return response;
    }
    let (parts, answer) = response.into_parts();
    let Ok(bytes) = to_bytes(answer, ANSWER_READ).await else {
        return Failure(Refusal::internal()).into_response();
    };
    let answer: Value = match parts.headers.get(header::CONTENT_TYPE) {
        Some(_) => serde_json::from_slice(&bytes).unwrap_or_default(),
        None => Value::Null,
    };
    let (status, at) = (parts.status.as_u16(), now());
    let action = match &key {
        Some(key) => recording.keyed_action(key, &body_hash, status, &answer, at),
        None => recording.action(new_id(), status, &answer, at),
    };
    let store = s.store.clone();
    let written = blocking(move || Ok(store.write(|tx| tx.record_operator_action(&action))?)).await;
    match written {
        Ok(()) => Response::from_parts(parts, Body::from(bytes)),
        // A keyed change's retry replays it and writes the record then.
        Err(refused) if key.is_some() => refused.into_response(),
        Err(_) => {
            tracing::error!(route = %matched.as_str(), "could not record an operator's change");
            Response::from_parts(parts, Body::from(bytes))
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ByOperator {
    /// An operator's name: only what they changed.
    operator: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// What operators changed, oldest first, a page at a time.
pub(super) async fn list(State(s): State<Management>, uri: Uri, Query(q): Query<ByOperator>) -> Answer {
    let principal = q.operator.map(|name| format!("operator:{name}"));
    let filters = format!("operator={}", principal.as_deref().unwrap_or(""));
    let list = List::at(&uri, filters, q.cursor, q.limit);
    page_until_now(
        &s,
        list,
        move |tx, page| tx.page_operator_actions(principal.as_deref(), page),
        |a: &OperatorAction| (a.at.0, a.id.clone()),
    )
    .await
}
