//! Work: its table and detail, the answers to `work cancel|retry|wake`, and its waits.

use serde_json::Value;

use super::layout::{items, joined, labelled, record_list, row, table};
use crate::text::field;

const WORK_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("SCOPE", "/scope"),
    ("BINDING", "/binding"),
    ("STATE", "/state"),
    ("OUTCOME", "/outcome/status"),
];

const WAIT_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("WORK", "/work_id"),
    ("STATE", "/state"),
    ("TYPES", "/types"),
    ("TIMEOUT", "/timeout_at"),
];

/// A created Work or accepted Event: its id.
pub fn id(answer: &Value) -> String {
    field(answer, "/id")
}

pub fn work_table(answer: &Value) -> String {
    record_list(answer, &WORK_COLUMNS)
}

/// One Work, a labelled field per line.
pub fn work_detail(work: &Value) -> String {
    let lines = [
        ("id", field(work, "/id")),
        ("scope", field(work, "/scope")),
        ("binding", field(work, "/binding")),
        ("state", field(work, "/state")),
        ("held", field(work, "/blocked_reason")),
        ("parent", field(work, "/parent_work")),
        ("epoch", field(work, "/epoch")),
        ("keys", joined(work, "/keys")),
        ("outcome", outcome(work)),
        ("input", field(work, "/input")),
        ("created", field(work, "/created_at")),
        ("updated", field(work, "/updated_at")),
    ];
    labelled(&lines)
}

/// A cancelled Work.
pub fn cancelled(answer: &Value) -> String {
    format!("cancelled {}", field(answer, "/work/id"))
}

/// A retried Work.
pub fn retried(answer: &Value) -> String {
    format!(
        "retrying {} (from event {})",
        field(answer, "/work/id"),
        field(answer, "/event/id")
    )
}

/// A hold, release, rebind or attach: the event it recorded, on which Work.
pub fn steered(answer: &Value) -> String {
    format!(
        "{} {} (event {})",
        field(answer, "/event/type"),
        field(answer, "/work/id"),
        field(answer, "/event/id")
    )
}

/// A wake or an action: the event and whether it woke the Work.
pub fn woke(answer: &Value) -> String {
    let verdict = if answer.get("woke") == Some(&Value::Bool(true)) {
        "woke the Work"
    } else {
        "woke nothing"
    };
    format!("{} ({verdict})", field(answer, "/event/id"))
}

/// Waits, their event types joined with commas rather than printed as JSON.
pub fn wait_table(answer: &Value) -> String {
    let rows = items(answer).iter().map(|wait| {
        let mut cells = row(wait, &WAIT_COLUMNS);
        cells[3] = joined(wait, "/types");
        cells
    });
    table(&WAIT_COLUMNS, rows)
}

/// `status (source): summary`, or `-` when there is no outcome yet.
fn outcome(work: &Value) -> String {
    match work.get("outcome") {
        None | Some(Value::Null) => "-".to_owned(),
        Some(outcome) => {
            let mut text = format!("{} ({})", field(outcome, "/status"), field(outcome, "/source"));
            if let Some(summary) = outcome.get("summary").and_then(Value::as_str) {
                text = format!("{text}: {summary}");
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn work_table_aligns_columns_and_shows_missing_as_dash() {
        let answer = json!({"items": [
            {"id": "w1", "scope": "setup", "binding": "shell", "state": "succeeded",
             "outcome": {"status": "succeeded", "source": "exit"}},
            {"id": "work-22", "scope": "s", "binding": "b", "state": "ready", "outcome": null},
        ]});
        let expected = "\
ID       SCOPE  BINDING  STATE      OUTCOME
w1       setup  shell    succeeded  succeeded
work-22  s      b        ready      -";
        assert_eq!(work_table(&answer), expected);
    }

    #[test]
    fn wait_types_read_as_a_list_not_json() {
        let answer =
            json!({"items": [{"id": "x1", "work_id": "w1", "state": "armed", "types": ["demo.go", "demo.stop"]}]});
        let shown = wait_table(&answer);
        assert!(shown.contains("demo.go, demo.stop") && !shown.contains('['), "{shown}");
    }

    #[test]
    fn work_detail_shows_keys_outcome_and_input() {
        let work = json!({"id": "w1", "keys": ["work:w1", "pr:2"], "input": {"n": 1},
                          "outcome": {"status": "failed", "source": "declared", "summary": "no"}});
        let detail = work_detail(&work);
        assert!(detail.contains("keys:    work:w1, pr:2"), "{detail}");
        assert!(detail.contains("outcome: failed (declared): no"), "{detail}");
        assert!(detail.contains(r#"input:   {"n":1}"#), "{detail}");
        assert!(detail.contains("parent:  -"), "{detail}");
    }
}
