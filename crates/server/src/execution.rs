//! An execution's own toolbelt socket. It serves the toolbelt's routes and its tool catalog; every other path is 404 before any
//! authentication, so no operator endpoint exists here for either credential class.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{middleware, Router};
use conduit_toolbelt::{
    Answer as CallAnswer, Begun, CallRequest, CheckedCall, CloseSession, OpenSession, Presented, Toolbelt,
};
use serde::Deserialize;
use tokio::sync::Notify;

use crate::envelope::{
    bearer, blocking, enveloped, not_found, ok, ok_json, parse_body, read_body, unfit_request, Answer, Failure,
    MAX_BODY,
};
use crate::store_queue::to_store;

/// One execution's socket: the toolbelt, and the execution the socket itself asserts. Its routes
/// share it behind one `Arc`, so a request takes one reference, not one per part.
pub struct ExecutionSocket {
    pub toolbelt: Toolbelt,
    pub execution_id: Arc<str>,
    /// Wakes the scheduler loop after calls that may make Work ready.
    pub kick: Arc<Notify>,
}

pub fn execution_router(state: ExecutionSocket) -> Router {
    Router::new()
        .route("/v1/toolbelt/call", post(call))
        .route("/v1/toolbelt/sessions", post(open_session))
        .route("/v1/toolbelt/sessions/{session_id}/close", post(close_session))
        .route("/v1/toolbelt/guidance", get(guidance))
        .route("/v1/toolbelt/serving", get(serving))
        .route("/v1/tools", get(tools))
        .route("/.well-known/openwop", get(openwop))
        .route("/v1/tools/{tool_id}", get(tool))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(enveloped))
        .with_state(Arc::new(state))
}

type SocketState = State<Arc<ExecutionSocket>>;

async fn call(State(s): SocketState, headers: HeaderMap, body: Body) -> Answer {
    let token = Presented::new(&bearer(&headers)?);
    let mut request: CallRequest = parse_body(&read_body(body).await?)?;
    if request.request_id.is_none() {
        request.request_id = idempotency_key(&headers);
    }
    // Its own checks and its input's hash (and the token's, above) before the crossing: the store
    // thread runs one call at a time.
    let call = request.checked()?;
    // `enveloped` runs this handler on a task of its own: a client that hangs up mid-call does not
    // leave the call begun but never finished (its records, its replay, a gate's wait, the wake-up).
    let answer = run_call(s, token, call).await?;
    ok(StatusCode::OK, &answer)
}

/// Begins a call and, for an extension's operation, runs its handler and finishes it.
async fn run_call(s: Arc<ExecutionSocket>, token: Presented, call: CheckedCall) -> Result<CallAnswer, Failure> {
    let changes_state = !s.toolbelt.only_reads(&call.request().operation);
    let socket = s.clone();
    let begun = to_store(&s.toolbelt, move || {
        Ok(socket.toolbelt.begin(&socket.execution_id, &token, &call)?)
    })
    .await?;
    let answer = match begun {
        Begun::Answered(answer) => answer,
        Begun::Extension(pending) => {
            let ran = pending.ran().await;
            let socket = s.clone();
            to_store(&s.toolbelt, move || Ok(socket.toolbelt.finish(*pending, ran)?))
                .await?
                .into()
        }
    };
    if changes_state {
        s.kick.notify_one();
    }
    Ok(answer)
}

/// Opens a tool session (RFC 0078 §D); the `Idempotency-Key` header stands in for `request_id`.
async fn open_session(State(s): SocketState, headers: HeaderMap, body: Body) -> Answer {
    let token = Presented::new(&bearer(&headers)?);
    let mut request: OpenSession = parse_body(&read_body(body).await?)?;
    if request.request_id.is_none() {
        request.request_id = idempotency_key(&headers);
    }
    let socket = s.clone();
    let answer = to_store(&s.toolbelt, move || {
        Ok(socket.toolbelt.open_session(&socket.execution_id, &token, &request)?)
    })
    .await?;
    ok(StatusCode::CREATED, &answer)
}

async fn close_session(
    State(s): SocketState,
    headers: HeaderMap,
    Path(session_id): Path<String>,
    body: Body,
) -> Answer {
    let token = Presented::new(&bearer(&headers)?);
    let request: CloseSession = parse_body(&read_body(body).await?)?;
    let socket = s.clone();
    let answer = to_store(&s.toolbelt, move || {
        Ok(socket
            .toolbelt
            .close_session(&socket.execution_id, &token, &session_id, &request)?)
    })
    .await?;
    ok(StatusCode::OK, &answer)
}

fn idempotency_key(headers: &HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn guidance(State(s): SocketState, headers: HeaderMap) -> Answer {
    let token = bearer(&headers)?;
    let answer = blocking(move || Ok(s.toolbelt.guidance(&s.execution_id, &token)?)).await?;
    ok(StatusCode::OK, &answer)
}

/// The capability document, without authentication.
async fn openwop(State(s): SocketState) -> Answer {
    crate::discovery::answer(&s.toolbelt.registry(), &s.toolbelt.config())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsQuery {
    source: Option<String>,
}

/// The execution's catalog: a bare array of descriptors sorted by `toolId`, optionally of one
/// `?source=`.
async fn tools(State(s): SocketState, headers: HeaderMap, query: Result<Query<ToolsQuery>, QueryRejection>) -> Answer {
    let token = bearer(&headers)?;
    // The credential is judged before the query is (its presence here, its validity in the
    // toolbelt before the source filter).
    let Query(q) = query.map_err(|_| Failure(unfit_request()))?;
    ok_json(blocking(move || Ok(s.toolbelt.tools(&s.execution_id, &token, q.source.as_deref())?)).await?)
}

async fn tool(State(s): SocketState, headers: HeaderMap, Path(tool_id): Path<String>) -> Answer {
    let token = bearer(&headers)?;
    ok_json(blocking(move || Ok(s.toolbelt.tool(&s.execution_id, &token, &tool_id)?)).await?)
}

#[derive(Deserialize)]
struct Capability {
    capability: String,
}

async fn serving(State(s): SocketState, headers: HeaderMap, Query(q): Query<Capability>) -> Answer {
    let token = bearer(&headers)?;
    let answer = blocking(move || Ok(s.toolbelt.serving(&s.execution_id, &token, &q.capability)?)).await?;
    ok(StatusCode::OK, &answer)
}
