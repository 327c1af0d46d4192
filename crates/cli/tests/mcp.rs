//! `os mcp` driven by a real MCP client (rmcp's), against a real daemon and a held execution:
//! the catalog as tools, calls and refusals as tool results, a token rotation (a daemon restart
//! that adopts the attempt) mid-session, and the tool-session bracket on the Work's log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

const OS: &str = env!("CARGO_BIN_EXE_os");

async fn mount(socket: &Path, token_file: &Path) -> RunningService<RoleClient, ()> {
    mount_with(socket, token_file, None).await
}

async fn mount_with(socket: &Path, token_file: &Path, playbooks: Option<&Path>) -> RunningService<RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(OS);
    cmd.arg("mcp")
        .env("OS_ENDPOINT", socket)
        .env("OS_TOKEN_FILE", token_file);
    if let Some(dir) = playbooks {
        cmd.env("OS_PLAYBOOK_DIR", dir);
    }
    let transport = TokioChildProcess::new(cmd).expect("os mcp starts");
    ().serve(transport).await.expect("os mcp initializes")
}

async fn call(client: &RunningService<RoleClient, ()>, name: &str, arguments: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments.as_object().unwrap().clone());
    client.call_tool(params).await.expect("a tool result")
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().expect("text content").text.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn os_mcp_serves_the_catalog_calls_refusals_and_survives_rotation() {
    let tmp = meeting();
    let mut daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let client = mount(&socket, &token_file).await;

    let info = client.peer_info().expect("server info");
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(instructions.contains("Open Conduit execution"), "{instructions}");

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        ["create_work", "declare_outcome", "emit", "read_context", "wait"]
    );
    let hints = |name: &str| {
        let a = tools
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .annotations
            .clone()
            .unwrap();
        (a.read_only_hint, a.destructive_hint, a.open_world_hint)
    };
    assert_eq!(hints("read_context"), (Some(true), Some(false), Some(false)));
    assert_eq!(hints("emit"), (Some(false), Some(true), Some(false)));

    let emitted = call(&client, "emit", json!({"type": "demo.step"})).await;
    assert_eq!(emitted.is_error, Some(false), "{}", text(&emitted));
    let refused = call(&client, "notes.view", json!({})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).starts_with("forbidden:"), "{}", text(&refused));

    let old_token = read_token(&token_file);
    daemon.kill();
    daemon.launch();
    wait_until("the token to rotate", || read_token(&token_file) != old_token);
    let after = call(&client, "emit", json!({"type": "demo.step"})).await;
    assert_eq!(after.is_error, Some(false), "the re-read token works: {}", text(&after));

    let declared = call(&client, "declare_outcome", json!({"status": "succeeded"})).await;
    assert_eq!(declared.is_error, Some(false), "{}", text(&declared));
    let released = call(&client, "emit", json!({"type": "demo.step"})).await;
    assert!(
        text(&released).starts_with("authority_released:"),
        "{}",
        text(&released)
    );
    client.cancel().await.unwrap();

    let log: Vec<Value> = daemon
        .events(&work)
        .into_iter()
        .filter(|e| {
            let t = e["type"].as_str().unwrap_or_default();
            t.starts_with("tool.session.") || (t.starts_with("agent.tool") && e["data"]["toolName"] == "emit")
        })
        .collect();
    let types: Vec<&str> = log.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "tool.session.opened",
            "agent.toolCalled",
            "agent.toolReturned",
            "agent.toolCalled",
            "agent.toolReturned",
            "tool.session.closed"
        ],
        "one emit session brackets both emits; the bridge closed it before declaring"
    );
    assert_eq!(log[5]["data"]["outcome"], "completed");
    assert_eq!(log[1]["data"]["sessionId"], log[0]["data"]["sessionId"]);
}

/// The binding's playbook is the server's instructions, and a client that disconnects leaves its
/// sessions closed `completed`.
#[tokio::test(flavor = "multi_thread")]
async fn os_mcp_instructs_with_the_playbook_and_closes_sessions_on_disconnect() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let daemon = Daemon::start_with(|scratch| {
        plant_playbook(scratch, "triage", "---\noperations: [emit]\n---\nTriage the ticket.\n");
        let mut config: Value = serde_json::from_str(&shell_config(&hold)).unwrap();
        config["scopes"]["demo"]["bindings"]["shell"]["playbook"] = json!("triage");
        config.to_string()
    });
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let client = mount_with(&socket, &token_file, Some(&daemon.state.join("playbooks"))).await;
    let instructions = client.peer_info().unwrap().instructions.clone().unwrap_or_default();
    assert!(instructions.contains("Triage the ticket."), "{instructions}");

    call(&client, "emit", json!({"type": "demo.step"})).await;
    call(&client, "read_context", json!({})).await;
    client.cancel().await.unwrap();
    let closed: Vec<Value> = daemon
        .events(&work)
        .into_iter()
        .filter(|e| e["type"] == "tool.session.closed")
        .map(|e| e["data"].clone())
        .collect();
    let mut tools: Vec<&str> = closed.iter().map(|d| d["toolId"].as_str().unwrap()).collect();
    tools.sort();
    assert_eq!(tools, ["emit", "read_context"], "one session per tool, each closed");
    assert!(closed.iter().all(|d| d["outcome"] == "completed"));
}

/// The Python MCP SDK as an independent client, when `OPEN_CONDUIT_PYTHON` names a Python that has
/// it (`.ci/run` installs one; without it this test says so and checks nothing).
#[test]
fn an_independent_python_client_mounts_os_mcp() {
    let Some(python) = std::env::var_os("OPEN_CONDUIT_PYTHON") else {
        eprintln!("skipped: OPEN_CONDUIT_PYTHON is not set (see .ci/run)");
        return;
    };
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/python_client.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(OS)
        .env("OS_ENDPOINT", &socket)
        .env("OS_TOKEN_FILE", &token_file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["server"], "open-conduit-toolbelt");
    assert_eq!(
        seen["tools"],
        json!(["create_work", "declare_outcome", "emit", "read_context", "wait"])
    );
    assert_eq!(seen["read_only"]["read_context"], true);
    assert_eq!(
        seen["context_error"], false,
        "structured content matches the output schema"
    );
    assert_eq!(seen["context_scope"], "demo");
    assert_eq!(seen["emit_error"], false);
    assert_eq!(seen["refused_error"], true);
    assert!(seen["refused_text"].as_str().unwrap().starts_with("forbidden:"));
}

#[test]
fn os_mcp_without_an_execution_says_what_is_missing() {
    let out = std::process::Command::new(OS)
        .arg("mcp")
        .env_remove("OS_ENDPOINT")
        .env_remove("OS_TOKEN_FILE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("OS_ENDPOINT is not set"));
    assert!(out.stdout.is_empty(), "stdout is the protocol channel");
}
