//! What an operation answers besides its output: the events it asks the host to emit, and its
//! refusal. Handlers, gates and builtins all speak these.

use conduit_core::wait::is_valid_wait;
use conduit_core::{Declaration, Duration, Refusal};
use serde_json::{json, Value};

/// An event to emit for the execution: the input of `emit`, and what an operation asks the host to
/// emit (a translated emission), accepted under the same fence and rules.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Emission {
    #[serde(rename = "type")]
    pub event_type: String,
    #[serde(default)]
    pub data: Value,
    pub correlation_key: Option<String>,
}

/// A handler's refusal: answered `422` with its code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationError {
    pub code: String,
    pub message: String,
    /// Seconds the caller should wait before trying again (a rate limit, an unavailable service):
    /// answered as the refusal's `retry_after` field and its `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl OperationError {
    pub fn new(code: &str, message: impl Into<String>) -> OperationError {
        OperationError {
            code: code.to_owned(),
            message: message.into(),
            retry_after: None,
        }
    }

    /// The caller-facing refusal: `422` with the code and message.
    pub fn refusal(self) -> Refusal {
        let refusal = Refusal::operation(&self.code, self.message);
        match self.retry_after {
            Some(seconds) => refusal.with_field("retry_after", seconds.into()),
            None => refusal,
        }
    }
}

/// A wait an operation (a translated wait) or a gate (a parked call) asks the host to declare for
/// the caller's segment, exactly as the `wait` builtin declares one: under the lease guard, as the
/// segment's one declaration, releasing its authority. It is owned by the asking registration: each
/// key is one the Work owns or lies in that registration's namespace (`github:...` for `github`).
#[derive(Debug, Clone, PartialEq)]
pub struct WaitRequest {
    pub types: Vec<String>,
    pub keys: Vec<String>,
    pub timeout: Option<Duration>,
}

impl WaitRequest {
    /// Whether it can be declared at all: one or more type patterns, no timeout or a positive one.
    pub fn is_valid(&self) -> bool {
        is_valid_wait(&self.types, self.timeout)
    }

    pub fn declaration(&self) -> Declaration {
        Declaration::Wait {
            types: self.types.clone(),
            keys: self.keys.clone(),
            timeout: self.timeout,
            artifacts: Vec::new(),
        }
    }

    /// How the caller is told of it.
    pub fn to_json(&self) -> Value {
        json!({"types": self.types, "keys": self.keys, "timeout": self.timeout})
    }
}
