//! Unified run history: a run is one Work from creation to its outcome, across every attempt
//! segment it took. `runs` reads it whole from the management API's Work, executions, events and
//! artifacts, so it shows nothing those do not.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::connection::Connection;
use crate::management::{self as m, items, send_all};
use crate::report::Failure;

/// `runs list`: every run, newest first, with how many attempts it took and its latest.
pub fn list(connection: &Connection, scope: Option<&str>, state: Option<&str>) -> Result<Value, Failure> {
    let work = items(send_all(connection, &m::list_work(scope, state))?);
    let executions = items(send_all(connection, &m::list_executions(None))?);
    Ok(json!({ "items": summarize(work, &executions) }))
}

/// `runs get WORK`: the run's Work, its attempts in order and the events it caused or received.
pub fn get(connection: &Connection, work: &str) -> Result<Value, Failure> {
    Ok(json!({
        "work": send_all(connection, &m::get_work(work))?,
        "executions": items(send_all(connection, &m::list_executions(Some(work)))?),
        "events": items(send_all(connection, &m::list_events(&m::EventQuery::of_work(work), None))?),
    }))
}

/// `runs table`: per scope and binding, how many runs ended each way and how many attempts they took.
pub fn table(connection: &Connection) -> Result<Value, Failure> {
    let runs = list(connection, None, None)?;
    Ok(json!({ "items": tally(&runs["items"]) }))
}

/// `runs log WORK`: every attempt's log in order, each under a header naming the attempt.
pub fn log(connection: &Connection, work: &str) -> Result<Value, Failure> {
    let mut text = String::new();
    for execution in items(send_all(connection, &m::list_executions(Some(work)))?) {
        let id = execution["id"].as_str().unwrap_or_default();
        let log = send_all(connection, &m::artifact_content(&format!("log:{id}")))?;
        text.push_str(&format!("== attempt {} ({id}) ==\n", execution["epoch"]));
        text.push_str(log["content"].as_str().unwrap_or_default());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    Ok(json!({ "content": text }))
}

/// Whether a Work (as the API answers it) has finished: succeeded, failed or cancelled.
pub fn is_finished(work: &Value) -> bool {
    let state = work["state"].as_str().and_then(conduit_core::WorkState::parse);
    state.is_some_and(conduit_core::WorkState::is_terminal)
}

/// Each Work as a run: its own fields, its attempt count and its latest attempt's id and state.
fn summarize(work: Vec<Value>, executions: &[Value]) -> Vec<Value> {
    let mut attempts: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for x in executions {
        attempts
            .entry(x["work_id"].as_str().unwrap_or_default())
            .or_default()
            .push(x);
    }
    work.into_iter()
        .map(|w| {
            let own = attempts.get(w["id"].as_str().unwrap_or_default());
            let latest = own.and_then(|xs| xs.last());
            let finished = is_finished(&w);
            json!({
                "work_id": w["id"],
                "scope": w["scope"],
                "binding": w["binding"],
                "state": w["state"],
                "outcome": w["outcome"]["status"],
                "attempts": own.map_or(0, Vec::len),
                "latest_execution": latest.map(|x| x["id"].clone()),
                "latest_state": latest.map(|x| x["state"].clone()),
                "started_at": w["created_at"],
                "ended_at": if finished { w["updated_at"].clone() } else { Value::Null },
            })
        })
        .collect()
}

/// Runs counted per (scope, binding): by how they stand and by attempts taken.
fn tally(runs: &Value) -> Vec<Value> {
    let mut rows: BTreeMap<(String, String), BTreeMap<&str, u64>> = BTreeMap::new();
    for run in runs.as_array().into_iter().flatten() {
        let key = (text(&run["scope"]), text(&run["binding"]));
        let row = rows.entry(key).or_default();
        *row.entry("runs").or_default() += 1;
        *row.entry("attempts").or_default() += run["attempts"].as_u64().unwrap_or_default();
        let state = match run["state"].as_str().unwrap_or_default() {
            s @ ("succeeded" | "failed" | "cancelled") => s,
            _ => "active",
        };
        *row.entry(state).or_default() += 1;
    }
    rows.into_iter()
        .map(|((scope, binding), counts)| {
            let count = |name: &str| counts.get(name).copied().unwrap_or_default();
            json!({
                "scope": scope, "binding": binding, "runs": count("runs"), "succeeded": count("succeeded"),
                "failed": count("failed"), "cancelled": count("cancelled"), "active": count("active"),
                "attempts": count("attempts"),
            })
        })
        .collect()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_counts_its_attempts_and_names_its_latest() {
        let work = vec![json!({"id": "w1", "scope": "s", "binding": "b", "state": "succeeded",
                               "outcome": {"status": "succeeded"}, "created_at": "t0", "updated_at": "t9"})];
        let executions = [
            json!({"id": "x1", "work_id": "w1", "state": "waiting"}),
            json!({"id": "x2", "work_id": "w1", "state": "succeeded"}),
            json!({"id": "y1", "work_id": "other", "state": "failed"}),
        ];
        let runs = summarize(work, &executions);
        assert_eq!(
            (
                runs[0]["attempts"].as_u64(),
                runs[0]["latest_execution"].as_str(),
                runs[0]["ended_at"].as_str()
            ),
            (Some(2), Some("x2"), Some("t9"))
        );
        let table = tally(&Value::from(runs));
        assert_eq!(
            (table[0]["runs"].as_u64(), table[0]["succeeded"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(table[0]["attempts"], 2);
    }
}
