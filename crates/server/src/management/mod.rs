//! The management API on the owner-only socket: operators only. This module is the router: every
//! route, the OpenAPI document that lists them, and the routes that need no module of their own.
//! Route modules import `access` and `state`, never this file, so imports run one way.

mod access;
mod actions;
mod approvals;
mod artifacts;
mod auth;
mod catalog;
mod config;
mod events;
mod executions;
mod ids;
mod kept_events;
mod operator_actions;
mod packages;
mod paging;
mod scopes;
mod seams;
mod state;
mod trace;
mod work;

pub use kept_events::KeptEvents;
pub use state::Management;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Router};
use conduit_core::Role;
use serde_json::json;

use access::{authenticated, control, operator, Checking, DISCOVERY};
use state::Route;

use crate::envelope::{enveloped, not_found, ok, Answer, MAX_BODY};

/// Every route the management socket serves. The OpenAPI document lists exactly these; a test
/// holds the two together.
fn routes() -> Vec<Route> {
    vec![
        (DISCOVERY, &["get"], get(openwop)),
        ("/v1/health", &["get"], get(health)),
        ("/v1/openapi.json", &["get"], get(openapi)),
        ("/v1/work", &["get", "post"], post(work::create).get(work::list_work)),
        ("/v1/work/{id}", &["get"], get(work::get_work)),
        ("/v1/work/{id}/cancel", &["post"], control(work::cancel)),
        ("/v1/work/{id}/wake", &["post"], post(work::wake)),
        ("/v1/work/{id}/retry", &["post"], control(work::retry)),
        ("/v1/work/{id}/hold", &["post"], control(work::hold)),
        ("/v1/work/{id}/release", &["post"], control(work::release)),
        ("/v1/work/{id}/rebind", &["post"], control(work::rebind)),
        ("/v1/work/{id}/attach", &["post"], control(work::attach)),
        (
            "/v1/events",
            &["get", "post"],
            post(events::emit).get(events::list_events),
        ),
        ("/v1/events/{id}", &["get"], get(events::get_event)),
        ("/v1/actions", &["post"], post(actions::invoke)),
        ("/v1/events/{id}/chain", &["get"], get(events::chain)),
        ("/v1/executions", &["get"], get(executions::list_executions)),
        ("/v1/executions/{id}", &["get"], get(executions::get_execution)),
        (
            "/v1/executions/{id}/cancel",
            &["post"],
            control(executions::cancel_attempt),
        ),
        (
            "/v1/executions/{id}/confirm-stopped",
            &["post"],
            control(executions::confirm_attempt_stopped),
        ),
        ("/v1/executions/{id}/tokens", &["get"], get(auth::execution_tokens)),
        ("/v1/audit", &["get"], get(executions::list_audit)),
        ("/v1/audit/operators", &["get"], get(operator_actions::list)),
        ("/v1/scopes", &["get"], get(scopes::list_scopes)),
        ("/v1/scopes/{id}/reconcile", &["post"], control(scopes::reconcile)),
        ("/v1/tools", &["get"], get(catalog::list)),
        ("/v1/tools/{id}", &["get"], get(catalog::get)),
        ("/v1/scopes/{id}/route/trace", &["post"], post(trace::trace)),
        ("/v1/scopes/{id}/route/samples", &["get"], get(trace::samples)),
        ("/v1/waits", &["get"], get(work::list_waits)),
        ("/v1/ids", &["get"], get(ids::resolve_id)),
        ("/v1/approvals", &["get"], get(approvals::list)),
        ("/v1/approvals/{id}", &["get"], get(approvals::show)),
        ("/v1/approvals/{id}/approve", &["post"], control(approvals::approve)),
        ("/v1/approvals/{id}/deny", &["post"], control(approvals::deny)),
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
    crate::discovery::answer(&s.registry.get(), &s.config.get())
}

pub fn management_router(state: Management) -> Router {
    router(state, routes(), Checking::InReads)
}

/// The loopback listener's router: the management API, plus OpenWOP's host-sample test seams when
/// `seams` is set (they are never served on the management socket).
pub fn loopback_router(state: Management, seams: bool) -> Router {
    let extra = if seams { seams::routes() } else { Vec::new() };
    router(
        state,
        routes().into_iter().chain(extra).collect(),
        Checking::BeforeHandler,
    )
}

fn router(state: Management, routes: Vec<Route>, checking: Checking) -> Router {
    routes
        .into_iter()
        .fold(Router::new(), |router, (path, _, handlers)| {
            router.route(path, handlers)
        })
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            operator_actions::recorded,
        ))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.clone(), caught_up))
        .layer(middleware::from_fn_with_state(
            (state.store.clone(), checking),
            authenticated,
        ))
        .layer(middleware::from_fn(enveloped))
        .with_state(state)
}

/// On a shared store, runs the generation another daemon committed before a request reads or
/// changes anything, so an apply on any daemon is what the next request on this one sees. It runs
/// after the credential's check, except for a read on the owner-only socket, whose check may come in
/// its read ([`access::Checking`]): whoever can reach that socket can read the operator's token.
/// A generation this daemon cannot run does not stop the request: operators need the API to fix it.
async fn caught_up(State(s): State<Management>, request: Request, next: Next) -> Response {
    if s.control.shared() {
        let control = s.control.clone();
        let _ = tokio::task::spawn_blocking(move || control.catch_up()).await;
    }
    next.run(request).await
}

/// Every (path, method) the management socket serves.
pub fn management_routes() -> Vec<(&'static str, &'static str)> {
    routes()
        .into_iter()
        .flat_map(|(path, methods, _)| methods.iter().map(move |m| (path, *m)))
        .collect()
}

/// The OpenAPI 3.1 document of this API.
pub const OPENAPI: &str = include_str!("../../openapi.json");

async fn openapi() -> Answer {
    operator(Role::View).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response())
}

async fn health(State(s): State<Management>) -> Answer {
    let caller = operator(Role::View).await?;
    let generation = s.config.get().generation();
    ok(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "instance": s.instance,
            "generation": generation,
            // Who is asking, so a client offers only what the role allows (the TUI's approve key).
            "operator": {"name": caller.name, "role": caller.role.as_str()},
        }),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

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
