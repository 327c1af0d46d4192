//! `/v1/scopes`: every scope ever published, with what the active generation says of it.

use axum::extract::State;
use serde_json::{json, Value};

use super::access::read;
use super::state::Management;
use crate::envelope::{Answer, Failure};

/// Every scope ever published (tombstones included) with what the active generation says of it: its
/// bindings and its effective ceiling.
pub(super) async fn list_scopes(State(s): State<Management>) -> Answer {
    let config = s.config.get();
    read(&s, move |tx| {
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
