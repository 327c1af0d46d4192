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

/// The CLI `name`, for a test that runs inside its loopback-only namespace; `None` outside it
/// (where the test re-ran itself inside) or when the CLI is not installed.
fn agent_in_namespace(test: &str, name: &str) -> Option<std::path::PathBuf> {
    inside_loopback_namespace(test).then(|| agent_cli(name)).flatten()
}

/// The one `demo.triaged` event on the Work's log, which must come from `execution`.
fn triaged_once_by(daemon: &Daemon, work: &str, execution: &str) -> Value {
    let triaged: Vec<Value> = daemon
        .events(work)
        .into_iter()
        .filter(|e| e["type"] == "demo.triaged")
        .collect();
    assert_eq!(triaged.len(), 1);
    assert_eq!(triaged[0]["source"], format!("execution:{execution}"), "{}", triaged[0]);
    triaged[0].clone()
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
    let test = "claude_code_calls_the_toolbelt_through_os_mcp_and_its_transcript_and_usage_are_kept";
    let Some(cli) = agent_in_namespace(test, "claude") else {
        return;
    };
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
    let triaged = triaged_once_by(&daemon, &work, &execution);
    assert_eq!(triaged["data"]["label"], "bug");

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
    assert!(
        attempt["agent_usage"]["usage"]["output_tokens"].as_u64().is_some(),
        "{run}"
    );
    let shown = daemon.cli(&["runs", "get", &work]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("TOKENS OUT") && shown.contains("COST USD"), "{shown}");
}

/// Codex's settings for the scripted model server: a Responses-API provider on loopback, and
/// nothing sent elsewhere.
fn codex_config(cli: &std::path::Path, model: &ModelServer) -> Value {
    let set = |setting: String| ["-c".to_owned(), setting];
    let args: Vec<String> = [
        set(r#"model_provider="local""#.to_owned()),
        set(r#"model_providers.local.name="local""#.to_owned()),
        set(format!(r#"model_providers.local.base_url="{}/v1""#, model.base_url())),
        set(r#"model_providers.local.wire_api="responses""#.to_owned()),
        set(r#"model_providers.local.env_key="OPENAI_API_KEY""#.to_owned()),
    ]
    .concat();
    agent_config(
        "codex",
        json!({
            "prompt": "Triage the issue in {{input}} and say what you did.",
            "command": cli,
            // A model name Codex does not know keeps MCP tools as tools.
            "model": "scripted-model",
            "args": args,
            "timeout": "2m",
            "env": {"OPENAI_API_KEY": "sk-test"},
        }),
    )
}

#[test]
fn codex_calls_the_toolbelt_through_os_mcp_and_its_transcript_and_usage_are_kept() {
    let Some(cli) = agent_in_namespace(
        "codex_calls_the_toolbelt_through_os_mcp_and_its_transcript_and_usage_are_kept",
        "codex",
    ) else {
        return;
    };
    let model = ModelServer::start(triage_script());
    let daemon = start_daemon(&codex_config(&cli, &model));
    let work = create_work(&daemon, json!({"issue": 8}));
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "triaged as a bug", "{done}");

    let turns = model.turns();
    assert_eq!(turns.len(), 4, "three calls, then the end of the turn");
    let first = turns[0].to_string();
    for op in OPERATIONS {
        assert!(first.contains(&format!(r#""name":"{op}""#)), "{op} offered: {first}");
    }
    assert!(
        first.contains("Triage carefully: read the context first."),
        "the playbook is in the instructions"
    );
    assert!(first.contains(r#"\"issue\": 8"#), "the Work's input is in the prompt");

    let execution = daemon.first_execution(&work);
    triaged_once_by(&daemon, &work, &execution);
    let run = daemon.json(&["runs", "get", &work]);
    let attempt = &run["executions"][0];
    assert!(
        attempt["agent_session"].as_str().is_some_and(|s| !s.is_empty()),
        "{run}"
    );
    assert_eq!(
        attempt["agent_usage"]["usage"]["output_tokens"], 20,
        "four turns of 5: {run}"
    );
}

/// An approval covers `http.fetch`: the agent's fetch parks its Work; once approved, the next
/// attempt resumes the agent's own session (the model sees the earlier turns) and the fetch runs
/// once.
fn a_parked_call_resumes_the_agents_session(config: impl FnOnce(&std::path::Path, &ModelServer) -> Value, cli: &str) {
    let Some(cli) = agent_cli(cli) else { return };
    let (port, heads) = test_server();
    let fetch = ("http.fetch", json!({"url": format!("http://127.0.0.1:{port}/deploy")}));
    let script = vec![
        ("read_context", json!({})),
        fetch.clone(),
        fetch,
        (
            "declare_outcome",
            json!({"status": "succeeded", "summary": "deployed after approval"}),
        ),
    ];
    let model = ModelServer::start(script);
    let mut config = config(&cli, &model);
    let scope = &mut config["scopes"]["demo"];
    scope["approvals"] = json!([{"operations": ["http.fetch"]}]);
    for list in ["/authorization/operations", "/bindings/agent/operations"] {
        scope
            .pointer_mut(list)
            .unwrap()
            .as_array_mut()
            .unwrap()
            .push(json!("http.fetch"));
    }
    let allow = format!("127.0.0.1:{port}");
    let daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_TEST_FETCH_ALLOW", &allow)], |scratch| {
        plant_playbook(scratch, "triage", PLAYBOOK);
        config.to_string()
    });
    let work = create_work(&daemon, json!({"issue": 9}));
    daemon.await_work(&work, "waiting");
    let parked_turns = model.turns().len();
    assert_eq!(
        parked_turns, 3,
        "read_context, the parked fetch, then the end of the turn"
    );
    assert!(heads.lock().unwrap().is_empty(), "the fetch did not run");
    let pending = daemon.json(&["approvals", "list", "--in-state", "pending"])["items"][0].clone();
    assert_eq!(pending["operation"], "http.fetch", "{pending}");
    let id = pending["id"].as_str().unwrap();
    daemon.json(&["approvals", "approve", id]);

    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "deployed after approval");
    assert_eq!(heads.lock().unwrap().len(), 1, "the approved fetch ran once");
    assert_eq!(daemon.json(&["approvals", "show", id])["state"], "used");
    let turns = model.turns();
    let resumed = turns[parked_turns].to_string();
    assert!(
        resumed.contains("The Work continues"),
        "the resumption is the new prompt: {resumed}"
    );
    assert!(
        resumed.contains("Triage the issue") && resumed.contains("read_context"),
        "the resumed session carries the earlier turns: {resumed}"
    );
    let run = daemon.json(&["runs", "get", &work]);
    let sessions: Vec<&Value> = run["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| &x["agent_session"])
        .collect();
    assert_eq!(sessions.len(), 2);
    assert!(
        sessions.iter().all(|s| s.as_str().is_some_and(|s| !s.is_empty())),
        "{sessions:?}"
    );
    let parked = &run["executions"][0];
    assert!(
        parked["agent_usage"]["usage"].is_object(),
        "the parked segment keeps what the agent used: {parked}"
    );
}

#[test]
fn claude_code_resumes_its_session_after_a_parked_call_is_approved() {
    if inside_loopback_namespace("claude_code_resumes_its_session_after_a_parked_call_is_approved") {
        a_parked_call_resumes_the_agents_session(claude_config, "claude");
    }
}

#[test]
fn codex_resumes_its_session_after_a_parked_call_is_approved() {
    if inside_loopback_namespace("codex_resumes_its_session_after_a_parked_call_is_approved") {
        a_parked_call_resumes_the_agents_session(codex_config, "codex");
    }
}

/// `config` with the binding retrying twice in all, a second apart.
fn retrying(mut config: Value) -> Value {
    config["scopes"]["demo"]["bindings"]["agent"]["retry"] = json!({"max_attempts": 2, "backoff": "1s"});
    config
}

/// A CLI that is not installed is `executor_unavailable` (what was looked for, in the log), and
/// follows the retry policy like any program that cannot start.
#[test]
fn a_missing_agent_cli_is_unavailable_and_retried() {
    let config = agent_config("claude-code", json!({"prompt": "p", "command": "claude-not-installed"}));
    let daemon = start_daemon(&retrying(config));
    let work = create_work(&daemon, json!({}));
    let failed = daemon.await_work(&work, "failed");
    let summary = failed["outcome"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("not found (ENOENT)") && summary.ends_with("(the last of 2 attempts)"),
        "{summary}"
    );
    let tried = daemon.attempts(&work);
    assert_eq!(tried.len(), 2);
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{}", tried[1]["id"].as_str().unwrap())]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("executor_unavailable: `claude-not-installed` was not found"),
        "{log}"
    );
    let (status, doctor) = daemon.json_unchecked(&["doctor"]);
    assert_eq!(status, Some(1), "{doctor}");
    let checks = doctor["checks"].as_array().unwrap();
    let check = checks.iter().find(|c| c["check"] == "agent CLIs").cloned();
    let detail = check.unwrap_or_default()["detail"].to_string();
    assert!(
        detail.contains("demo/agent: `claude-not-installed` was not found"),
        "{doctor}"
    );
}

/// The real CLI exiting non-zero (here on an argument it does not know) is retried, then fails
/// with its exit status.
#[test]
fn an_agent_cli_that_exits_non_zero_is_retried() {
    let Some(cli) = agent_in_namespace("an_agent_cli_that_exits_non_zero_is_retried", "claude") else {
        return;
    };
    let model = ModelServer::start(triage_script());
    let mut config = claude_config(&cli, &model);
    config["scopes"]["demo"]["bindings"]["agent"]["config"]["args"] = json!(["--no-such-flag"]);
    let daemon = start_daemon(&retrying(config));
    let work = create_work(&daemon, json!({}));
    let failed = daemon.await_work(&work, "failed");
    assert_eq!(
        failed["outcome"]["summary"],
        "exited with status 1 (the last of 2 attempts)"
    );
    assert_eq!(daemon.attempts(&work).len(), 2);
    assert!(model.turns().is_empty(), "the CLI stopped before asking the model");
}

/// The drill: the daemon is killed while the agent waits on its model, the agent dies while no
/// daemon watches, and the next daemon judges the segment lost and retries it; the retry runs the
/// whole script.
#[test]
fn an_agent_segment_lost_across_a_restart_is_retried() {
    let Some(cli) = agent_in_namespace("an_agent_segment_lost_across_a_restart_is_retried", "claude") else {
        return;
    };
    let model = ModelServer::holding(triage_script(), 1);
    let mut daemon = start_daemon(&retrying(claude_config(&cli, &model)));
    let work = create_work(&daemon, json!({"issue": 10}));
    wait_until("the agent's first model turn", || !model.turns().is_empty());
    daemon.kill();
    let runs = state_beside(daemon.scratch()).join("runs");
    let pid = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .find_map(|run| std::fs::read_to_string(run.path().join("pid")).ok())
        .expect("the attempt's noted pid");
    kill_group(&pid);

    daemon.launch();
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "triaged as a bug");
    let tried = daemon.attempts(&work);
    assert_eq!(tried.len(), 2);
    assert_eq!(
        tried[0]["outcome"]["summary"],
        "ended unobserved; its exit status is unknown"
    );
}

/// The confinement attack from inside the agent: the model has Claude Code run, with its own
/// Bash tool, a command that reads the operator token and the store. Confined (the default) the
/// reads are refused; with `"sandbox": "off"` (the negative control) the token comes back.
#[test]
fn an_agent_cannot_read_the_operator_token_or_the_store() {
    let Some(cli) = agent_in_namespace("an_agent_cannot_read_the_operator_token_or_the_store", "claude") else {
        return;
    };
    for confined in [true, false] {
        let state = "$OS_PLAYBOOK_DIR/..";
        let attack = format!("cat {state}/private/operator.token; head -c 16 {state}/store.db; echo; echo attack-done");
        let model = ModelServer::start(vec![("=Bash", json!({"command": attack, "description": "attack"}))]);
        let mut config = claude_config(&cli, &model);
        let binding = &mut config["scopes"]["demo"]["bindings"]["agent"];
        binding["config"]["args"] = json!(["--allowedTools", "Bash"]);
        if !confined {
            binding["sandbox"] = json!("off");
        }
        let daemon = start_daemon(&config);
        let work = create_work(&daemon, json!({}));
        daemon.await_work(&work, "succeeded");
        let token = daemon.operator_token();
        let after = model.turns().last().cloned().unwrap_or_default().to_string();
        assert!(after.contains("attack-done"), "the command ran: {after}");
        if confined {
            assert!(!after.contains(&token) && !after.contains("SQLite format"), "{after}");
            assert!(after.contains("Permission denied"), "{after}");
        } else {
            assert!(
                after.contains(&token),
                "unconfined, the same attack reads the token: {after}"
            );
        }
    }
}
