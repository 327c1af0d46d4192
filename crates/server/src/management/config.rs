//! The configuration routes: read the active generation, validate a candidate, apply one, and set
//! one value. The daemon implements [`ConfigControl`]; this module only speaks HTTP.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_core::Role;
use serde::Deserialize;
use serde_json::Value;

use super::access::{admit, operator, revision};
use super::state::Management;
use crate::envelope::{blocking, check_mutation, ok, parse_body, read_body, Answer, Failure};
use crate::ports::Applied;

pub async fn show(State(s): State<Management>, headers: HeaderMap) -> Answer {
    operator(Role::View).await?;
    let view = serde_json::to_string(&s.control.view()).unwrap_or_default();
    Ok(revision(&headers, view))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Candidate {
    /// The configuration file's text, parsed strictly by the daemon (duplicate keys included).
    config_text: String,
    expected_generation: Option<i64>,
}

pub async fn validate(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    operator(Role::View).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let candidate: Candidate = parse_body(&body)?;
    let control = s.control.clone();
    let checked = blocking(move || Ok(control.check(&candidate.config_text))).await?;
    ok(StatusCode::OK, &checked)
}

pub async fn apply(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let admitted = admit(&headers, &uri, body, Role::Admin, |_: &Candidate| Ok(())).await?;
    let control = s.control.clone();
    let answer = admitted
        .once_outside(&s, move |candidate| {
            applied(control.apply(&candidate.config_text, candidate.expected_generation)?)
        })
        .await?;
    s.kick.notify_one();
    Ok(answer)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetValue {
    pointer: String,
    value: Value,
    expected_generation: Option<i64>,
}

pub async fn set(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let admitted = admit(&headers, &uri, body, Role::Admin, |_: &SetValue| Ok(())).await?;
    let control = s.control.clone();
    let answer = admitted
        .once_outside(&s, move |req| {
            applied(control.set(&req.pointer, req.value, req.expected_generation)?)
        })
        .await?;
    s.kick.notify_one();
    Ok(answer)
}

fn applied(applied: Applied) -> Result<(StatusCode, Value), Failure> {
    Ok((StatusCode::OK, serde_json::to_value(applied).unwrap_or_default()))
}
