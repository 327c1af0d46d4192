//! The agent executors with the real `claude` and `codex` CLIs (installed by `.ci/run` at the
//! versions `.ci/agent-clis/package.json` pins), against a scripted model server on loopback, each
//! test inside a network namespace with only loopback: the agent lists the toolbelt's tools
//! through `os mcp`, calls them, and declares the outcome; a parked call resumes the agent's own
//! session; its transcript and usage are kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::model::{agent_cli, ModelServer, Step};
use common::*;
use serde_json::{json, Value};

const OPERATIONS: [&str; 4] = ["read_context", "emit", "declare_outcome", "wait"];

/// A scope `demo` whose binding `agent` runs `executor` with `config`, granted [`OPERATIONS`],
/// starting its turns on the playbook `triage`.
fn agent_config(executor: &str, config: Value) -> Value {
    json!({
        "version": 1,
        "scopes": {"demo": {
            "authorization": {"operations": OPERATIONS},
            "bindings": {"agent": {
                "executor": executor,
                "config": config,
                "operations": OPERATIONS,
                "playbook": "triage",
            }},
        }},
    })
}

fn claude_config(cli: &std::path::Path, model: &ModelServer) -> Value {
    agent_config(
        "claude-code",
        json!({
            "prompt": "Triage the issue in {{input}} and say what you did.",
            "command": cli,
            "timeout": "2m",
            "env": {"ANTHROPIC_BASE_URL": model.base_url(), "ANTHROPIC_API_KEY": "sk-ant-test"},
        }),
    )
}

const PLAYBOOK: &str =
    "---\noperations: [read_context, emit, declare_outcome]\n---\nTriage carefully: read the context first.\n";

fn triage_script() -> Vec<Step> {
    vec![
        ("read_context", json!({})),
        ("emit", json!({"type": "demo.triaged", "data": {"label": "bug"}})),
        (
            "declare_outcome",
            json!({"status": "succeeded", "summary": "triaged as a bug"}),
        ),
    ]
}

/// The names of the tools a model turn offered, and its whole text (system and messages).
fn offered(turn: &Value) -> (Vec<String>, String) {
    let tools = turn["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    (tools, turn.to_string())
}

fn start_daemon(config: &Value) -> Daemon {
    Daemon::start_with(|scratch| {
        plant_playbook(scratch, "triage", PLAYBOOK);
        config.to_string()
    })
}

fn create_work(daemon: &Daemon, input: Value) -> String {
    let input = input.to_string();
    daemon.json(&[
        "work",
        "create",
        "--scope",
        "demo",
        "--binding",
        "agent",
        "--input",
        &input,
    ])["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn claude_code_calls_the_toolbelt_through_os_mcp_and_its_transcript_and_usage_are_kept() {
    if !inside_loopback_namespace("claude_code_calls_the_toolbelt_through_os_mcp_and_its_transcript_and_usage_are_kept")
    {
        return;
    }
    let Some(cli) = agent_cli("claude") else { return };
    let model = ModelServer::start(triage_script());
    let daemon = start_daemon(&claude_config(&cli, &model));
    let work = create_work(&daemon, json!({"issue": 7}));
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "triaged as a bug", "{done}");

    let turns = model.turns();
    assert_eq!(turns.len(), 4, "three calls, then the end of the turn");
    let (tools, first) = offered(&turns[0]);
    for op in OPERATIONS {
        assert!(tools.contains(&format!("mcp__open-conduit__{op}")), "{tools:?}");
    }
    assert!(
        first.contains("Triage carefully: read the context first."),
        "the playbook is in the instructions"
    );
    assert!(
        first.contains(r#"\"issue\": 7"#),
        "the Work's input is in the prompt: {first}"
    );

    let execution = daemon.first_execution(&work);
    let triaged: Vec<Value> = daemon
        .events(&work)
        .into_iter()
        .filter(|e| e["type"] == "demo.triaged")
        .collect();
    assert_eq!(triaged.len(), 1);
    assert_eq!(triaged[0]["source"], format!("execution:{execution}"), "{}", triaged[0]);
    assert_eq!(triaged[0]["data"]["label"], "bug");

    let listed = daemon.json(&["artifacts", "list", "--execution", &execution])["items"].clone();
    let transcript = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "transcript")
        .cloned();
    let transcript = transcript.unwrap_or_else(|| panic!("a transcript artifact: {listed}"));
    let text = daemon.cli(&["artifacts", "cat", transcript["id"].as_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.lines().any(|l| l.contains(r#""type":"result""#)), "{text}");
    let run = daemon.json(&["runs", "get", &work]);
    let attempt = &run["executions"][0];
    assert!(
        attempt["agent_session"].as_str().is_some_and(|s| !s.is_empty()),
        "{run}"
    );
    assert!(attempt["usage"]["usage"]["output_tokens"].as_u64().is_some(), "{run}");
}
