//! What an operation answers besides its output: the events it asks the host to emit, and its
//! refusal. Handlers, gates and builtins all speak these.

use serde_json::Value;

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
}
