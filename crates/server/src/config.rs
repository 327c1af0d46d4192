//! The configuration routes: read the active generation, validate a candidate, apply one, and set
//! one value. The daemon implements [`ConfigControl`]; this module only speaks HTTP.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_config::Diagnostic;
use conduit_core::{Refusal, Role};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::envelope::{blocking, check_mutation, ok, parse_body, read_body, Answer};
use crate::idempotency::{once_outside, Keyed};
use crate::management::{operator, Management};

/// The active generation as an operator sees it: secret references redacted.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigView {
    pub generation: i64,
    pub hash: String,
    pub config: Value,
    /// What validation found that does not fail the configuration.
    pub warnings: Vec<Diagnostic>,
}

/// A candidate's diagnostics; `valid` when none is an error.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub valid: bool,
    pub hash: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// What an apply did: the generation now active, and whether it is new.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub generation: i64,
    pub hash: String,
    pub changed: bool,
    /// Warnings that do not fail the configuration.
    pub diagnostics: Vec<Diagnostic>,
}

/// The configuration service the daemon runs.
pub trait ConfigControl: Send + Sync {
    fn view(&self) -> ConfigView;
    /// Validates configuration text against the running release, changing nothing.
    fn check(&self, text: &str) -> Checked;
    /// Validates, saves and publishes configuration text as the next generation.
    fn apply(&self, text: &str, expected_generation: Option<i64>) -> Result<Applied, Refusal>;
    /// Sets the value at a JSON pointer of the active configuration, through the same path as apply.
    fn set(&self, pointer: &str, value: Value, expected_generation: Option<i64>) -> Result<Applied, Refusal>;
}

pub type SharedConfigControl = Arc<dyn ConfigControl>;

pub async fn show(State(s): State<Management>, headers: HeaderMap) -> Answer {
    operator(&s, &headers, Role::View).await?;
    ok(StatusCode::OK, &s.control.view())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Candidate {
    /// The configuration file's text, parsed strictly by the daemon (duplicate keys included).
    config_text: String,
    expected_generation: Option<i64>,
}

pub async fn validate(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    operator(&s, &headers, Role::View).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let candidate: Candidate = parse_body(&body)?;
    let control = s.control.clone();
    let checked = blocking(move || Ok(control.check(&candidate.config_text))).await?;
    ok(StatusCode::OK, &checked)
}

pub async fn apply(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let op = operator(&s, &headers, Role::Admin).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let candidate: Candidate = parse_body(&body)?;
    let keyed = Keyed::new(&op, &headers, "POST", uri.path(), &body)?;
    let control = s.control.clone();
    let answer = once_outside(s.store.clone(), keyed, move || {
        let applied = control.apply(&candidate.config_text, candidate.expected_generation)?;
        Ok((StatusCode::OK, serde_json::to_value(applied).unwrap_or_default()))
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
    let op = operator(&s, &headers, Role::Admin).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let req: SetValue = parse_body(&body)?;
    let keyed = Keyed::new(&op, &headers, "POST", uri.path(), &body)?;
    let control = s.control.clone();
    let answer = once_outside(s.store.clone(), keyed, move || {
        let applied = control.set(&req.pointer, req.value, req.expected_generation)?;
        Ok((StatusCode::OK, serde_json::to_value(applied).unwrap_or_default()))
    })
    .await?;
    s.kick.notify_one();
    Ok(answer)
}
