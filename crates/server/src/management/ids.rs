//! `/v1/ids`: an abbreviated id resolved to the one full id that starts with it, for operators'
//! command lines (`open-conduit work show 0193ab`). Takes `view`.

use axum::extract::{Query, State};
use conduit_core::id_prefix::{parse_prefix, resolve, IdKind, SHOWN_MATCHES};
use conduit_core::Refusal;
use serde::Deserialize;
use serde_json::json;

use super::access::read;
use super::state::Management;
use crate::envelope::{Answer, Failure};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Abbreviated {
    kind: String,
    prefix: String,
}

pub async fn resolve_id(State(s): State<Management>, Query(q): Query<Abbreviated>) -> Answer {
    let kind = IdKind::parse(&q.kind)
        .ok_or_else(|| Failure(Refusal::invalid_input("`kind` is work, execution, event or approval")))?;
    let prefix = parse_prefix(&q.prefix).map_err(Failure)?;
    read(&s, move |tx| {
        let matches = tx.ids_starting_with(kind, &prefix, SHOWN_MATCHES + 1)?;
        let id = resolve(kind, &prefix, matches).map_err(Failure)?;
        Ok(json!({"kind": kind.as_str(), "id": id}))
    })
    .await
}
