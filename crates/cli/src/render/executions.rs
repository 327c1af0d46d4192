//! Executions, the attempts at Work, and what they left: their artifacts and the toolbelt's records
//! of their calls.

use serde_json::Value;

use super::layout::{list, record_list};
use crate::text::field;

pub(super) const EXECUTION_COLUMNS: [(&str, &str); 7] = [
    ("ID", "/id"),
    ("WORK", "/work_id"),
    ("EPOCH", "/epoch"),
    // The daemon instance holding (or last holding) the attempt's lease.
    ("OWNER", "/owner"),
    ("STATE", "/state"),
    ("EXIT", "/exit_code"),
    ("OUTCOME", "/outcome/status"),
];

const ARTIFACT_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("KIND", "/kind"),
    ("NAME", "/name"),
    ("SIZE", "/size"),
    ("REFUSED", "/refused"),
];

const AUDIT_COLUMNS: [(&str, &str); 6] = [
    ("AT", "/at"),
    ("KIND", "/kind"),
    ("OPERATION", "/operation"),
    ("RESULT", "/result"),
    ("EXECUTION", "/execution_id"),
    ("MS", "/duration_ms"),
];

const OPERATOR_ACTION_COLUMNS: [(&str, &str); 5] = [
    ("AT", "/at"),
    ("OPERATOR", "/principal"),
    ("ROUTE", "/route"),
    ("PATH", "/path"),
    ("DETAIL", "/detail"),
];

pub fn execution_table(answer: &Value) -> String {
    record_list(answer, &EXECUTION_COLUMNS)
}

/// A cancelled attempt, and the hold on its Work.
pub fn execution_cancelled(answer: &Value) -> String {
    let id = field(answer, "/execution/id");
    format!("cancelled {id}; its Work is held until `open-conduit work retry`")
}

pub fn stop_confirmed(answer: &Value) -> String {
    let id = field(answer, "/execution/id");
    format!("{id} stopped at {}", field(answer, "/execution/stopped_at"))
}

pub fn artifact_table(answer: &Value) -> String {
    list(answer, &ARTIFACT_COLUMNS)
}

/// An artifact's content as text; on a terminal, with what could restyle it shown escaped
/// ([`crate::text::printable`]). Piped, and through `artifacts cat`, it is as it is.
pub fn content(answer: &Value) -> String {
    let text = answer.get("content").and_then(Value::as_str).unwrap_or_default();
    super::terminal::for_terminal(text).trim_end().to_owned()
}

pub fn audit_table(answer: &Value) -> String {
    list(answer, &AUDIT_COLUMNS)
}

/// What operators changed, one line each.
pub fn operator_action_table(answer: &Value) -> String {
    list(answer, &OPERATOR_ACTION_COLUMNS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn empty_list_is_just_the_header() {
        assert_eq!(
            execution_table(&json!({"items": []})),
            "ID  WORK  EPOCH  OWNER  STATE  EXIT  OUTCOME"
        );
    }
}
