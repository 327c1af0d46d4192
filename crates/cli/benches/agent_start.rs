//! The claude-code executor's overhead: from an attempt's claim (the execution's `started_at`) to
//! the agent's first toolbelt call (the first `agent.toolCalled` on its Work), beside the same
//! `claude` started by hand with the same MCP configuration against a held attempt's toolbelt,
//! timed from its spawn to its first call. Both answer the same scripted model server, alternately,
//! inside a loopback-only network namespace (`cargo bench -p conduit-cli --bench agent_start`;
//! `BENCH_ATTEMPTS`, default 8 each; needs the CLIs `.ci/run` installs).

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use common::model::{agent_cli, ModelServer};
use common::timing::{mean, median, millis};
use common::*;
use serde_json::{json, Value};

const PROMPT: &str = "Read your context.";

fn main() {
    if std::env::var_os("OPEN_CONDUIT_TEST_IN_NETNS").is_none() {
        let status = Command::new("unshare")
            .args(["-rn", "--", "sh", "-c", "ip link set lo up && exec \"$0\""])
            .arg(std::env::current_exe().unwrap())
            .env("OPEN_CONDUIT_TEST_IN_NETNS", "1")
            .status()
            .expect("unshare and ip run the bench in a loopback-only namespace");
        std::process::exit(status.code().unwrap_or(1));
    }
    let Some(cli) = agent_cli("claude") else { return };
    let attempts: usize = std::env::var("BENCH_ATTEMPTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let model = ModelServer::start(vec![("read_context", json!({}))]);
    let meet = meeting();
    let daemon = Daemon::start(Some(&config(&cli, &model, meet.path()).to_string()));
    let home = tempfile::tempdir().unwrap();
    let (mut ours, mut by_hand) = (Vec::new(), Vec::new());
    for round in 0..=attempts {
        let (o, h) = (
            executor_start(&daemon),
            hand_start(&daemon, &cli, &model, home.path(), meet.path()),
        );
        if round > 0 {
            // The first round warms the CLI's home and the page cache.
            ours.push(o);
            by_hand.push(h);
        }
    }
    let (o, h) = (median(&mut ours), median(&mut by_hand));
    println!("claude-code: start to the agent's first toolbelt call ({attempts} each)");
    println!(
        "  claude by hand        p50 {h:>7.1} ms  mean {:>7.1} ms",
        mean(&by_hand)
    );
    println!("  claude-code executor  p50 {o:>7.1} ms  mean {:>7.1} ms", mean(&ours));
    println!(
        "  ratio                 p50 {:.2}x  mean {:.2}x",
        o / h,
        mean(&ours) / mean(&by_hand)
    );
}

/// A `claude-code` binding `agent`, and a `shell` binding that holds its attempt open (the
/// toolbelt the hand-started CLI calls).
fn config(cli: &Path, model: &ModelServer, meet: &Path) -> Value {
    let mut config: Value = serde_json::from_str(&shell_config(&publish_and_hold(meet))).unwrap();
    config["scopes"]["demo"]["bindings"]["agent"] = json!({
        "executor": "claude-code",
        "config": {"prompt": PROMPT, "command": cli, "env": env(model)},
        "operations": ["read_context", "declare_outcome"],
    });
    config
}

fn env(model: &ModelServer) -> Value {
    json!({"ANTHROPIC_BASE_URL": model.base_url(), "ANTHROPIC_API_KEY": "sk-ant-bench"})
}

fn executor_start(daemon: &Daemon) -> f64 {
    let work = daemon.create_work("demo", "agent");
    daemon.await_work(&work, "succeeded");
    let started = daemon.json(&["executions", "list", "--work", &work])["items"][0]["started_at"].clone();
    first_call(daemon, &work) - millis(&started)
}

/// The same CLI, flags and MCP server (`os mcp`) the executor uses, started here against a held
/// shell attempt's toolbelt.
fn hand_start(daemon: &Daemon, cli: &Path, model: &ModelServer, home: &Path, meet: &Path) -> f64 {
    let (work, socket, token_file) = hold_one(daemon, meet);
    let os = Path::new(OPEN_CONDUIT).with_file_name("os");
    let server = json!({"mcpServers": {"open-conduit": {"type": "stdio", "command": os, "args": ["mcp"],
        "env": {"OS_ENDPOINT": socket, "OS_TOKEN_FILE": token_file}}}});
    let mut command = Command::new(cli);
    command
        .args(["-p", PROMPT, "--mcp-config", &server.to_string(), "--strict-mcp-config"])
        .args([
            "--allowedTools",
            "mcp__open-conduit__*",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .envs([
            ("MCP_CONNECTION_NONBLOCKING", "0"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ])
        .envs(
            env(model)
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k, v.as_str().unwrap())),
        )
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let spawned = now_millis();
    let status = command.status().unwrap();
    assert!(status.success(), "claude by hand: {status}");
    let took = first_call(daemon, &work) - spawned;
    std::fs::write(meet.join("release"), "").unwrap();
    daemon.await_work(&work, "succeeded");
    std::fs::remove_file(meet.join("release")).unwrap();
    took
}

/// When the Work's first toolbelt call was accepted, in milliseconds of the day.
fn first_call(daemon: &Daemon, work: &str) -> f64 {
    let called = daemon
        .events(work)
        .into_iter()
        .find(|e| e["type"] == "agent.toolCalled");
    millis(&called.expect("a toolbelt call")["accepted_at"])
}

fn now_millis() -> f64 {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as f64;
    ms % 86_400_000.0
}
