//! The toolbelt's answers, as `os` prints them: the catalog, guidance, sessions, declarations and
//! call outputs.

use serde_json::{json, Value};

use super::layout::list;
use crate::text::{field, pretty};

const TOOL_COLUMNS: [(&str, &str); 4] = [
    ("TOOL", "/toolId"),
    ("TIER", "/safetyTier"),
    ("EGRESS", "/egress"),
    ("DESCRIPTION", "/description"),
];

/// A catalog (a bare array of descriptors), one tool per line.
pub fn tool_table(answer: &Value) -> String {
    list(&json!({ "items": answer }), &TOOL_COLUMNS)
}

/// One descriptor, whole, as indented JSON.
pub fn tool_detail(answer: &Value) -> String {
    pretty(answer)
}

/// The guidance text, then one `name: summary` line per operation.
pub fn guidance(answer: &Value) -> String {
    let text = answer.get("guidance").and_then(Value::as_str).unwrap_or_default();
    let operations = answer.get("operations").and_then(Value::as_array);
    let lines = operations
        .into_iter()
        .flatten()
        .map(|operation| format!("{}: {}", field(operation, "/name"), field(operation, "/summary")));
    let mut blocks = vec![text.trim_end().to_owned()];
    blocks.extend(lines);
    blocks.join("\n")
}

/// The Work's input, from `read_context`'s output.
pub fn work_input(answer: &Value) -> String {
    answer["output"]["work"]["input"].to_string()
}

/// A toolbelt answer's `output.event_id`.
pub fn event_id(answer: &Value) -> String {
    field(answer, "/output/event_id")
}

/// A toolbelt answer's `output.work_id`.
pub fn work_id(answer: &Value) -> String {
    field(answer, "/output/work_id")
}

pub fn session_id(answer: &Value) -> String {
    field(answer, "/session_id")
}

pub fn session_closed(answer: &Value) -> String {
    format!(
        "closed {} ({})",
        field(answer, "/session_id"),
        field(answer, "/outcome")
    )
}

/// A declaration's answer: `declared outcome` or `declared wait`.
pub fn declared(answer: &Value) -> String {
    format!("declared {}", field(answer, "/output/declared"))
}

/// A toolbelt answer's `output`, pretty-printed.
pub fn output(answer: &Value) -> String {
    pretty(answer.get("output").unwrap_or(&Value::Null))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn guidance_lists_one_line_per_operation() {
        let answer = json!({"guidance": "Use the toolbelt.\n", "operations": [
            {"name": "emit", "summary": "Emit an event", "input_schema": {}},
            {"name": "wait", "summary": "Wait for events", "input_schema": {}},
        ]});
        assert_eq!(
            guidance(&answer),
            "Use the toolbelt.\nemit: Emit an event\nwait: Wait for events"
        );
    }

    #[test]
    fn toolbelt_answers_show_their_output() {
        let emitted = json!({"operation": "emit", "output": {"event_id": "e9", "sequence": 9}});
        assert_eq!(event_id(&emitted), "e9");
        let created = json!({"operation": "create_work", "output": {"work_id": "w2", "event_id": "e3"}});
        assert_eq!(work_id(&created), "w2");
        assert_eq!(declared(&json!({"output": {"declared": "wait"}})), "declared wait");
    }
}
