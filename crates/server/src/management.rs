//! The management API on the owner-only socket: operators only.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::Uri;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use conduit_config::CurrentConfig;
use conduit_core::canonical::canonical_hash;
use conduit_core::names::{is_event_type, is_reserved_type};
use conduit_core::{
    Causation, ErrorCode, Event, Execution, NewEvent, OperatorRecord, Refusal, Role, Source, Work, WorkState,
};
use conduit_scheduler::{
    accept, cancel_execution, cancel_work, confirm_stopped, create_work, retry_work, wake_work, NewWork, Operator,
};
use conduit_store::{derived_id, Page, Store, Tx, WorkFilter};
use conduit_toolbelt::token::digest;
use conduit_toolbelt::LiveRegistry;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::approvals;
use crate::artifacts::{self, ArtifactFiles};
use crate::auth;
use crate::catalog;
use crate::clock::now;
use crate::config::{self, SharedConfigControl};
use crate::cursor::{Cursors, Paging, Position, CURSOR_LIFETIME};
use crate::envelope::{bearer, blocking, check_mutation, not_found, ok, parse_body, read_body, Answer, Failure};
use crate::idempotency::{once, Keyed};
use crate::packages::{self, SharedPackageControl};
use crate::trace;

/// What the management handlers share.
#[derive(Clone)]
pub struct Management {
    pub store: Arc<dyn Store>,
    pub config: CurrentConfig,
    /// This daemon's instance id (the owner of the leases it holds).
    pub instance: String,
    /// Wakes the scheduler loop when new Work may be ready.
    pub kick: Arc<Notify>,
    /// The configuration service.
    pub control: SharedConfigControl,
    /// Seals and opens list cursors.
    pub cursors: Cursors,
    /// Where execution logs and kept declared files are.
    pub files: ArtifactFiles,
    /// The operations served now (the release's and installed packages'), for the tool catalog.
    pub registry: Arc<LiveRegistry>,
    /// Installed packages.
    pub packages: SharedPackageControl,
}

/// A route: its path, the methods it answers, and its handlers.
pub(crate) type Route = (&'static str, &'static [&'static str], MethodRouter<Management>);

/// Every route the management socket serves. The OpenAPI document lists exactly these; a test
/// holds the two together.
fn routes() -> Vec<Route> {
    vec![
        ("/.well-known/openwop", &["get"], get(openwop)),
        ("/v1/health", &["get"], get(health)),
        ("/v1/openapi.json", &["get"], get(openapi)),
        ("/v1/work", &["get", "post"], post(create).get(list_work)),
        ("/v1/work/{id}", &["get"], get(get_work)),
        ("/v1/work/{id}/cancel", &["post"], post(cancel)),
        ("/v1/work/{id}/wake", &["post"], post(wake)),
        ("/v1/work/{id}/retry", &["post"], post(retry)),
        ("/v1/events", &["get", "post"], post(emit).get(list_events)),
        ("/v1/events/{id}", &["get"], get(get_event)),
        ("/v1/events/{id}/chain", &["get"], get(chain)),
        ("/v1/executions", &["get"], get(list_executions)),
        ("/v1/executions/{id}", &["get"], get(get_execution)),
        ("/v1/executions/{id}/cancel", &["post"], post(cancel_attempt)),
        (
            "/v1/executions/{id}/confirm-stopped",
            &["post"],
            post(confirm_attempt_stopped),
        ),
        ("/v1/executions/{id}/tokens", &["get"], get(auth::execution_tokens)),
        ("/v1/audit", &["get"], get(list_audit)),
        ("/v1/scopes", &["get"], get(list_scopes)),
        ("/v1/tools", &["get"], get(catalog::list)),
        ("/v1/tools/{id}", &["get"], get(catalog::get)),
        ("/v1/scopes/{id}/route/trace", &["post"], post(trace::trace)),
        ("/v1/scopes/{id}/route/samples", &["get"], get(trace::samples)),
        ("/v1/waits", &["get"], get(list_waits)),
        ("/v1/approvals", &["get"], get(approvals::list)),
        ("/v1/approvals/{id}", &["get"], get(approvals::show)),
        ("/v1/approvals/{id}/approve", &["post"], post(approvals::approve)),
        ("/v1/approvals/{id}/deny", &["post"], post(approvals::deny)),
        (
            "/v1/packages",
            &["get", "post"],
            get(packages::list).post(packages::install),
        ),
        (
            "/v1/packages/{name}",
            &["get", "delete"],
            get(packages::show).delete(packages::remove),
        ),
        ("/v1/artifacts", &["get"], get(artifacts::list)),
        ("/v1/artifacts/{id}/content", &["get"], get(artifacts::content)),
        (
            "/v1/auth/operators",
            &["get", "post"],
            get(auth::list).post(auth::issue),
        ),
        ("/v1/auth/rotate", &["post"], post(auth::rotate)),
        ("/v1/auth/revoke", &["post"], post(auth::revoke)),
        ("/v1/config", &["get"], get(config::show)),
        ("/v1/config/validate", &["post"], post(config::validate)),
        ("/v1/config/apply", &["post"], post(config::apply)),
        ("/v1/config/set", &["post"], post(config::set)),
    ]
}

/// The capability document: the one route that needs no credential.
async fn openwop(State(s): State<Management>) -> Answer {
    crate::discovery::answer(&s.registry.get())
}

pub fn management_router(state: Management) -> Router {
    router(state, routes())
}

/// The loopback listener's router: the management API, plus OpenWOP's host-sample test seams when
/// `seams` is set (they are never served on the management socket).
pub fn loopback_router(state: Management, seams: bool) -> Router {
    let extra = if seams { crate::seams::routes() } else { Vec::new() };
    router(state, routes().into_iter().chain(extra).collect())
}

fn router(state: Management, routes: Vec<Route>) -> Router {
    routes
        .into_iter()
        .fold(Router::new(), |router, (path, _, handlers)| {
            router.route(path, handlers)
        })
        .fallback(not_found)
        .with_state(state)
}

/// Every (path, method) the management socket serves.
pub fn management_routes() -> Vec<(&'static str, &'static str)> {
    routes()
        .into_iter()
        .flat_map(|(path, methods, _)| methods.iter().map(move |m| (path, *m)))
        .collect()
}

/// The OpenAPI 3.1 document of this API.
pub const OPENAPI: &str = include_str!("../openapi.json");

async fn openapi(State(s): State<Management>, headers: HeaderMap) -> Answer {
    operator(&s, &headers, Role::View).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response())
}

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

async fn credential(state: &Management, headers: &HeaderMap) -> Result<OperatorRecord, Failure> {
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

async fn health(State(s): State<Management>, headers: HeaderMap) -> Answer {
    operator(&s, &headers, Role::View).await?;
    let generation = s.config.get().generation();
    ok(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "instance": s.instance,
            "generation": generation,
        }),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateWork {
    scope: String,
    binding: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    keys: Vec<String>,
}

/// Manual Work: ready Work and its root `core.work.created`, in one transaction; its ids derive from
/// the Idempotency-Key, so a retried request creates the same Work.
async fn create(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let op = operator(&s, &headers, Role::Operate).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let req: CreateWork = parse_body(&body)?;
    let keyed = Keyed::new(&op, &headers, "POST", uri.path(), &body)?;
    let config = s.config.get();
    let answer = once(s.store.clone(), keyed, move |tx, seed| {
        let new = NewWork {
            keys: req.keys,
            id_seed: Some(format!("operator/{seed}")),
            ..NewWork::manual(&req.scope, &req.binding, req.input, Some(op.principal()))
        };
        let (work, _) = create_work(tx, &config, new, None, now())?;
        Ok((StatusCode::CREATED, serde_json::to_value(work).unwrap_or_default()))
    })
    .await?;
    s.kick.notify_one();
    Ok(answer)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cancel {}

/// Cancels unfinished Work: a `core.work.cancelled` event and full fencing in one transaction.
async fn cancel(
    State(s): State<Management>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    body: Body,
) -> Answer {
    control(s, headers, uri, body, move |tx, config, by| {
        let event = cancel_work(tx, config, &id, by, now())?;
        Ok(json!({"work": tx.get_work(&id)?, "event": event}))
    })
    .await
}

/// Cancels one attempt and holds its Work until a manual retry.
async fn cancel_attempt(
    State(s): State<Management>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    body: Body,
) -> Answer {
    control(s, headers, uri, body, move |tx, config, by| {
        let (execution, event) = cancel_execution(tx, config, &id, by, now())?;
        Ok(json!({"execution": execution, "event": event}))
    })
    .await
}

/// An operator's confirmation that a cancelled attempt's process is gone.
async fn confirm_attempt_stopped(
    State(s): State<Management>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    body: Body,
) -> Answer {
    control(s, headers, uri, body, move |tx, config, by| {
        let (execution, event) = confirm_stopped(tx, config, &id, by, now())?;
        Ok(json!({"execution": execution, "event": event}))
    })
    .await
}

/// Retries held or failed Work.
async fn retry(
    State(s): State<Management>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    body: Body,
) -> Answer {
    control(s, headers, uri, body, move |tx, config, by| {
        let (work, event) = retry_work(tx, config, &id, by, now())?;
        Ok(json!({"work": work, "event": event}))
    })
    .await
}

/// A keyed operator control with an empty body, run once per key in one transaction.
async fn control(
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wake {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(default)]
    data: Value,
}

/// Emits an event on the Work's own key and reports whether it woke the Work.
async fn wake(State(s): State<Management>, headers: HeaderMap, uri: Uri, Path(id): Path<String>, body: Body) -> Answer {
    let op = operator(&s, &headers, Role::Operate).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let req: Wake = parse_body(&body)?;
    check_operator_type(&req.event_type)?;
    let keyed = Keyed::new(&op, &headers, "POST", uri.path(), &body)?;
    let config = s.config.get();
    let answer = once(s.store.clone(), keyed, move |tx, seed| {
        let by = Operator {
            actor: &op.principal(),
            seed,
        };
        let (event, woke) = wake_work(tx, &config, &id, &req.event_type, req.data, &by, now())?;
        Ok((StatusCode::OK, json!({"event": event, "woke": woke})))
    })
    .await?;
    s.kick.notify_one();
    Ok(answer)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkQuery {
    scope: Option<String>,
    state: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// Work, newest first, a page at a time.
async fn list_work(State(s): State<Management>, headers: HeaderMap, uri: Uri, Query(q): Query<WorkQuery>) -> Answer {
    let state = match q.state.as_deref() {
        Some(text) => Some(WorkState::parse(text).ok_or_else(|| {
            Refusal::new(ErrorCode::InvalidRequest, "unknown Work state")
                .with_remedy("use ready, running, waiting, succeeded, failed or cancelled")
        })?),
        None => None,
    };
    let filters = format!(
        "scope={}&state={}",
        q.scope.as_deref().unwrap_or(""),
        q.state.as_deref().unwrap_or("")
    );
    let filter = WorkFilter { scope: q.scope, state };
    let paging = Paging {
        cursor: q.cursor,
        limit: q.limit,
    };
    let list = List {
        endpoint: uri.path().to_owned(),
        filters,
        paging,
    };
    page(
        &s,
        &headers,
        list,
        |_| Ok(now().0),
        move |tx, page| tx.page_work(&filter, page),
        |w: &Work| (w.created_at.0, w.id.clone()),
    )
    .await
}

async fn get_work(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| found(tx.get_work(&id)?, "Work")).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Emit {
    #[serde(rename = "type")]
    event_type: String,
    scope: String,
    #[serde(default)]
    data: Value,
    correlation_key: Option<String>,
}

/// An operator's event: a `core.manual` root stamped with the operator as its actor, routed at once.
async fn emit(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let op = operator(&s, &headers, Role::Operate).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let req: Emit = parse_body(&body)?;
    check_operator_event(&req)?;
    let keyed = Keyed::new(&op, &headers, "POST", uri.path(), &body)?;
    let config = s.config.get();
    let answer = once(s.store.clone(), keyed, move |tx, seed| {
        if !config.scope_enabled(&req.scope) {
            return Err(Refusal::new(ErrorCode::UnknownScope, "no enabled scope has this id").into());
        }
        let id = derived_id(&[seed, "operator.event"]);
        let event = NewEvent {
            causation: Causation::root(&id),
            id,
            event_type: req.event_type,
            source: Source::Manual,
            scope: req.scope,
            work_id: None,
            execution_id: None,
            correlation_key: req.correlation_key,
            actor: Some(op.principal()),
            data: req.data,
            accepted_at: now(),
            delivery_id: None,
        };
        let event = accept(tx, &config, event, now())?;
        Ok((StatusCode::CREATED, serde_json::to_value(event).unwrap_or_default()))
    })
    .await?;
    s.kick.notify_one();
    Ok(answer)
}

fn check_operator_event(req: &Emit) -> Result<(), Refusal> {
    check_operator_type(&req.event_type)
}

/// An operator emits namespaced types outside the host's families.
fn check_operator_type(event_type: &str) -> Result<(), Refusal> {
    if !is_event_type(event_type) {
        return Err(Refusal::new(
            ErrorCode::InvalidRequest,
            "an event type is namespaced: `family.name`",
        ));
    }
    if is_reserved_type(event_type) {
        return Err(Refusal::new(
            ErrorCode::EventTypeNotAllowed,
            "core, agent, tool and toolbelt events belong to the host",
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ByWork {
    work: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// Events in acceptance order, a page at a time.
async fn list_events(State(s): State<Management>, headers: HeaderMap, uri: Uri, Query(q): Query<ByWork>) -> Answer {
    let filters = format!("work={}", q.work.as_deref().unwrap_or(""));
    let list = List {
        endpoint: uri.path().to_owned(),
        filters,
        paging: Paging {
            cursor: q.cursor,
            limit: q.limit,
        },
    };
    let work = q.work;
    page(
        &s,
        &headers,
        list,
        |tx| Ok(tx.max_sequence()?),
        move |tx, page| tx.page_events(work.as_deref(), page),
        |e: &Event| e.sequence,
    )
    .await
}

async fn get_event(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| found(tx.get_event(&id)?, "event")).await
}

/// The causal chain of an event: its root first, each parent in turn, ending with the event.
async fn chain(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read(&s, &headers, move |tx| {
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

/// Executions, oldest first, a page at a time.
async fn list_executions(State(s): State<Management>, headers: HeaderMap, uri: Uri, Query(q): Query<ByWork>) -> Answer {
    let filters = format!("work={}", q.work.as_deref().unwrap_or(""));
    let list = List {
        endpoint: uri.path().to_owned(),
        filters,
        paging: Paging {
            cursor: q.cursor,
            limit: q.limit,
        },
    };
    let work = q.work;
    page(
        &s,
        &headers,
        list,
        |_| Ok(now().0),
        move |tx, page| tx.page_executions(work.as_deref(), page),
        |x: &Execution| (x.started_at.0, x.id.clone()),
    )
    .await
}

/// A list request: its endpoint, its filters (canonically written) and its paging.
struct List {
    endpoint: String,
    filters: String,
    paging: Paging,
}

/// One page of a list: rows past the cursor's position within the upper bound the first page
/// captured, and the cursor of the next page (`null` after the last).
async fn page<K, T>(
    s: &Management,
    headers: &HeaderMap,
    list: List,
    upper: impl FnOnce(&mut dyn Tx) -> Result<i64, Failure> + Send + 'static,
    fetch: impl FnOnce(&mut dyn Tx, &Page<K>) -> Result<Vec<T>, conduit_store::StoreError> + Send + 'static,
    key_of: impl Fn(&T) -> K + Send + 'static,
) -> Answer
where
    K: Serialize + serde::de::DeserializeOwned + Send + 'static,
    T: Serialize + Send + 'static,
{
    let limit = list.paging.limit()?;
    let opened = match &list.paging.cursor {
        Some(cursor) => Some(s.cursors.open(cursor, &list.endpoint, &list.filters, now())?),
        None => None,
    };
    let cursors = s.cursors.clone();
    read(s, headers, move |tx| {
        let (upper, after) = match opened {
            Some(p) => (
                p.upper,
                Some(serde_json::from_value(p.after).map_err(|_| invalid_cursor())?),
            ),
            None => (upper(tx)?, None),
        };
        let items = fetch(tx, &Page { after, upper, limit })?;
        let next = (items.len() == limit)
            .then(|| items.last().map(&key_of))
            .flatten()
            .map(|key| {
                cursors.seal(&Position {
                    endpoint: list.endpoint,
                    filters: list.filters,
                    upper,
                    after: serde_json::to_value(key).unwrap_or_default(),
                    expires: now().plus(CURSOR_LIFETIME).0,
                })
            });
        Ok(json!({ "items": items, "next_cursor": next }))
    })
    .await
}

fn invalid_cursor() -> Failure {
    Failure(Refusal::new(
        ErrorCode::InvalidCursor,
        "the cursor is not valid for this list",
    ))
}

async fn get_execution(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read_one(&s, &headers, move |tx| found(tx.get_execution(&id)?, "execution")).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ByExecution {
    execution: Option<String>,
}

const AUDIT_PAGE: usize = 1000;

async fn list_audit(State(s): State<Management>, headers: HeaderMap, Query(q): Query<ByExecution>) -> Answer {
    read(&s, &headers, move |tx| {
        Ok(json!({ "items": tx.list_audit(q.execution.as_deref(), AUDIT_PAGE)? }))
    })
    .await
}

/// Every scope ever published (tombstones included) with what the active generation says of it: its
/// bindings and its effective ceiling.
async fn list_scopes(State(s): State<Management>, headers: HeaderMap) -> Answer {
    let config = s.config.get();
    read(&s, &headers, move |tx| {
        let items: Vec<Value> = tx
            .list_scopes()?
            .into_iter()
            .map(|scope| {
                let bindings: Vec<&String> = config
                    .scope(&scope.id)
                    .map(|c| c.bindings.keys().collect())
                    .unwrap_or_default();
                json!({
                    "id": scope.id,
                    "parent": scope.parent,
                    "enabled": scope.enabled && config.scope_enabled(&scope.id),
                    "generation": scope.generation,
                    "removed_in": scope.removed_in,
                    "bindings": bindings,
                    "operations": config.ceiling(&scope.id),
                })
            })
            .collect();
        Ok::<_, Failure>(json!({ "items": items }))
    })
    .await
}

const WAIT_PAGE: usize = 500;

/// Waits in every state, oldest first.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForWork {
    work: Option<String>,
}

async fn list_waits(State(s): State<Management>, headers: HeaderMap, Query(q): Query<ForWork>) -> Answer {
    read(&s, &headers, move |tx| {
        Ok::<_, Failure>(json!({ "items": tx.list_waits(q.work.as_deref(), WAIT_PAGE)? }))
    })
    .await
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
async fn read_one<T: Serialize + Send + 'static>(
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

fn found<T>(record: Option<T>, what: &str) -> Result<T, Failure> {
    record.ok_or_else(|| Failure(Refusal::not_found(what)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_openapi_document_lists_exactly_the_routes_served() {
        let doc: Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        let documented: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .expect("paths")
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .into_iter()
                    .flatten()
                    .map(move |(method, _)| (path.clone(), method.clone()))
            })
            .filter(|(_, method)| method != "parameters")
            .collect();
        let served: BTreeSet<(String, String)> = management_routes()
            .into_iter()
            .map(|(p, m)| (p.to_owned(), m.to_owned()))
            .collect();
        assert_eq!(documented, served);
    }
}
