//! OpenWOP's host-sample test seams for RFC 0076 conformance. Off unless the daemon starts with
//! `OPEN_CONDUIT_CONFORMANCE_SEAMS=1`, served only on the loopback listener (never the management
//! socket), and only to an authenticated operator with the `operate` role. They keep no state of
//! their own and reach no network but what a request names.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use conduit_core::canonical::canonical_hash;
use conduit_core::tool_call::{CallRecord, ToolCalled, ToolReturned, Transport};
use conduit_core::{ErrorCode, Refusal, Role};
use conduit_egress::fetch::SystemResolver;
use conduit_egress::{Blocked, FetchError, FetchRequest, Limits, Resolve, SafeFetch};
use conduit_scheduler::{create_work, NewWork};
use conduit_store::{AuditFilter, Page};
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::operator;
use super::state::{Management, Route};
use crate::clock::now;
use crate::envelope::{blocking, ok, Answer, Failure};

/// The seams' routes, added to the loopback listener's router when they are enabled.
pub(crate) fn routes() -> Vec<Route> {
    vec![
        ("/v1/host/sample/http/safe-fetch", &["post"], post(safe_fetch)),
        ("/v1/host/sample/http/safe-fetch-run", &["post"], post(safe_fetch_run)),
        ("/v1/host/sample/tools/session-run", &["post"], post(session_run)),
        ("/v1/host/sample/packs/install-gate", &["post"], post(install_gate)),
        ("/v1/host/sample/test/runs/{id}/events", &["get"], get(run_events)),
        ("/v1/host/sample/test/reset", &["post"], post(reset)),
    ]
}

/// Answers the name it is asked about with the simulated rebind address, if the request gave one.
struct Rebind(Option<IpAddr>);

impl Resolve for Rebind {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>> {
        match self.0 {
            Some(ip) => Box::pin(async move { Ok(vec![ip]) }),
            None => SystemResolver.resolve(name, port),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SafeFetchProbe {
    url: String,
    #[serde(default)]
    init: Value,
    simulate_rebind_to: Option<IpAddr>,
}

/// `POST /v1/host/sample/http/safe-fetch`: one fetch through the guard, judged in the guard's own
/// order (a protocol switch first, then the URL's host, then the simulated rebind), echoing the
/// audit pair it would record.
async fn safe_fetch(body: Bytes) -> Answer {
    let op = operator(Role::Operate).await?;
    let probe: SafeFetchProbe = serde_json::from_slice(&body)
        .map_err(|_| Failure(Refusal::invalid_input("the body is {url, init?, simulateRebindTo?}")))?;
    let request = FetchRequest {
        url: probe.url.clone(),
        method: probe.init.get("method").and_then(Value::as_str).map(str::to_owned),
        headers: init_headers(&probe.init),
        body: probe
            .init
            .get("body")
            .and_then(Value::as_str)
            .map(|b| b.as_bytes().to_vec()),
        authorization: None,
    };
    let limits = Limits {
        timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let fetch = SafeFetch::new(limits).with_resolver(Arc::new(Rebind(probe.simulate_rebind_to)));
    let call_id = conduit_store::new_id();
    let called = ToolCalled {
        agent_id: "sample",
        tool_name: "http.safeFetch",
        call_id: &call_id,
        args_hash: &canonical_hash(&json!({"url": probe.url, "init": probe.init})),
        principal: &op.principal(),
        transport: Transport::Http,
        session_id: None,
    }
    .data();
    let started = Instant::now();
    let fetched = fetch.fetch(request).await;
    let mut answer = match &fetched {
        Ok(response) => json!({"outcome": "fetched", "status": response.status}),
        Err(FetchError::Blocked(Blocked::Upgrade)) => json!({"outcome": "blocked", "blocked": "upgrade"}),
        Err(FetchError::Blocked(class)) => json!({"outcome": "blocked", "blocked": "ssrf", "class": class.as_str()}),
        Err(FetchError::Invalid(why)) => return Err(Failure(Refusal::invalid_input(*why))),
        Err(FetchError::Failed(why)) => json!({"outcome": "failed", "error": "fetch_failed", "message": why}),
    };
    answer["toolReturned"] = ToolReturned {
        agent_id: "sample",
        tool_name: "http.safeFetch",
        call_id: &call_id,
        status: if fetched.is_ok() { "ok" } else { "error" },
        duration_ms: started.elapsed().as_millis() as i64,
    }
    .data();
    answer["toolCalled"] = called;
    ok(StatusCode::OK, &answer)
}

/// The scope the run seams start Work in; `examples/conformance.json` configures it.
const RUN_SCOPE: &str = "conformance";
/// How long a run seam waits for its Work to finish.
const RUN_WAIT: Duration = Duration::from_secs(10);

/// `POST /v1/host/sample/http/safe-fetch-run`: one real `http.fetch` by a real Work's execution
/// (binding `conformance/safe-fetch`), its audit pair durable on the Work's log. The run id is the
/// Work's id.
async fn safe_fetch_run(State(s): State<Management>, body: Bytes) -> Answer {
    let op = operator(Role::Operate).await?;
    let probe: SafeFetchProbe =
        serde_json::from_slice(&body).map_err(|_| Failure(Refusal::invalid_input("the body is {url, init?}")))?;
    let mut input = json!({"url": probe.url});
    for field in ["method", "headers", "body"] {
        if let Some(value) = probe.init.get(field).filter(|v| !v.is_null()) {
            input[field] = value.clone();
        }
    }
    let run = start_run(&s, &op.principal(), "safe-fetch", input).await?;
    finished_run(&s, &run).await?;
    let result = fetch_result(&s, &run).await?;
    // Only the guard's refusal is `blocked`; DNS and connection failures, a bad URL, a call that
    // never ran, are `failed`.
    let outcome = match result.as_deref() {
        Some("ok") => "fetched",
        Some("ssrf_blocked") => "blocked",
        _ => "failed",
    };
    ok(StatusCode::OK, &json!({"runId": run, "outcome": outcome}))
}

/// The audited result of the run's `http.fetch` call (`ok` or its refusal's code), if it made one.
async fn fetch_result(s: &Management, run: &str) -> Result<Option<String>, Failure> {
    let filter = AuditFilter {
        work: Some(run.to_owned()),
        operation: Some("http.fetch".to_owned()),
        ..AuditFilter::default()
    };
    let page = Page {
        after: None,
        upper: now().0,
        limit: 1,
    };
    let store = s.store.clone();
    let records = blocking(move || Ok(store.read(|tx| tx.page_audit(&filter, &page))?)).await?;
    Ok(records.into_iter().next().map(|r| r.result))
}

/// `POST /v1/host/sample/tools/session-run`: a real Work's execution (binding
/// `conformance/session`) opens a tool session, calls within it twice and closes it, making no
/// call after (its exit ends the Work), so the close is the run's last call record. `completed`
/// only when the session closed `completed`.
async fn session_run(State(s): State<Management>) -> Answer {
    let op = operator(Role::Operate).await?;
    let run = start_run(&s, &op.principal(), "session", json!({})).await?;
    let events = finished_run(&s, &run).await?;
    let completed = events
        .iter()
        .any(|e| e.event_type == "tool.session.closed" && e.data["outcome"] == "completed");
    let outcome = if completed { "completed" } else { "failed" };
    ok(StatusCode::OK, &json!({"runId": run, "outcome": outcome}))
}

/// Creates the run's Work, as the operator, and wakes the scheduler.
async fn start_run(s: &Management, principal: &str, binding: &str, input: Value) -> Result<String, Failure> {
    let config = s.config.get();
    if config.binding(RUN_SCOPE, binding).is_none() {
        return Err(Failure(
            Refusal::new(ErrorCode::UnknownBinding, "the run seams need the conformance scope")
                .with_remedy("apply examples/conformance.json (open-conduit config apply)"),
        ));
    }
    let new = NewWork::manual(RUN_SCOPE, binding, input, Some(principal.to_owned()));
    let store = s.store.clone();
    let work = blocking(move || Ok(store.write(|tx| create_work(tx, &config, new, None, now()))?)).await?;
    s.kick.notify_one();
    Ok(work.0.id)
}

/// Waits (at most [`RUN_WAIT`]) for the run's Work to finish, then answers its events.
async fn finished_run(s: &Management, run: &str) -> Result<Vec<conduit_core::Event>, Failure> {
    let deadline = Instant::now() + RUN_WAIT;
    loop {
        let (store, id) = (s.store.clone(), run.to_owned());
        let work = blocking(move || Ok(store.read(|tx| tx.get_work(&id))?)).await?;
        if work.is_some_and(|w| w.state.is_terminal()) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (store, id) = (s.store.clone(), run.to_owned());
    blocking(move || Ok(store.read(|tx| tx.list_events(Some(&id), 10_000))?)).await
}

fn init_headers(init: &Value) -> Vec<(String, String)> {
    let headers = init.get("headers").and_then(Value::as_object);
    headers
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GateProbe {
    manifest: Value,
    grant_set: Option<Vec<String>>,
    gating: Option<bool>,
}

/// `POST /v1/host/sample/packs/install-gate`: the production install gate (the manifest parser,
/// then RFC 0076 §A's gate) on a manifest, against the given grant set (else the configuration's),
/// changing nothing. A manifest this host would not install (another runtime language, a name
/// outside the grammar) is `invalid_manifest` here as at install.
async fn install_gate(State(s): State<Management>, body: Bytes) -> Answer {
    operator(Role::Operate).await?;
    let probe: GateProbe = serde_json::from_slice(&body)
        .map_err(|_| Failure(Refusal::invalid_input("the body is {manifest, grantSet?, gating?}")))?;
    let config = s.config.get();
    let grant = probe.grant_set.unwrap_or_else(|| config.package_grant());
    let gating = probe.gating.unwrap_or_else(|| config.package_gating());
    let text = probe.manifest.to_string();
    let packages = s.packages.clone();
    let (id, requires) = blocking(move || Ok(packages.judge(text.as_bytes(), &grant, gating)?)).await?;
    let mut answer = json!({"outcome": "installed", "manifest": id});
    if !gating {
        answer["requiresProjected"] = json!(requires);
    }
    ok(StatusCode::OK, &answer)
}

#[derive(Deserialize)]
struct TypeFilter {
    #[serde(rename = "type")]
    event_type: Option<String>,
}

/// `GET /v1/host/sample/test/runs/{runId}/events[?type=]`: a run (a Work) and its durable events,
/// in acceptance order; an unknown run has none.
async fn run_events(State(s): State<Management>, Path(run): Path<String>, Query(filter): Query<TypeFilter>) -> Answer {
    operator(Role::Operate).await?;
    let store = s.store.clone();
    let work = run.clone();
    let events = blocking(move || Ok(store.read(|tx| tx.list_events(Some(&work), 10_000))?)).await?;
    let events: Vec<Value> = events
        .into_iter()
        .filter(|e| filter.event_type.as_ref().is_none_or(|t| *t == e.event_type))
        .map(|e| {
            json!({"eventId": e.id, "runId": run, "type": e.event_type, "payload": e.data,
                   "timestamp": e.accepted_at, "sequence": e.sequence, "causationId": e.causation.parent})
        })
        .collect();
    ok(StatusCode::OK, &json!({ "events": events }))
}

/// `POST /v1/host/sample/test/reset`: the seams keep no state, so there is nothing to reset.
async fn reset() -> Answer {
    operator(Role::Operate).await?;
    ok(StatusCode::OK, &json!({"reset": true}))
}
