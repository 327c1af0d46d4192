//! Answers: JSON bodies and the flat error envelope; strict request bodies; bearer extraction.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use conduit_core::{ErrorCode, Refusal};
use conduit_scheduler::HostError;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A handler's failure, answered as the flat envelope `{"error", "message", "remedy"?}`.
#[derive(Debug)]
pub struct Failure(pub Refusal);

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        Failure(r)
    }
}

impl From<HostError> for Failure {
    fn from(e: HostError) -> Self {
        if let HostError::Store(inner) = &e {
            tracing::error!(error = %inner, "storage failure");
        }
        Failure(e.refusal())
    }
}

impl From<conduit_store::StoreError> for Failure {
    fn from(e: conduit_store::StoreError) -> Self {
        HostError::Store(e).into()
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self.0)).into_response()
    }
}

pub type Answer = Result<Response, Failure>;

pub fn ok<T: Serialize>(status: StatusCode, body: &T) -> Answer {
    Ok((status, Json(body)).into_response())
}

/// An answer whose JSON is already written (the catalog's, cached per descriptor).
pub fn ok_json(json: String) -> Answer {
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}

/// The largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;

/// Parses a JSON body strictly into `T` (which denies unknown fields): no duplicate key and no null at
/// any depth, at most 1 MiB. The message names where the body went wrong, never what it contained.
pub fn parse_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, Failure> {
    if body.len() > MAX_BODY {
        return Err(Failure(
            Refusal::new(ErrorCode::InvalidRequest, "the request body is larger than 1 MiB")
                .with_remedy("send a smaller body"),
        ));
    }
    let (value, found) = conduit_config::read_strict_json(body).map_err(|_| invalid_body("/", "is not JSON"))?;
    if let Some(d) = found.first() {
        let what = if d.code == "duplicate_key" {
            "repeats a key"
        } else {
            "holds a null"
        };
        return Err(invalid_body(&d.pointer, what));
    }
    serde_path_to_error::deserialize(value)
        .map_err(|e| invalid_body(&format!("/{}", e.path()), "does not fit this route"))
}

fn invalid_body(pointer: &str, what: &str) -> Failure {
    Failure(
        Refusal::new(
            ErrorCode::InvalidRequest,
            format!("the request body {what} (at {pointer})"),
        )
        .with_remedy("send a JSON object with the documented fields, none null or repeated"),
    )
}

/// Reads a request body of at most 1 MiB (only after the route's authentication and role check).
pub async fn read_body(body: axum::body::Body) -> Result<Bytes, Failure> {
    axum::body::to_bytes(body, MAX_BODY + 1).await.map_err(|_| {
        Failure(
            Refusal::new(ErrorCode::InvalidRequest, "the request body is larger than 1 MiB")
                .with_remedy("send a smaller body"),
        )
    })
}

/// A mutation's envelope rules: a JSON content type and no query string.
pub fn check_mutation(headers: &HeaderMap, uri: &axum::http::Uri) -> Result<(), Failure> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return Err(Failure(
            Refusal::new(ErrorCode::InvalidRequest, "a mutation's body must be application/json")
                .with_remedy("send `Content-Type: application/json`"),
        ));
    }
    if uri.query().is_some() {
        return Err(Failure(Refusal::new(
            ErrorCode::InvalidRequest,
            "a mutation takes no query string",
        )));
    }
    Ok(())
}

/// The bearer token of a request, or `401 unauthenticated` when there is none. More than one
/// `Authorization` header is `400 invalid_request`: which one a proxy or a client library honours
/// differs, so none is.
pub fn bearer(headers: &HeaderMap) -> Result<String, Failure> {
    if headers.get_all(header::AUTHORIZATION).iter().nth(1).is_some() {
        return Err(Failure(Refusal::new(
            ErrorCode::InvalidRequest,
            "send one Authorization header, not several",
        )));
    }
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Failure(
                Refusal::new(ErrorCode::Unauthenticated, "this endpoint requires a bearer token")
                    .with_remedy("send `Authorization: Bearer <token>`"),
            )
        })
}

/// Runs a blocking store rule off the async runtime.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|_| Err(Failure(Refusal::internal())))
}

/// The answer for every path a surface does not serve.
pub async fn not_found() -> Failure {
    Failure(Refusal::not_found("route"))
}
