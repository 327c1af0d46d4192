//! Scopes, and how their routes handle an event: a route trace and the samples to trace.

use serde_json::Value;

use super::layout::{list, row, table};
use crate::text::field;

const SCOPE_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("PARENT", "/parent"),
    ("ENABLED", "/enabled"),
    ("REMOVED_IN", "/removed_in"),
    ("GENERATION", "/generation"),
];

const ROUTE_COLUMNS: [(&str, &str); 4] = [
    ("ON", "/on"),
    ("BINDING", "/binding"),
    ("VERDICT", "/verdict"),
    ("REASON", "/reason"),
];

pub fn scope_table(answer: &Value) -> String {
    list(answer, &SCOPE_COLUMNS)
}

/// A route trace: the effect first, then each route's verdict and any other Work it wakes.
pub fn route_trace(answer: &Value) -> String {
    let routes = table(
        &ROUTE_COLUMNS,
        answer["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| row(r, &ROUTE_COLUMNS)),
    );
    let mut text = format!(
        "effect: {} ({})\nwork:   {}\n\n{routes}",
        field(answer, "/effect"),
        field(answer, "/detail"),
        field(answer, "/work")
    );
    for id in answer["other_wakes"].as_array().into_iter().flatten() {
        text.push_str(&format!("also wakes Work {}\n", id.as_str().unwrap_or_default()));
    }
    text
}

/// What a scope reconcile found: one line per Work, and whether it held it.
pub fn reconciled(answer: &Value) -> String {
    list(
        &serde_json::json!({"items": answer["findings"]}),
        &[
            ("WORK", "/work"),
            ("STATE", "/state"),
            ("BINDING", "/binding"),
            ("FINDING", "/finding"),
            ("HELD", "/held"),
        ],
    )
}

/// The scope's samples: each one's name (what `route --trace` takes), source and key.
pub fn sample_table(answer: &Value) -> String {
    list(
        answer,
        &[("NAME", "/name"), ("SOURCE", "/source"), ("KEY", "/correlation_key")],
    )
}
