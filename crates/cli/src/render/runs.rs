//! Run history: the table of runs, their tally per scope and binding, and one run whole.

use serde_json::{json, Value};

use super::events::EVENT_COLUMNS;
use super::executions::EXECUTION_COLUMNS;
use super::layout::list;
use super::work::work_detail;

const RUN_COLUMNS: [(&str, &str); 8] = [
    ("WORK", "/work_id"),
    ("SCOPE", "/scope"),
    ("BINDING", "/binding"),
    ("STATE", "/state"),
    ("OUTCOME", "/outcome"),
    ("ATTEMPTS", "/attempts"),
    ("STARTED", "/started_at"),
    ("ENDED", "/ended_at"),
];

const RUN_TALLY_COLUMNS: [(&str, &str); 8] = [
    ("SCOPE", "/scope"),
    ("BINDING", "/binding"),
    ("RUNS", "/runs"),
    ("SUCCEEDED", "/succeeded"),
    ("FAILED", "/failed"),
    ("CANCELLED", "/cancelled"),
    ("ACTIVE", "/active"),
    ("ATTEMPTS", "/attempts"),
];

pub fn run_table(answer: &Value) -> String {
    list(answer, &RUN_COLUMNS)
}

pub fn run_tally(answer: &Value) -> String {
    list(answer, &RUN_TALLY_COLUMNS)
}

/// What an agent attempt reported using, after the attempt's own columns.
const USAGE_COLUMNS: [(&str, &str); 4] = [
    ("TOKENS IN", "/agent_usage/usage/input_tokens"),
    // Claude Code reports cached input apart; most of a long session's input is there.
    ("CACHE READ", "/agent_usage/usage/cache_read_input_tokens"),
    ("TOKENS OUT", "/agent_usage/usage/output_tokens"),
    ("COST USD", "/agent_usage/total_cost_usd"),
];

/// One run: its Work, then its attempts (with an agent's usage), then its events.
pub fn run_detail(answer: &Value) -> String {
    let attempt_columns: Vec<(&str, &str)> = EXECUTION_COLUMNS.into_iter().chain(USAGE_COLUMNS).collect();
    format!(
        "{}\n\nattempts:\n{}\n\nevents:\n{}",
        work_detail(&answer["work"]),
        list(&json!({"items": answer["executions"]}), &attempt_columns),
        list(&json!({"items": answer["events"]}), &EVENT_COLUMNS)
    )
}
