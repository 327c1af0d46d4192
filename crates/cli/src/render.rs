//! Human-readable text for answers, printed when `--json` is not given. Every function reads the
//! API's JSON leniently: a missing field shows as `-` rather than failing the command.

use serde_json::{json, Value};

use crate::text::{diagnostics, field, pretty};

const WORK_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("SCOPE", "/scope"),
    ("BINDING", "/binding"),
    ("STATE", "/state"),
    ("OUTCOME", "/outcome/status"),
];

const EVENT_COLUMNS: [(&str, &str); 5] = [
    ("SEQ", "/sequence"),
    ("ID", "/id"),
    ("TYPE", "/type"),
    ("SOURCE", "/source"),
    ("PARENT", "/causation/parent"),
];

const EXECUTION_COLUMNS: [(&str, &str); 6] = [
    ("ID", "/id"),
    ("WORK", "/work_id"),
    ("EPOCH", "/epoch"),
    ("STATE", "/state"),
    ("EXIT", "/exit_code"),
    ("OUTCOME", "/outcome/status"),
];

const AUDIT_COLUMNS: [(&str, &str); 6] = [
    ("AT", "/at"),
    ("KIND", "/kind"),
    ("OPERATION", "/operation"),
    ("RESULT", "/result"),
    ("EXECUTION", "/execution_id"),
    ("MS", "/duration_ms"),
];

/// `GET /v1/health`: `up (version V, generation G)`.
pub fn health(answer: &Value) -> String {
    format!(
        "up (version {}, generation {})",
        field(answer, "/version"),
        field(answer, "/generation")
    )
}

/// A created Work or accepted Event: its id.
pub fn id(answer: &Value) -> String {
    field(answer, "/id")
}

pub fn work_table(answer: &Value) -> String {
    list(answer, &WORK_COLUMNS)
}

/// One Work, a labelled field per line.
pub fn work_detail(work: &Value) -> String {
    let lines = [
        ("id", field(work, "/id")),
        ("scope", field(work, "/scope")),
        ("binding", field(work, "/binding")),
        ("state", field(work, "/state")),
        ("parent", field(work, "/parent_work")),
        ("epoch", field(work, "/epoch")),
        ("keys", joined(work, "/keys")),
        ("outcome", outcome(work)),
        ("input", field(work, "/input")),
        ("created", field(work, "/created_at")),
        ("updated", field(work, "/updated_at")),
    ];
    let lines: Vec<String> = lines
        .iter()
        .map(|(label, value)| format!("{:<9}{value}", format!("{label}:")))
        .collect();
    lines.join("\n")
}

pub fn event_table(answer: &Value) -> String {
    list(answer, &EVENT_COLUMNS)
}

/// An event's causal chain, root first, each event's id indented one step deeper than its parent's.
pub fn event_chain(answer: &Value) -> String {
    let rows = items(answer).iter().enumerate().map(|(depth, event)| {
        let mut cells = row(event, &EVENT_COLUMNS);
        cells[1] = format!("{}{}", "  ".repeat(depth), cells[1]);
        cells
    });
    table(&EVENT_COLUMNS, rows)
}

pub fn execution_table(answer: &Value) -> String {
    list(answer, &EXECUTION_COLUMNS)
}

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

pub fn run_table(answer: &Value) -> String {
    list(answer, &RUN_COLUMNS)
}

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

pub fn run_tally(answer: &Value) -> String {
    list(answer, &RUN_TALLY_COLUMNS)
}

/// One run: its Work, then its attempts, then its events.
pub fn run_detail(answer: &Value) -> String {
    format!(
        "{}\n\nattempts:\n{}\n\nevents:\n{}",
        work_detail(&answer["work"]),
        list(&json!({"items": answer["executions"]}), &EXECUTION_COLUMNS),
        list(&json!({"items": answer["events"]}), &EVENT_COLUMNS)
    )
}

/// A validation: `valid (hash H)` or `invalid`, then one line per diagnostic.
pub fn checked(answer: &Value) -> String {
    let verdict = match answer.get("valid").and_then(Value::as_bool) {
        Some(true) => format!("valid (hash {})", field(answer, "/hash")),
        _ => "invalid".to_owned(),
    };
    [verdict, diagnostics(answer)].join("\n").trim_end().to_owned()
}

/// An apply: the generation now active and whether it changed.
pub fn applied(answer: &Value) -> String {
    let generation = field(answer, "/generation");
    let verdict = match answer.get("changed").and_then(Value::as_bool) {
        Some(true) => format!("applied generation {generation} (hash {})", field(answer, "/hash")),
        _ => format!("unchanged: generation {generation} is already this configuration"),
    };
    [verdict, diagnostics(answer)].join("\n").trim_end().to_owned()
}

/// The active configuration: its generation, then the (redacted) document.
pub fn config_view(answer: &Value) -> String {
    let config = answer.get("config").unwrap_or(&Value::Null);
    format!(
        "generation {} (hash {})\n{}",
        field(answer, "/generation"),
        field(answer, "/hash"),
        pretty(config)
    )
}

const OPERATOR_COLUMNS: [(&str, &str); 3] = [("ID", "/id"), ("NAME", "/name"), ("ROLE", "/role")];

pub fn operator_table(answer: &Value) -> String {
    list(answer, &OPERATOR_COLUMNS)
}

/// A new operator credential: its name and role, and the token, shown this once.
pub fn issued(answer: &Value) -> String {
    format!(
        "{} ({}): {}\nthis token is shown once; hand it to its operator now",
        field(answer, "/name"),
        field(answer, "/role"),
        field(answer, "/token")
    )
}

/// A rotation: where the new token was written (the token itself is never printed).
pub fn rotated(answer: &Value) -> String {
    format!(
        "rotated {}; the new token is in {}",
        field(answer, "/name"),
        field(answer, "/token")
    )
}

/// A recovery of the owner's credential.
pub fn recovered(answer: &Value) -> String {
    format!("issued the owner a new credential in {}", field(answer, "/token_file"))
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

/// A cancelled attempt, and the hold on its Work.
pub fn execution_cancelled(answer: &Value) -> String {
    let id = field(answer, "/execution/id");
    format!("cancelled {id}; its Work is held until `open-conduit work retry`")
}

pub fn stop_confirmed(answer: &Value) -> String {
    let id = field(answer, "/execution/id");
    format!("{id} stopped at {}", field(answer, "/execution/stopped_at"))
}

/// A wake: the event and whether it woke the Work.
pub fn woke(answer: &Value) -> String {
    let verdict = if answer.get("woke") == Some(&Value::Bool(true)) {
        "woke the Work"
    } else {
        "woke nothing"
    };
    format!("{} ({verdict})", field(answer, "/event/id"))
}

/// A revocation.
pub fn revoked(answer: &Value) -> String {
    format!("revoked {} token {}", field(answer, "/kind"), field(answer, "/revoked"))
}

const ARTIFACT_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("KIND", "/kind"),
    ("NAME", "/name"),
    ("SIZE", "/size"),
    ("REFUSED", "/refused"),
];

pub fn artifact_table(answer: &Value) -> String {
    list(answer, &ARTIFACT_COLUMNS)
}

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

const PACKAGE_COLUMNS: [(&str, &str); 4] = [
    ("NAME", "/name"),
    ("VERSION", "/version"),
    ("STATUS", "/status"),
    ("REQUIRES", "/requires"),
];

pub fn package_table(answer: &Value) -> String {
    table(
        &PACKAGE_COLUMNS,
        items(answer).iter().map(|p| {
            let mut row = row(p, &PACKAGE_COLUMNS[..3]);
            row.push(joined(p, "/requires"));
            row
        }),
    )
}

/// A package: what it requires and asks for, what it provides, and whether the current grant set
/// still covers it.
pub fn package_detail(package: &Value) -> String {
    let status = match joined(package, "/unmet").as_str() {
        "-" => field(package, "/status"),
        unmet => format!(
            "{} (the grant set lacks {unmet}: see `open-conduit config set /packages/grant`)",
            field(package, "/status")
        ),
    };
    let lines = [
        ("package", field(package, "/manifest")),
        ("requires", joined(package, "/requires")),
        ("permissions", joined(package, "/permissions")),
        ("operations", joined(package, "/operations")),
        ("toolsets", joined(package, "/toolsets")),
        ("status", status),
    ];
    let lines: Vec<String> = lines
        .iter()
        .map(|(label, value)| format!("{:<13}{value}", format!("{label}:")))
        .collect();
    lines.join("\n")
}

/// An install: the package, and when its operations are served.
pub fn package_installed(package: &Value) -> String {
    format!(
        "{}\nits operations are served now: grant them (or its toolsets) to a binding to use them",
        package_detail(package)
    )
}

pub fn package_removed(answer: &Value) -> String {
    format!("removed {}@{}", field(answer, "/removed"), field(answer, "/version"))
}

/// An artifact's content, as it is.
pub fn content(answer: &Value) -> String {
    answer
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

const SCOPE_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("PARENT", "/parent"),
    ("ENABLED", "/enabled"),
    ("REMOVED_IN", "/removed_in"),
    ("GENERATION", "/generation"),
];

pub fn scope_table(answer: &Value) -> String {
    list(answer, &SCOPE_COLUMNS)
}

const WAIT_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("WORK", "/work_id"),
    ("STATE", "/state"),
    ("TYPES", "/types"),
    ("TIMEOUT", "/timeout_at"),
];

pub fn wait_table(answer: &Value) -> String {
    list(answer, &WAIT_COLUMNS)
}

const ROUTE_COLUMNS: [(&str, &str); 4] = [
    ("ON", "/on"),
    ("BINDING", "/binding"),
    ("VERDICT", "/verdict"),
    ("REASON", "/reason"),
];

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

pub fn sample_table(answer: &Value) -> String {
    list(answer, &[("NAME", "/name"), ("TYPE", "/type")])
}

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

/// The doctor's checks, one per line, and a verdict.
pub fn doctor(answer: &Value) -> String {
    let lines = answer["checks"].as_array().into_iter().flatten().map(|c| {
        format!(
            "{:<5} {:<13} {}",
            field(c, "/status"),
            field(c, "/check"),
            field(c, "/detail")
        )
    });
    let verdict = if answer["healthy"] == Value::Bool(true) {
        "healthy"
    } else {
        "unhealthy"
    };
    lines
        .chain(std::iter::once(verdict.to_owned()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn audit_table(answer: &Value) -> String {
    list(answer, &AUDIT_COLUMNS)
}

/// A toolbelt answer's `output.event_id`.
/// The Work's input, from `read_context`'s output.
pub fn work_input(answer: &Value) -> String {
    answer["output"]["work"]["input"].to_string()
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

pub fn event_id(answer: &Value) -> String {
    field(answer, "/output/event_id")
}

/// A toolbelt answer's `output.work_id`.
pub fn work_id(answer: &Value) -> String {
    field(answer, "/output/work_id")
}

/// A declaration's answer: `declared outcome` or `declared wait`.
pub fn declared(answer: &Value) -> String {
    format!("declared {}", field(answer, "/output/declared"))
}

/// A toolbelt answer's `output`, pretty-printed.
pub fn output(answer: &Value) -> String {
    pretty(answer.get("output").unwrap_or(&Value::Null))
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

/// An array of strings joined with commas; `-` when absent or empty.
fn joined(value: &Value, pointer: &str) -> String {
    let items: Vec<String> = match value.pointer(pointer) {
        Some(Value::Array(items)) => items.iter().map(|item| field(item, "")).collect(),
        _ => Vec::new(),
    };
    if items.is_empty() {
        "-".to_owned()
    } else {
        items.join(", ")
    }
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

/// The `items` of a list answer.
fn items(answer: &Value) -> &[Value] {
    answer
        .get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A list answer as a table, one row per item.
fn list(answer: &Value, columns: &[(&str, &str)]) -> String {
    table(columns, items(answer).iter().map(|item| row(item, columns)))
}

fn row(item: &Value, columns: &[(&str, &str)]) -> Vec<String> {
    columns.iter().map(|(_, pointer)| field(item, pointer)).collect()
}

/// A header line and one line per row, columns left-aligned and two spaces apart.
fn table(columns: &[(&str, &str)], rows: impl Iterator<Item = Vec<String>>) -> String {
    let header: Vec<String> = columns.iter().map(|(title, _)| (*title).to_owned()).collect();
    let rows: Vec<Vec<String>> = std::iter::once(header).chain(rows).collect();
    let mut widths = vec![0; columns.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn health_names_version_and_generation() {
        let answer = json!({"status": "ok", "version": "0.1.0", "instance": "i", "generation": 3});
        assert_eq!(health(&answer), "up (version 0.1.0, generation 3)");
    }

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
    fn empty_list_is_just_the_header() {
        assert_eq!(
            execution_table(&json!({"items": []})),
            "ID  WORK  EPOCH  STATE  EXIT  OUTCOME"
        );
    }

    #[test]
    fn chain_indents_each_event_below_its_parent() {
        let event = |seq: u64, id: &str, parent: Value| {
            json!({"sequence": seq, "id": id, "type": "t", "source": "core.manual",
                   "causation": {"parent": parent}})
        };
        let answer = json!({"items": [event(1, "e1", Value::Null), event(4, "e4", json!("e1"))]});
        let expected = "\
SEQ  ID    TYPE  SOURCE       PARENT
1    e1    t     core.manual  -
4      e4  t     core.manual  e1";
        assert_eq!(event_chain(&answer), expected);
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
