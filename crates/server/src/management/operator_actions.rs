//! What operators changed: every management request that changes something and succeeds is
//! recorded with the acting operator, the route and the request's path, before its answer is sent;
//! `GET /v1/audit/operators` lists the records. A keyed request's record id derives from the
//! operator, the route, the path, the key and the body, so its replay keeps the one record, and a
//! record that cannot be written fails its answer (the client's retry writes it).

use axum::body::{to_bytes, Body};
use axum::extract::{MatchedPath, Query, Request, State};
use axum::http::{header, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use conduit_core::canonical::sha256_hex;
use conduit_core::{ErrorCode, OperatorAction, Refusal, Role};
use conduit_store::{derived_id, new_id};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::access::operator;
use super::paging::{page_until_now, List};
use super::state::Management;
use crate::clock::now;
use crate::envelope::{blocking, Answer, Failure, MAX_BODY};

/// Routes that take a body by `POST` but change nothing.
const READS_BY_POST: [&str; 2] = ["/v1/config/validate", "/v1/scopes/{id}/route/trace"];

/// The fields of an answer a record keeps: names, states and ids, never a token or a body.
const KEPT_FIELDS: [&str; 11] = [
    "id",
    "type",
    "scope",
    "generation",
    "hash",
    "changed",
    "name",
    "role",
    "version",
    "revoked",
    "kind",
];

/// The answers whose id a record keeps, when an answer nests them.
const KEPT_IDS: [&str; 4] = ["work", "event", "execution", "approval"];

/// The most of an answer read to pick its kept fields (the API's answers to changes are small).
const ANSWER_READ: usize = 4 * 1024 * 1024;

/// Changes that take no Idempotency-Key: each request is its own change, and its answer (a new
/// token, answered once) is sent even when its record cannot be written.
const UNKEYED: [&str; 2] = ["/v1/auth/rotate", "/v1/auth/operators"];

/// Records what a successful change did, with who did it, before the answer is sent.
pub(super) async fn recorded(
    State(s): State<Management>,
    matched: MatchedPath,
    request: Request,
    next: Next,
) -> Response {
    let changes = !request.method().is_safe() && !READS_BY_POST.contains(&matched.as_str());
    let Some(by) = operator(Role::View).ok().filter(|_| changes) else {
        return next.run(request).await;
    };
    let route = format!("{} {}", request.method(), matched.as_str());
    let path = request.uri().path().to_owned();
    let keyed = !UNKEYED.contains(&matched.as_str());
    let key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| k.trim().to_owned())
        .filter(|_| keyed);
    // The body is read here to bind the record to it, as the key binds the request.
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, MAX_BODY).await else {
        return Failure(Refusal::new(ErrorCode::BodyTooLarge, "the body is larger than 1 MiB")).into_response();
    };
    let body_hash = sha256_hex(&body);
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    if !response.status().is_success() {
        return response;
    }
    let (parts, answer) = response.into_parts();
    let Ok(bytes) = to_bytes(answer, ANSWER_READ).await else {
        return Failure(Refusal::internal()).into_response();
    };
    let principal = by.principal();
    let id = match &key {
        // A replay of the request (same operator, route, path, key and body) is the same change.
        Some(key) => derived_id(&[&principal, &route, &path, key, &body_hash, "operator.action"]),
        None => new_id(),
    };
    let action = OperatorAction {
        id,
        at: now(),
        principal,
        route,
        path,
        status: parts.status.as_u16(),
        detail: kept(&bytes, parts.headers.get(header::CONTENT_TYPE).is_some()),
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

/// The kept fields of a JSON answer.
fn kept(bytes: &[u8], json: bool) -> Value {
    let answer: Value = if json {
        serde_json::from_slice(bytes).unwrap_or_default()
    } else {
        Value::Null
    };
    let mut detail = Map::new();
    for field in KEPT_FIELDS {
        if let Some(value) = answer.get(field).filter(|v| !v.is_object() && !v.is_array()) {
            detail.insert(field.to_owned(), value.clone());
        }
    }
    for nested in KEPT_IDS {
        if let Some(id) = answer.get(nested).and_then(|n| n.get("id")) {
            detail.insert(nested.to_owned(), id.clone());
        }
    }
    Value::Object(detail)
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
