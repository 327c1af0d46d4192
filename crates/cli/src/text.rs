//! Plain text from the API's JSON, shared by `render` and `report`: a field by pointer, pretty JSON,
//! and the lines of a diagnostics list. It sits below both, so neither imports the other.

use serde_json::Value;

/// Pretty-printed JSON.
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The diagnostics of an answer or an envelope, one per line: pointer, code, message and remedy.
pub fn diagnostics(answer: &Value) -> String {
    let list = answer.get("diagnostics").and_then(Value::as_array);
    let line = |d: &Value| {
        let pointer = match field(d, "/pointer").as_str() {
            "-" | "" => "/".to_owned(),
            p => p.to_owned(),
        };
        let (severity, code) = (field(d, "/severity"), field(d, "/code"));
        format!(
            "  {pointer}  {severity} {code}: {} ({})",
            field(d, "/message"),
            field(d, "/remedy")
        )
    };
    list.into_iter().flatten().map(line).collect::<Vec<_>>().join("\n")
}

/// A field by JSON pointer as plain text: strings unquoted, absent or null as `-`.
pub fn field(value: &Value, pointer: &str) -> String {
    match value.pointer(pointer) {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}
