//! Human approvals of parked calls: their table, one approval, and a decision.

use serde_json::Value;

use super::layout::list;
use crate::text::{field, pretty};

const APPROVAL_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("STATE", "/state"),
    ("OPERATION", "/operation"),
    ("WORK", "/work_id"),
    ("EXPIRES", "/expires_at"),
];

pub fn approval_table(answer: &Value) -> String {
    list(answer, &APPROVAL_COLUMNS)
}

pub fn approval_detail(answer: &Value) -> String {
    pretty(answer)
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
