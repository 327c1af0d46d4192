//! The agent executors: Claude Code and Codex, run non-interactively with the toolbelt mounted as
//! their one MCP server, `open-conduit` (`os mcp`), the binding's playbook as their instructions,
//! their machine-readable output kept as the attempt's transcript, and their own session resumed
//! when the Work continues after a wait. Building the command line and reading the transcript are
//! plain functions; finding the CLI reads the filesystem.

use std::path::{Path, PathBuf};

use conduit_config::{Agent, AgentConfig};
use conduit_core::toolbelt_env::{OS_ENDPOINT, OS_PLAYBOOK_DIR, OS_TOKEN_FILE};
use serde_json::{json, Value};

/// The name the toolbelt's MCP server is mounted under.
pub const SERVER: &str = "open-conduit";

/// What one agent attempt is started with.
pub struct AgentLaunch<'a> {
    pub agent: Agent,
    pub config: &'a AgentConfig,
    /// The CLI, found.
    pub program: &'a Path,
    /// The host's `os` binary, which serves the MCP server.
    pub os: &'a Path,
    pub endpoint: &'a Path,
    pub token_file: &'a Path,
    pub playbook_dir: &'a Path,
    /// The binding's playbook, handed to the agent as instructions.
    pub instructions: Option<&'a str>,
    /// The agent's own session to continue, after the Work waited.
    pub resume: Option<&'a str>,
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The whole argv, the program first.
pub fn argv(launch: &AgentLaunch<'_>) -> Vec<String> {
    let mut argv = vec![text(launch.program)];
    match launch.agent {
        Agent::ClaudeCode => argv.extend(claude_args(launch)),
        Agent::Codex => argv.extend(codex_args(launch)),
    }
    argv
}

/// Variables the CLI is started with (before the binding's own, which may replace them).
pub fn environment(agent: Agent) -> &'static [(&'static str, &'static str)] {
    match agent {
        // Wait for the MCP server before the first model request (it connects in the background
        // otherwise, and gives up waiting after about 7 s unless told longer), and contact
        // nothing but the model endpoint.
        Agent::ClaudeCode => &[
            ("MCP_CONNECTION_NONBLOCKING", "0"),
            ("MCP_CONNECT_TIMEOUT_MS", "60000"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
        ],
        Agent::Codex => &[],
    }
}

/// `-p` (the prompt comes on stdin), the MCP server alone and its tools allowed, streamed JSON
/// out.
fn claude_args(launch: &AgentLaunch<'_>) -> Vec<String> {
    let server = json!({"mcpServers": {SERVER: {
        "type": "stdio",
        "command": text(launch.os),
        "args": ["mcp"],
        "env": mcp_env(launch),
    }}});
    let mut args: Vec<String> = [
        "-p",
        "--mcp-config",
        &server.to_string(),
        "--strict-mcp-config",
        "--allowedTools",
        &format!("mcp__{SERVER}__*"),
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    .map(str::to_owned)
    .into();
    if let Some(model) = &launch.config.model {
        args.extend(["--model".to_owned(), model.clone()]);
    }
    if let Some(instructions) = launch.instructions {
        args.extend(["--append-system-prompt".to_owned(), instructions.to_owned()]);
    }
    if let Some(session) = launch.resume {
        args.push(format!("--resume={session}"));
    }
    args.extend(launch.config.args.iter().cloned());
    args
}

/// `exec [resume SESSION] --json`, the MCP server required and its tools approved, telemetry
/// off, then the binding's arguments and `-` (the prompt comes on stdin).
fn codex_args(launch: &AgentLaunch<'_>) -> Vec<String> {
    let mut args = vec!["exec".to_owned()];
    if let Some(session) = launch.resume {
        args.extend(["resume".to_owned(), session.to_owned()]);
    }
    args.extend(["--json", "--skip-git-repo-check"].map(str::to_owned));
    if let Some(model) = &launch.config.model {
        args.extend(["-m".to_owned(), model.clone()]);
    }
    let env: Vec<String> = mcp_env(launch)
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", toml_string(v.as_str().unwrap_or_default())))
        .collect();
    let mut settings = vec![
        format!("mcp_servers.{SERVER}.command={}", toml_string(&text(launch.os))),
        format!("mcp_servers.{SERVER}.args=[\"mcp\"]"),
        format!("mcp_servers.{SERVER}.env={{{}}}", env.join(",")),
        format!("mcp_servers.{SERVER}.default_tools_approval_mode=\"approve\""),
        // A slow server is otherwise skipped after about a second, and the run goes on without it.
        format!("mcp_servers.{SERVER}.required=true"),
        // Contact nothing but the model endpoint.
        "analytics.enabled=false".to_owned(),
        "otel.metrics_exporter=\"none\"".to_owned(),
    ];
    if let Some(instructions) = launch.instructions {
        settings.push(format!("developer_instructions={}", toml_string(instructions)));
    }
    for setting in settings {
        args.extend(["-c".to_owned(), setting]);
    }
    args.extend(launch.config.args.iter().cloned());
    args.push("-".to_owned());
    args
}

/// The toolbelt's variables, given to the MCP server explicitly (Codex passes a server only a
/// short allowlist of its own environment).
fn mcp_env(launch: &AgentLaunch<'_>) -> Value {
    json!({
        OS_ENDPOINT: text(launch.endpoint),
        OS_TOKEN_FILE: text(launch.token_file),
        OS_PLAYBOOK_DIR: text(launch.playbook_dir),
    })
}

/// A TOML basic string: JSON's escapes are TOML's for the characters JSON escapes; TOML also
/// forbids DEL unescaped.
fn toml_string(value: &str) -> String {
    Value::String(value.to_owned()).to_string().replace('\u{7f}', "\\u007F")
}

/// Finds the CLI: an absolute `command` as it is, else a program name on the binding's `path`,
/// then on `daemon_path`. What was looked for is in the error.
pub fn find_program(agent: Agent, config: &AgentConfig, daemon_path: &str) -> Result<PathBuf, String> {
    let name = config.command.as_deref().unwrap_or(agent.program());
    if name.starts_with('/') {
        return is_executable(Path::new(name))
            .then(|| PathBuf::from(name))
            .ok_or_else(|| format!("`{name}` is not an executable file"));
    }
    let dirs: Vec<&str> = config
        .path
        .iter()
        .map(String::as_str)
        .chain(daemon_path.split(':').filter(|d| !d.is_empty()))
        .collect();
    dirs.iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            format!(
                "`{name}` was not found on the binding's path nor the daemon's PATH ({}); install it, or set `command` to its absolute path",
                dirs.join(":")
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What a finished attempt's transcript says about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub session: Option<String>,
    pub usage: Option<Value>,
}

impl Summary {
    /// Takes one line of the transcript (whose content the agent controls): the session id the
    /// CLI announced, when it is a plain id, and the numbers of the usage it reported last
    /// (Claude Code's `result` line: tokens and cost; Codex's `turn.completed`).
    pub fn take(&mut self, agent: Agent, line: &str) {
        let Ok(line) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let kind = line["type"].as_str().unwrap_or_default();
        let (session, usage) = match agent {
            Agent::ClaudeCode => (
                &line["session_id"],
                (kind == "result").then(|| {
                    json!({
                        "usage": numbers(&line["usage"], &CLAUDE_TOKENS),
                        "total_cost_usd": line["total_cost_usd"].as_f64(),
                        "num_turns": line["num_turns"].as_u64(),
                        "duration_ms": line["duration_ms"].as_u64(),
                    })
                }),
            ),
            Agent::Codex => (
                if kind == "thread.started" {
                    &line["thread_id"]
                } else {
                    &Value::Null
                },
                (kind == "turn.completed").then(|| json!({"usage": numbers(&line["usage"], &CODEX_TOKENS)})),
            ),
        };
        if let Some(session) = session.as_str().filter(|s| is_session_id(s)) {
            self.session = Some(session.to_owned());
        }
        if usage.is_some() {
            self.usage = usage;
        }
    }
}

const CLAUDE_TOKENS: [&str; 4] = [
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
];
const CODEX_TOKENS: [&str; 4] = [
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
];

/// The `keys` of `value` that are whole numbers.
fn numbers(value: &Value, keys: &[&str]) -> Value {
    let kept = keys
        .iter()
        .filter_map(|k| value[*k].as_u64().map(|n| ((*k).to_owned(), json!(n))));
    Value::Object(kept.collect())
}

/// A session id the host passes back to the CLI: letters, digits and `-`, starting with neither
/// `-` nor nothing, so it can never read as a flag.
fn is_session_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AgentConfig {
        serde_json::from_value(json!({"prompt": "p", "model": "m", "args": ["--max-turns", "3"]})).unwrap()
    }

    fn launch<'a>(agent: Agent, config: &'a AgentConfig, resume: Option<&'a str>) -> AgentLaunch<'a> {
        AgentLaunch {
            agent,
            config,
            program: Path::new("/bin/agent"),
            os: Path::new("/opt/oc/os"),
            endpoint: Path::new("/s/runs/k/toolbelt.sock"),
            token_file: Path::new("/s/runs/k/token/token"),
            playbook_dir: Path::new("/s/playbooks"),
            instructions: Some("Be \"careful\""),
            resume,
        }
    }

    #[test]
    fn claude_mounts_only_the_toolbelt_and_resumes_its_session() {
        let config = config();
        let argv = argv(&launch(Agent::ClaudeCode, &config, Some("s-1")));
        let after = |flag: &str| argv[argv.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(argv[0], "/bin/agent");
        assert!(
            argv.contains(&"-p".to_owned()) && !argv.iter().any(|a| a.contains("Do it")),
            "the prompt is not in argv"
        );
        let mounted: Value = serde_json::from_str(&after("--mcp-config")).unwrap();
        let server = &mounted["mcpServers"]["open-conduit"];
        assert_eq!(
            (server["command"].as_str(), &server["args"]),
            (Some("/opt/oc/os"), &json!(["mcp"]))
        );
        assert_eq!(server["env"]["OS_TOKEN_FILE"], "/s/runs/k/token/token");
        assert!(argv.contains(&"--strict-mcp-config".to_owned()));
        assert_eq!(after("--allowedTools"), "mcp__open-conduit__*");
        assert_eq!(after("--output-format"), "stream-json");
        assert_eq!(after("--append-system-prompt"), "Be \"careful\"");
        assert!(argv.contains(&"--resume=s-1".to_owned()));
        assert_eq!(argv[argv.len() - 2..], ["--max-turns", "3"]);
    }

    #[test]
    fn codex_gets_its_server_required_and_approved_and_reads_its_prompt_from_stdin() {
        let config = config();
        let argv = argv(&launch(Agent::Codex, &config, Some("t-1")));
        assert_eq!(argv[1..4], ["exec", "resume", "t-1"]);
        assert!(argv.contains(&"mcp_servers.open-conduit.command=\"/opt/oc/os\"".to_owned()));
        assert!(argv.contains(&"mcp_servers.open-conduit.default_tools_approval_mode=\"approve\"".to_owned()));
        assert!(argv.contains(&"mcp_servers.open-conduit.required=true".to_owned()));
        let env = argv
            .iter()
            .find(|a| a.starts_with("mcp_servers.open-conduit.env="))
            .unwrap();
        assert!(env.contains("OS_ENDPOINT=\"/s/runs/k/toolbelt.sock\""), "{env}");
        assert!(argv.contains(&"developer_instructions=\"Be \\\"careful\\\"\"".to_owned()));
        assert_eq!(argv.last().unwrap(), "-", "the prompt comes on stdin");
        let fresh = super::argv(&launch(Agent::Codex, &config, None));
        assert_eq!(fresh[1..3], ["exec", "--json"]);
    }

    fn summarize(agent: Agent, transcript: &str) -> Summary {
        let mut summary = Summary::default();
        transcript.lines().for_each(|line| summary.take(agent, line));
        summary
    }

    #[test]
    fn transcripts_give_the_session_and_the_last_usage() {
        let claude = r#"{"type":"system","subtype":"init","session_id":"s-9"}
not json
{"type":"result","session_id":"s-9","total_cost_usd":0.5,"usage":{"input_tokens":10},"num_turns":2,"duration_ms":7}"#;
        let got = summarize(Agent::ClaudeCode, claude);
        assert_eq!(got.session.as_deref(), Some("s-9"));
        assert_eq!(got.usage.unwrap()["total_cost_usd"], 0.5);
        let codex = r#"{"type":"thread.started","thread_id":"t-9"}
{"type":"turn.completed","usage":{"input_tokens":3,"output_tokens":4}}"#;
        let got = summarize(Agent::Codex, codex);
        assert_eq!(got.session.as_deref(), Some("t-9"));
        assert_eq!(got.usage.unwrap()["usage"]["output_tokens"], 4);
        assert_eq!(summarize(Agent::Codex, ""), Summary::default());
        let forged = r#"{"type":"result","session_id":"--dangerously-skip-permissions","usage":{"input_tokens":"\u001b[2J","output_tokens":3}}"#;
        let got = summarize(Agent::ClaudeCode, forged);
        assert_eq!(got.session, None, "a session id that could read as a flag is not kept");
        assert_eq!(
            got.usage.unwrap()["usage"],
            json!({"output_tokens": 3}),
            "only numbers are kept"
        );
    }
}
