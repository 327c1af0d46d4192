//! How a management handler reaches the store: the operator's credential and role, a read in one
//! transaction (with an ETag for single records), and a keyed operator control.

use axum::body::Body;
use axum::http::Uri;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use conduit_core::canonical::canonical_hash;
use conduit_core::{ErrorCode, OperatorRecord, Refusal, Role};
use conduit_scheduler::Operator;
use conduit_store::Tx;
use conduit_toolbelt::token::digest;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::state::Management;
use crate::envelope::{bearer, blocking, check_mutation, ok, parse_body, read_body, Answer, Failure};
use crate::idempotency::{once, Keyed};

/// Authenticates an operator credential and checks its role against what the route requires, before
/// the body is read. An execution token is `wrong_credential_class`; anything else unknown or revoked
/// is `unauthenticated`; a role below `required` is `forbidden_role`.
pub(crate) async fn operator(
    state: &Management,
    headers: &HeaderMap,
    required: Role,
) -> Result<OperatorRecord, Failure> {
    let op = credential(state, headers).await?;
    if !op.role.allows(required) {
        return Err(Failure(
            Refusal::new(
                ErrorCode::ForbiddenRole,
                format!("this needs the {} role", required.as_str()),
            )
            .with_remedy("ask an admin for a credential with that role"),
        ));
    }
    Ok(op)
}

pub(super) async fn credential(state: &Management, headers: &HeaderMap) -> Result<OperatorRecord, Failure> {
    let presented = digest(&bearer(headers)?);
    let store = state.store.clone();
    blocking(move || {
        store.read(|tx| {
            if let Some(op) = tx.operator_by_digest(&presented)?.filter(|o| o.revoked_at.is_none()) {
                return Ok(op);
            }
            if tx.token_by_digest(&presented)?.is_some() {
                return Err(Failure(Refusal::wrong_credential_class()));
            }
            Err(Failure(
                Refusal::new(
                    ErrorCode::Unauthenticated,
                    "the operator credential is unknown or revoked",
                )
                .with_remedy("use the token in <state>/private/operator.token"),
            ))
        })
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cancel {}

/// A keyed operator control with an empty body, run once per key in one transaction.
pub(super) async fn control(
    s: Management,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
    run: impl FnOnce(&mut dyn Tx, &conduit_config::Snapshot, &Operator<'_>) -> Result<Value, Failure> + Send + 'static,
) -> Answer {
    control_with(s, headers, uri, body, move |tx, config, by, _: Cancel| {
        run(tx, config, by)
    })
    .await
}

/// An operator control with a body of its own: the `operate` role, a strict body, an
/// Idempotency-Key, one transaction, and the principal as the actor of what it records.
pub(crate) async fn control_with<B: DeserializeOwned + Send + 'static>(
    s: Management,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
    run: impl FnOnce(&mut dyn Tx, &conduit_config::Snapshot, &Operator<'_>, B) -> Result<Value, Failure> + Send + 'static,
) -> Answer {
    let op = operator(&s, &headers, Role::Operate).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let request: B = parse_body(&body)?;
    let keyed = Keyed::new(&op, &headers, "POST", uri.path(), &body)?;
    let config = s.config.get();
    let answer = once(s.store.clone(), keyed, move |tx, seed| {
        let by = Operator {
            actor: &op.principal(),
            seed,
        };
        Ok((StatusCode::OK, run(tx, &config, &by, request)?))
    })
    .await?;
    s.kick.notify_one();
    Ok(answer)
}

/// Authenticates an operator, then answers `200` with what `f` reads in one read transaction.
pub(crate) async fn read<T: Serialize + Send + 'static>(
    s: &Management,
    headers: &HeaderMap,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Answer {
    operator(s, headers, Role::View).await?;
    let store = s.store.clone();
    let body = blocking(move || store.read(f)).await?;
    ok(StatusCode::OK, &body)
}

/// A single read: `200` with a revision ETag (a digest of the answer), or `304` when the request's
/// `If-None-Match` already names it.
pub(super) async fn read_one<T: Serialize + Send + 'static>(
    s: &Management,
    headers: &HeaderMap,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Answer {
    operator(s, headers, Role::View).await?;
    let store = s.store.clone();
    let body = serde_json::to_value(blocking(move || store.read(f)).await?).unwrap_or_default();
    let etag = format!("\"{}\"", &canonical_hash(&body)[..32]);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag || tag.trim() == "*"));
    let status = if cached {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let mut response = if cached {
        status.into_response()
    } else {
        (status, axum::Json(body)).into_response()
    };
    if let Ok(value) = header::HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}

pub(super) fn found<T>(record: Option<T>, what: &str) -> Result<T, Failure> {
    record.ok_or_else(|| Failure(Refusal::not_found(what)))
}
