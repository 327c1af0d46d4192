//! What operators changed, recorded where the change commits: the management router opens a
//! recording for each request that may change something, and a keyed mutation writes its record in
//! its own transaction (so a change and its record commit together, and a replay adds nothing).
//! A request that changed something without such a transaction is recorded by the router after it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use conduit_core::{OperatorAction, Timestamp};
use conduit_store::derived_id;
use serde_json::{Map, Value};

tokio::task_local! {
    static RECORDING: Recording;
}

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

/// One request's recording: who, on which route and path, and whether its record is written.
#[derive(Clone)]
pub struct Recording {
    pub principal: String,
    /// The route, as the API lists it: `POST /v1/work/{id}/hold`.
    pub route: String,
    pub path: String,
    written: Arc<AtomicBool>,
}

impl Recording {
    pub fn new(principal: String, route: String, path: String) -> Recording {
        Recording {
            principal,
            route,
            path,
            written: Arc::default(),
        }
    }

    /// Runs `f` with this recording open.
    pub async fn scope<F: std::future::Future>(self, f: F) -> F::Output {
        RECORDING.scope(self, f).await
    }

    /// The recording open for the request this task serves, if any.
    pub fn current() -> Option<Recording> {
        RECORDING.try_with(Recording::clone).ok()
    }

    /// The record of a keyed request: its id derives from the operator, the route, the path, the
    /// key and the body's hash, so a replay is the same record.
    pub fn keyed_action(
        &self,
        key: &str,
        body_hash: &str,
        status: u16,
        answer: &Value,
        at: Timestamp,
    ) -> OperatorAction {
        let id = derived_id(&[
            &self.principal,
            &self.route,
            &self.path,
            key,
            body_hash,
            "operator.action",
        ]);
        self.action(id, status, answer, at)
    }

    pub fn action(&self, id: String, status: u16, answer: &Value, at: Timestamp) -> OperatorAction {
        OperatorAction {
            id,
            at,
            principal: self.principal.clone(),
            route: self.route.clone(),
            path: self.path.clone(),
            status,
            detail: kept(answer),
        }
    }

    /// Says the request's record is written (with its change, or by its replay's original).
    pub fn mark_written(&self) {
        self.written.store(true, Ordering::Relaxed);
    }

    pub fn is_written(&self) -> bool {
        self.written.load(Ordering::Relaxed)
    }
}

/// The kept fields of an answer.
fn kept(answer: &Value) -> Value {
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
