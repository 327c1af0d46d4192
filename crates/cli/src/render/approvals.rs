//! Human approvals of parked calls: their table, one approval, and a decision.

use serde_json::Value;

use super::layout::{items, joined, labelled, record_table, row};
use crate::text::{field, pretty};

const APPROVAL_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("STATE", "/state"),
    ("OPERATION", "/operation"),
    ("WORK", "/work_id"),
    ("EXPIRES", "/expires_at"),
];

/// The most characters of an input the table shows.
const INPUT_SUMMARY: usize = 48;

/// One row per approval, ending with a one-line summary of the input it covers.
pub fn approval_table(answer: &Value) -> String {
    let columns: Vec<(&str, &str)> = APPROVAL_COLUMNS.into_iter().chain([("INPUT", "/input")]).collect();
    let rows = items(answer).iter().map(|approval| {
        let mut cells = row(approval, &APPROVAL_COLUMNS);
        cells.push(summary(&approval["input"]));
        cells
    });
    record_table(&columns, rows)
}

/// An input on one line: its compact JSON, cut to [`INPUT_SUMMARY`] characters.
fn summary(input: &Value) -> String {
    if input.is_null() {
        return "-".to_owned();
    }
    super::terminal::cut(&input.to_string(), INPUT_SUMMARY)
}

/// The approval's fields, then the exact input a decision approves, in full.
pub fn approval_detail(approval: &Value) -> String {
    let lines = [
        ("id", field(approval, "/id")),
        ("state", field(approval, "/state")),
        ("operation", field(approval, "/operation")),
        ("work", field(approval, "/work_id")),
        ("execution", field(approval, "/execution_id")),
        ("scope", field(approval, "/scope")),
        ("approvers", joined(approval, "/approvers")),
        ("requested", field(approval, "/requested_at")),
        ("expires", field(approval, "/expires_at")),
        ("decided by", field(approval, "/decided_by")),
        ("reason", field(approval, "/reason")),
        ("input hash", field(approval, "/input_hash")),
    ];
    let input = match &approval["input"] {
        Value::Null => "(not kept: requested before this release)".to_owned(),
        input => crate::text::printable(&pretty(input)).into_owned(),
    };
    format!("{}\ninput:\n{input}", labelled(&lines))
}

/// A decision: the approval's new state and whether it woke its Work.
pub fn decided(answer: &Value) -> String {
    let woke = if answer["woke"] == Value::Bool(true) {
        "; its Work resumes"
    } else {
        ""
    };
    format!(
        "{} {}{woke}",
        field(answer, "/approval/state"),
        field(answer, "/approval/id")
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_table_summarises_each_input_on_one_line_and_the_detail_shows_it_whole() {
        let long = "x".repeat(100);
        let answer = json!({"items": [
            {"id": "a1", "state": "pending", "operation": "notes.post", "work_id": "w1",
             "input": {"text": long, "channel": "ops"}},
            {"id": "a2", "state": "used", "operation": "notes.post", "work_id": "w1"}]});
        let shown = approval_table(&answer);
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines[0].ends_with("INPUT"), "{shown}");
        assert!(
            lines[1].ends_with('…') && lines[1].contains(r#"{"channel":"ops","text":"xxx"#),
            "{shown}"
        );
        assert!(lines[2].ends_with('-'), "{shown}");
        let detail = approval_detail(&answer["items"][0]);
        assert!(
            detail.contains(&long) && detail.contains("\"channel\": \"ops\""),
            "{detail}"
        );
        assert!(approval_detail(&answer["items"][1]).contains("not kept"));
    }
}
