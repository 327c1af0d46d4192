//! `/v1/scopes`: every scope ever published, with what the active generation says of it; reconcile
//! one's unfinished Work with the active generation.

use axum::extract::{Query, State};
use axum::http::Uri;
use conduit_config::Snapshot;
use conduit_scheduler::{reconcile_scope, Operator};
use conduit_store::{ScopeRecord, Tx};
use serde_json::{json, Value};

use super::access::{NoBody, Reply};
use super::paging::{page, List};
use super::state::Management;
use crate::clock::now;
use crate::cursor::Paging;
use crate::envelope::Answer;

/// Every scope ever published (tombstones included), by id, a page at a time, with what the active
/// generation says of it: its bindings and its effective ceiling.
pub(super) async fn list_scopes(State(s): State<Management>, uri: Uri, Query(paging): Query<Paging>) -> Answer {
    let config = s.config.get();
    let list = List::at(&uri, String::new(), paging.cursor, paging.limit);
    page(
        &s,
        list,
        |_| Ok(0),
        move |tx, page| {
            Ok(tx
                .page_scopes(page)?
                .into_iter()
                .map(|scope| shown(&config, scope))
                .collect())
        },
        |scope: &Value| scope["id"].as_str().unwrap_or_default().to_owned(),
    )
    .await
}

fn shown(config: &Snapshot, scope: ScopeRecord) -> Value {
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
}

/// Holds the scope's ready and waiting Work whose binding the active generation no longer runs, and
/// reports Work whose taken grants its binding no longer offers.
pub(super) fn reconcile(tx: &mut dyn Tx, config: &Snapshot, id: &str, by: &Operator, _: NoBody) -> Reply {
    let findings = reconcile_scope(tx, config, id, by, now())?;
    Ok(json!({"scope": id, "findings": findings}))
}
