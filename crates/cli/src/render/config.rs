//! The configuration: a validation's verdict, an apply's, and the active configuration.

use serde_json::Value;

use crate::text::{diagnostics, field, pretty};

/// A validation: `valid (hash H)` or `invalid`, then one line per diagnostic.
pub fn checked(answer: &Value) -> String {
    let verdict = match answer.get("valid").and_then(Value::as_bool) {
        Some(true) => format!("valid (hash {})", field(answer, "/hash")),
        _ => "invalid".to_owned(),
    };
    [verdict, diagnostics(answer)].join("\n").trim_end().to_owned()
}

/// An apply: the generation now active and whether it changed.
pub fn applied(answer: &Value) -> String {
    let generation = field(answer, "/generation");
    let verdict = match answer.get("changed").and_then(Value::as_bool) {
        Some(true) => format!("applied generation {generation} (hash {})", field(answer, "/hash")),
        _ => format!("unchanged: generation {generation} is already this configuration"),
    };
    [verdict, diagnostics(answer)].join("\n").trim_end().to_owned()
}

/// The active configuration: its generation, then the (redacted) document.
pub fn config_view(answer: &Value) -> String {
    let config = answer.get("config").unwrap_or(&Value::Null);
    format!(
        "generation {} (hash {})\n{}",
        field(answer, "/generation"),
        field(answer, "/hash"),
        pretty(config)
    )
}
