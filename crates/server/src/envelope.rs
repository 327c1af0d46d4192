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

/// Parses a JSON body strictly into `T` (which denies unknown fields). The message names where the
/// body went wrong, never what it contained.
pub fn parse_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, Failure> {
    let mut de = serde_json::Deserializer::from_slice(body);
    deserialize_located(&mut de).map_err(|at| {
        Failure(
            Refusal::new(
                ErrorCode::InvalidRequest,
                format!("the request body is not valid for this route (at {at})"),
            )
            .with_remedy("send a JSON object with the documented fields"),
        )
    })
}

/// Deserializes, reporting only the line and column of a failure.
fn deserialize_located<T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'_>>,
) -> Result<T, String> {
    let value = T::deserialize(&mut *de).map_err(|e| format!("line {}, column {}", e.line(), e.column()))?;
    de.end()
        .map_err(|e| format!("line {}, column {}", e.line(), e.column()))?;
    Ok(value)
}

/// The bearer token of a request, or `401 unauthenticated` when there is none.
pub fn bearer(headers: &HeaderMap) -> Result<String, Failure> {
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
