//! A binding's executor and its `config`: the shell's argv, or an agent CLI's prompt, program,
//! model and arguments; and what every executor's process takes (`timeout`, `env`, `path`,
//! `cwd`), each checked with its JSON pointer.

use std::collections::BTreeMap;

use conduit_core::prompt;
use conduit_core::sandbox::cwd_problem;
use conduit_core::toolbelt_env::{secret_env_name, OS_ENDPOINT, OS_PLAYBOOK_DIR, OS_TOKEN_FILE};
use conduit_core::Duration;
use serde::de::DeserializeOwned;

use crate::diagnostic::{push_pointer, shape_diagnostic, Diagnostic};
use crate::model::{AgentConfig, BindingConfig, HoldConfig, ShellConfig};

const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3600);

/// The executor that runs a binding's argv.
pub const SHELL: &str = "shell";

/// The executor that holds a Work until a GitHub pull request's condition holds (`os github-hold`).
pub const GITHUB_HOLD: &str = "github-hold";

/// What a GitHub hold waits for.
pub const HOLD_CONDITIONS: [&str; 2] = ["approved", "checks"];

/// The agent CLIs the host drives itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    Codex,
}

impl Agent {
    /// Every agent CLI the host drives.
    pub const ALL: [Agent; 2] = [Agent::ClaudeCode, Agent::Codex];

    /// The executor name that selects it.
    pub const fn executor(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
        }
    }

    /// The program looked for on the daemon's PATH when `command` is absent.
    pub fn program(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude",
            Agent::Codex => "codex",
        }
    }

    /// The agent an executor name selects.
    pub fn named(executor: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.executor() == executor)
    }

    /// Arguments the host sets itself, which a binding's `args` may not repeat.
    fn reserved_args(self) -> &'static [&'static str] {
        match self {
            Agent::ClaudeCode => &[
                "-p",
                "--print",
                "--mcp-config",
                "--strict-mcp-config",
                "--output-format",
                "--input-format",
                "-r",
                "--resume",
                "-c",
                "--continue",
                "--session-id",
                "--fork-session",
                "--append-system-prompt",
                "--append-system-prompt-file",
                "--system-prompt",
                "--system-prompt-file",
                "--model",
            ],
            Agent::Codex => &["--json", "-m", "--model", "-C", "--cd", "resume", "--last"],
        }
    }
}

/// How one binding's executions run: the program, and its process settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Executable {
    Shell(ShellConfig),
    Agent(Agent, AgentConfig),
    GithubHold(HoldConfig),
}

/// A hold sets no variables, program directories or working directory of its own.
static NO_ENV: BTreeMap<String, String> = BTreeMap::new();

impl Executable {
    /// The attempt deadline.
    pub fn timeout(&self) -> Duration {
        self.written_timeout()
            .and_then(Duration::parse)
            .unwrap_or(DEFAULT_ATTEMPT_TIMEOUT)
    }

    fn written_timeout(&self) -> Option<&str> {
        match self {
            Executable::Shell(shell) => shell.timeout.as_deref(),
            Executable::Agent(_, agent) => agent.timeout.as_deref(),
            Executable::GithubHold(hold) => hold.timeout.as_deref(),
        }
    }

    /// The plain variables, program directories and working directory its process gets.
    pub fn process(&self) -> ProcessSettings<'_> {
        match self {
            Executable::Shell(c) => ProcessSettings {
                env: &c.env,
                path: &c.path,
                cwd: c.cwd.as_deref(),
            },
            Executable::Agent(_, c) => ProcessSettings {
                env: &c.env,
                path: &c.path,
                cwd: c.cwd.as_deref(),
            },
            Executable::GithubHold(_) => ProcessSettings {
                env: &NO_ENV,
                path: &[],
                cwd: None,
            },
        }
    }
}

/// What every executor's process takes from its binding.
#[derive(Debug, Clone, Copy)]
pub struct ProcessSettings<'a> {
    pub env: &'a BTreeMap<String, String>,
    pub path: &'a [String],
    pub cwd: Option<&'a str>,
}

/// The binding's executable, checked, or its first diagnostic; `None` for an executor the host
/// does not run itself. `state_dir`, when known, is where no working directory may lie.
pub(crate) fn executable(
    pointer: &str,
    binding: &BindingConfig,
    state_dir: Option<&str>,
) -> Option<Result<Executable, Diagnostic>> {
    let base = format!("{pointer}/config");
    let checked = if binding.executor == SHELL {
        strict::<ShellConfig>(&base, binding).and_then(|shell| {
            check_shell(&base, &shell)?;
            Ok(Executable::Shell(shell))
        })
    } else if binding.executor == GITHUB_HOLD {
        strict::<HoldConfig>(&base, binding).and_then(|hold| {
            check_hold(&base, &hold)?;
            Ok(Executable::GithubHold(hold))
        })
    } else {
        let agent = Agent::named(&binding.executor)?;
        strict::<AgentConfig>(&base, binding).and_then(|config| {
            check_agent(&base, agent, &config)?;
            Ok(Executable::Agent(agent, config))
        })
    };
    Some(checked.and_then(|executable| {
        check_timeout(&base, executable.written_timeout())?;
        check_process(&base, executable.process(), binding, state_dir)?;
        Ok(executable)
    }))
}

fn strict<T: DeserializeOwned>(base: &str, binding: &BindingConfig) -> Result<T, Diagnostic> {
    serde_path_to_error::deserialize(binding.config.clone()).map_err(|e| shape_diagnostic(base, &e))
}

fn invalid(at: String, message: &str, remedy: &str) -> Diagnostic {
    Diagnostic::error(at, "invalid_executor_config", message, remedy)
}

fn check_shell(base: &str, shell: &ShellConfig) -> Result<(), Diagnostic> {
    if shell.command.first().is_none_or(|program| program.is_empty()) {
        return Err(invalid(
            format!("{base}/command"),
            "the shell executor needs a non-empty command argv",
            "give `command` as an array such as [\"/bin/sh\", \"-c\", \"...\"]",
        ));
    }
    Ok(())
}

/// A hold waits for a known condition, each wait for a positive duration.
fn check_hold(base: &str, hold: &HoldConfig) -> Result<(), Diagnostic> {
    if !HOLD_CONDITIONS.contains(&hold.until.as_str()) {
        return Err(invalid(
            format!("{base}/until"),
            "a GitHub hold waits `until` approved (a review approves the pull request) or checks (its check suites complete)",
            "write \"approved\" or \"checks\"",
        ));
    }
    if hold
        .wait
        .as_deref()
        .is_some_and(|w| Duration::parse(w).is_none_or(|d| d.0 <= 0))
    {
        return Err(invalid(
            format!("{base}/wait"),
            "`wait` is a positive duration such as 30m or 2h",
            "write how long each wait may last",
        ));
    }
    Ok(())
}

/// An agent's prompt is a template of known variables; its command a program name or an absolute
/// path; its `args` leave the host's own flags alone.
fn check_agent(base: &str, agent: Agent, config: &AgentConfig) -> Result<(), Diagnostic> {
    if config.prompt.trim().is_empty() {
        return Err(invalid(
            format!("{base}/prompt"),
            "an agent binding needs a prompt",
            "write what the agent should do; {{input}} stands for the Work's input",
        ));
    }
    if let Some(unknown) = prompt::unknown_variables(&config.prompt).first() {
        return Err(invalid(
            format!("{base}/prompt"),
            &format!("the prompt names an unknown variable `{{{{{unknown}}}}}`"),
            &format!(
                "use one of {}",
                prompt::VARIABLES.map(|v| format!("{{{{{v}}}}}")).join(", ")
            ),
        ));
    }
    if let Some(command) = &config.command {
        if command.is_empty() || (command.contains('/') && !command.starts_with('/')) {
            return Err(invalid(
                format!("{base}/command"),
                "the command is a program name found on the daemon's PATH, or an absolute path",
                "write it like \"claude\" or \"/home/me/.local/bin/claude\"",
            ));
        }
    }
    if config.model.as_deref().is_some_and(str::is_empty) {
        return Err(invalid(
            format!("{base}/model"),
            "the model name is empty",
            "name a model, or leave `model` out",
        ));
    }
    let reserved = agent.reserved_args();
    for (i, arg) in config.args.iter().enumerate() {
        let flag = arg.split('=').next().unwrap_or(arg);
        if reserved.contains(&flag) {
            return Err(invalid(
                format!("{base}/args/{i}"),
                "the host sets this argument itself (the prompt, model, MCP server, output and session)",
                "remove it; give the model as `model`",
            ));
        }
    }
    Ok(())
}

fn check_timeout(base: &str, timeout: Option<&str>) -> Result<(), Diagnostic> {
    if timeout.is_some_and(|t| Duration::parse(t).is_none_or(|d| d.0 <= 0)) {
        return Err(invalid(
            format!("{base}/timeout"),
            "the timeout is not a positive duration",
            "write it like `30s`, `10m` or `1h`",
        ));
    }
    Ok(())
}

/// Variables the host sets for every execution, which a binding's `env` may not replace.
const HOST_ENV: [&str; 5] = [OS_ENDPOINT, OS_TOKEN_FILE, OS_PLAYBOOK_DIR, "PATH", "TMPDIR"];

/// A binding's `env` names are variable names the host does not set and no granted secret
/// becomes; its `path` entries are absolute directories (`:` would split one in two); its `cwd`
/// an absolute directory outside the state directory.
fn check_process(
    base: &str,
    process: ProcessSettings<'_>,
    binding: &BindingConfig,
    state_dir: Option<&str>,
) -> Result<(), Diagnostic> {
    let is_name = |n: &str| {
        let mut chars = n.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for name in process.env.keys() {
        let secret = binding.secrets.iter().any(|s| secret_env_name(s) == *name);
        if !is_name(name) || HOST_ENV.contains(&name.as_str()) || secret {
            return Err(invalid(
                push_pointer(&format!("{base}/env"), name),
                "an env name is a variable name the host does not set (OS_*, PATH, TMPDIR) and no granted secret becomes",
                "rename it; give extra program directories as `path`",
            ));
        }
    }
    for (i, dir) in process.path.iter().enumerate() {
        if !dir.starts_with('/') || dir.contains(':') {
            return Err(invalid(
                format!("{base}/path/{i}"),
                "a path entry is an absolute directory without `:`",
                "write it like \"/home/me/.local/bin\"",
            ));
        }
    }
    if let Some(why) = process.cwd.and_then(|cwd| cwd_problem(cwd, state_dir)) {
        return Err(invalid(
            format!("{base}/cwd"),
            why,
            "give an absolute directory outside the daemon's state directory, such as \"/home/me/project\"",
        ));
    }
    Ok(())
}
