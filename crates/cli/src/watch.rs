//! The commands that wait and follow: `events list --follow`, `runs watch`, and `work create
//! --wait` / `work wait`. Each polls the management socket (a quarter second apart) and prints as
//! things happen; none changes anything.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use crate::management::{self, EventQuery, Locations};
use crate::render;
use crate::report::Failure;

/// How long a follower sleeps between polls.
const POLL: Duration = Duration::from_millis(250);

/// Prints the events `query` picks, then every one accepted later, until interrupted. With `json`,
/// one event per line (JSON Lines); else a table row each, the header once.
pub fn follow_events(locations: &Locations, query: &EventQuery, json: bool) -> Result<(), Failure> {
    let connection = locations.connection()?;
    let mut after = None;
    let mut header = !json;
    loop {
        let answer = management::send_all(&connection, &management::list_events(query, after))?;
        let events = answer["items"].as_array().cloned().unwrap_or_default();
        if let Some(last) = events.last() {
            after = last["sequence"].as_i64();
        }
        print_events(&events, json, &mut header)?;
        std::thread::sleep(POLL);
    }
}

fn print_events(events: &[Value], json: bool, header: &mut bool) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    for event in events {
        let line = if json {
            event.to_string()
        } else {
            render::event_line(event, std::mem::take(header))
        };
        writeln!(out, "{line}").map_err(closed)?;
    }
    out.flush().map_err(closed)
}

/// Waits until Work `id` finishes, telling stderr each state it passes through, and answers it as
/// `work get` does. The caller's exit status follows its outcome.
pub fn wait_for_work(locations: &Locations, id: &str) -> Result<Value, Failure> {
    let connection = locations.connection()?;
    let mut seen = String::new();
    loop {
        let work = management::send(&connection, &management::get_work(id))?;
        let state = work["state"].as_str().unwrap_or_default().to_owned();
        if crate::runs::is_finished(&work) {
            return Ok(work);
        }
        if state != seen {
            eprintln!("{}", progress(&work));
            seen = state;
        }
        std::thread::sleep(POLL);
    }
}

/// Follows every run (as `runs list` shows them), printing a line each time one changes state,
/// until interrupted.
pub fn watch_runs(locations: &Locations, scope: Option<&str>, json: bool) -> Result<(), Failure> {
    let connection = locations.connection()?;
    let mut states = std::collections::HashMap::new();
    loop {
        let answer = management::send_all(&connection, &management::list_work(scope, None))?;
        let mut changed: Vec<Value> = answer["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|w| states.insert(w["id"].to_string(), w["state"].clone()) != Some(w["state"].clone()))
            .cloned()
            .collect();
        // The list is newest first; changes read oldest first.
        changed.reverse();
        let mut out = std::io::stdout().lock();
        for work in &changed {
            let line = if json { work.to_string() } else { progress(work) };
            writeln!(out, "{line}").map_err(closed)?;
        }
        out.flush().map_err(closed)?;
        std::thread::sleep(POLL);
    }
}

/// One line on a Work: its id, scope and binding, and its state with why it waits or how it ended.
fn progress(work: &Value) -> String {
    let field = |name: &str| work[name].as_str().unwrap_or("-").to_owned();
    let detail = match (work["blocked_reason"].as_str(), work["outcome"]["summary"].as_str()) {
        (Some(reason), _) => format!(" ({reason})"),
        (None, Some(summary)) => format!(": {summary}"),
        (None, None) => String::new(),
    };
    let line = format!(
        "{} {}/{} {}{detail}",
        field("id"),
        field("scope"),
        field("binding"),
        field("state")
    );
    crate::text::printable_line(&line).into_owned()
}

fn closed(e: std::io::Error) -> Failure {
    Failure::Local(format!("cannot write to stdout: {e}"))
}
