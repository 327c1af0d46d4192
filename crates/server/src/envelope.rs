//! Answers: JSON bodies and the flat error envelope; strict request bodies; bearer extraction.

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use conduit_core::{ErrorCode, Refusal};
use conduit_scheduler::HostError;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::listen::BodyTimedOut;

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
        // A refusal that says when to try again says it as HTTP does too.
        let retry_after = self.0.fields.get("retry_after").and_then(serde_json::Value::as_u64);
        let mut response = (status, Json(self.0)).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, seconds.into());
        }
        response
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
        return Err(too_large());
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
    // The path of a misfit is tracked only once there is one.
    T::deserialize(value).or_else(|_| {
        let (value, _) = conduit_config::read_strict_json(body).map_err(|_| invalid_body("/", "is not JSON"))?;
        match serde_path_to_error::deserialize::<_, T>(value) {
            Err(e) => {
                let at = conduit_config::path_pointer(e.path());
                Err(invalid_body(
                    if at.is_empty() { "/" } else { &at },
                    "does not fit this route",
                ))
            }
            Ok(_) => Err(invalid_body("/", "does not fit this route")),
        }
    })
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
    axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|e| match timed_out(&e) {
            true => Failure(
                Refusal::new(ErrorCode::RequestTimeout, "the request body did not arrive in time")
                    .with_remedy("send the whole body at once"),
            ),
            false => too_large(),
        })
}

/// Whether a body failed because its deadline passed (`listen`'s timed body), not its size.
fn timed_out(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = source {
        if error.is::<BodyTimedOut>() {
            return true;
        }
        source = error.source();
    }
    false
}

fn too_large() -> Failure {
    Failure(
        Refusal::new(ErrorCode::BodyTooLarge, "the request body is larger than 1 MiB")
            .with_remedy("send a smaller body"),
    )
}

/// Every answer either socket gives is JSON. A handler that panics is `500 internal` (it runs on a
/// task of its own, so the connection and the daemon keep serving), and what the framework answers
/// by itself (a method the route does not take, a body over the limit, a path or query that does not
/// parse) is put in the envelope with a stable code.
pub async fn enveloped(request: Request, next: Next) -> Response {
    if let Err(refusal) = head_within_bounds(&request) {
        return Failure(refusal).into_response();
    }
    let response = match tokio::spawn(next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("a request handler panicked; answered 500 internal");
            return Failure(Refusal::internal()).into_response();
        }
    };
    let failed = response.status().is_client_error() || response.status().is_server_error();
    if failed && !is_json(&response) {
        return framework_failure(response);
    }
    response
}

/// The longest request target either socket reads, in bytes.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// The most headers, and header bytes, a request may carry. hyper itself refuses (with a bare
/// status, outside the envelope) only past these: at 128 headers (`HYPER_MAX_HEADERS` in
/// `listen.rs`) or ~400 KB of head.
pub const MAX_HEADERS: usize = 100;
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// A request target or header section past the bounds is answered in the envelope before anything
/// else looks at the request.
fn head_within_bounds(request: &Request) -> Result<(), Refusal> {
    let uri = request.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri > MAX_URI_BYTES {
        return Err(Refusal::new(
            ErrorCode::UriTooLong,
            format!("a request target is at most {MAX_URI_BYTES} bytes"),
        ));
    }
    let headers = request.headers();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Err(Refusal::new(
            ErrorCode::HeadersTooLarge,
            format!("a request has at most {MAX_HEADERS} headers of {MAX_HEADER_BYTES} bytes in all"),
        ));
    }
    Ok(())
}

/// A path or query string the route cannot read.
pub fn unfit_request() -> Refusal {
    Refusal::new(
        ErrorCode::InvalidRequest,
        "the request's path or query string does not fit this route",
    )
    .with_remedy("see /v1/openapi.json for this route's parameters")
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// The envelope for an answer the framework made, keeping its `Allow` header.
fn framework_failure(response: Response) -> Response {
    let refusal = match response.status() {
        StatusCode::METHOD_NOT_ALLOWED => {
            Refusal::new(ErrorCode::MethodNotAllowed, "this route does not take this method")
                .with_remedy("see /v1/openapi.json for the methods each route takes")
        }
        StatusCode::PAYLOAD_TOO_LARGE => too_large().0,
        StatusCode::NOT_FOUND => Refusal::not_found("route"),
        status if status.is_server_error() => Refusal::internal(),
        _ => unfit_request(),
    };
    with_allow(Failure(refusal).into_response(), &response)
}

fn with_allow(mut answer: Response, from: &Response) -> Response {
    if let Some(allow) = from.headers().get(header::ALLOW) {
        answer.headers_mut().insert(header::ALLOW, allow.clone());
    }
    answer
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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use axum::{middleware, Router};
    use tower::ServiceExt;

    use super::*;

    async fn answer(router: Router, method: &str, path: &str) -> (StatusCode, serde_json::Value, Option<String>) {
        let request = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
        let response = router
            .layer(middleware::from_fn(enveloped))
            .oneshot(request)
            .await
            .unwrap();
        let status = response.status();
        let allow = response
            .headers()
            .get(header::ALLOW)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap_or_default(), allow)
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Shape {
        name: String,
        items: Vec<u32>,
    }

    fn refused(body: &str) -> String {
        let Err(Failure(refusal)) = parse_body::<Shape>(&Bytes::from(body.to_owned())) else {
            panic!("{body} was accepted");
        };
        refusal.message
    }

    #[test]
    fn a_body_that_does_not_fit_is_refused_at_the_pointer_of_its_misfit() {
        assert!(parse_body::<Shape>(&Bytes::from_static(br#"{"name":"a","items":[1]}"#)).is_ok());
        let cases = [
            (
                r#"{"name":"a","items":[1,"x"]}"#,
                "does not fit this route (at /items/1)",
            ),
            (
                r#"{"name":"a","items":[],"more":1}"#,
                "does not fit this route (at /more)",
            ),
            (r#""x""#, "does not fit this route (at /)"),
            (r#"{"name":"a","name":"b","items":[]}"#, "repeats a key (at /name)"),
            (r#"{"name":"a","items":[null]}"#, "holds a null (at /items/0)"),
            (r#"{"name":"#, "is not JSON (at /)"),
        ];
        for (body, expected) in cases {
            let message = refused(body);
            assert!(message.contains(expected), "{body}: {message}");
        }
    }

    async fn boom() -> &'static str {
        panic!("a bug")
    }

    #[tokio::test]
    async fn a_panicking_handler_is_500_internal_and_the_router_keeps_serving() {
        let router = Router::new()
            .route("/boom", get(boom))
            .route("/fine", get(|| async { "ok" }));
        let (status, body, _) = answer(router.clone(), "GET", "/boom").await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, Some("internal"))
        );
        assert_eq!(answer(router, "GET", "/fine").await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn what_the_framework_answers_itself_is_put_in_the_envelope() {
        let router = Router::new().route(
            "/items/{id}",
            get(|axum::extract::Path(id): axum::extract::Path<u32>| async move { id.to_string() }),
        );
        let (status, body, allow) = answer(router.clone(), "POST", "/items/1").await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::METHOD_NOT_ALLOWED, Some("method_not_allowed"))
        );
        assert!(allow.is_some_and(|a| a.contains("GET")), "the Allow header stays");
        let (status, body, _) = answer(router.clone(), "GET", "/items/%ff").await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_request"))
        );
        assert!(
            !body.to_string().contains("ff"),
            "the message does not echo the request: {body}"
        );
        // The negative control: a handler's own answer passes untouched.
        let (status, _, _) = answer(router, "GET", "/items/7").await;
        assert_eq!(status, StatusCode::OK);
    }
}
