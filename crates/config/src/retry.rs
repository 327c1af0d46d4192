//! A binding's `retry`: how many attempts a Work gets in a row and the first backoff, checked
//! with their JSON pointers.

use conduit_core::retry::RetryPolicy;
use conduit_core::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diagnostic::Diagnostic;

/// Most attempts a binding may give a Work in a row.
pub const MAX_ATTEMPTS: u32 = 100;

/// `"retry": {"max_attempts": N, "backoff": "10s"}` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// How many attempts a Work gets in a row, the first included (1 to 100).
    pub max_attempts: u32,
    /// The wait before the first retry (`10s`, `2m`); each further one doubles. Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
}

const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);

/// The policy `retry` states (absent: one attempt), or the diagnostic of what is wrong with it.
pub(crate) fn policy(pointer: &str, retry: Option<&RetryConfig>) -> Result<RetryPolicy, Diagnostic> {
    let Some(retry) = retry else {
        return Ok(RetryPolicy::default());
    };
    if !(1..=MAX_ATTEMPTS).contains(&retry.max_attempts) {
        return Err(Diagnostic::error(
            format!("{pointer}/retry/max_attempts"),
            "invalid_value",
            "max_attempts counts every attempt, the first included: from 1 to 100",
            "write 3 for a first attempt and two retries",
        ));
    }
    let backoff = match retry.backoff.as_deref() {
        None => DEFAULT_BACKOFF,
        Some(text) => Duration::parse(text).filter(|d| d.0 > 0).ok_or_else(|| {
            Diagnostic::error(
                format!("{pointer}/retry/backoff"),
                "invalid_value",
                "the backoff is not a positive duration",
                "write it like `10s`, `2m` or `1h`",
            )
        })?,
    };
    Ok(RetryPolicy {
        max_attempts: retry.max_attempts,
        backoff,
    })
}
