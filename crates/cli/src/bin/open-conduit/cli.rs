//! `open-conduit`'s command line: the clap definitions, whose doc comments are its help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde_json::Value;

/// The heading the options every command takes are listed under, once.
const GLOBAL: &str = "Global options";

/// The states a Work can be in, as the API names them.
const WORK_STATES: [&str; 6] = ["ready", "running", "waiting", "succeeded", "failed", "cancelled"];

/// Run the Open Conduit daemon, and drive it as its operator.
///
/// Exit status: 0 ok, 1 refused by the daemon (the error code is printed), 2 usage error or
/// daemon unreachable.
#[derive(Debug, Parser)]
#[command(name = "open-conduit", version)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Print the API's JSON on stdout instead of text; a refusal prints its error envelope
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,

    /// State directory [default: $XDG_STATE_HOME/open-conduit, else $HOME/.local/state/open-conduit]
    #[arg(long, global = true, help_heading = GLOBAL, env = "OPEN_CONDUIT_STATE", value_name = "DIR")]
    pub state: Option<PathBuf>,

    /// Management socket to dial [default: <state>/management.sock]
    #[arg(long, global = true, help_heading = GLOBAL, env = "OPEN_CONDUIT_ENDPOINT", value_name = "PATH")]
    pub endpoint: Option<PathBuf>,

    /// File holding the operator token [default: <state>/private/operator.token]
    #[arg(long, global = true, help_heading = GLOBAL, env = "OPEN_CONDUIT_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<PathBuf>,

    /// Idempotency-Key for a mutation; give the same one to retry it safely [default: a fresh key]
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "KEY")]
    pub idempotency_key: Option<String>,

    /// For a list: show at most N items, from its start [default: all]
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground; logs go to stderr, filtered by OPEN_CONDUIT_LOG (default info)
    Daemon(DaemonArgs),
    /// Check that the daemon is up, and show its version and configuration generation
    Health,
    /// Create, list, inspect, cancel, retry and wake Work
    #[command(subcommand)]
    Work(WorkCommand),
    /// Emit an event into a scope as the operator; prints the event's id
    Emit(EmitArgs),
    /// Invoke an action on a Work (its own key: a wait for the action wakes it) or in a scope, as
    /// the operator; prints the core.action event's id
    Act(ActArgs),
    /// List events and trace what caused them
    #[command(subcommand)]
    Events(EventsCommand),
    /// Operator credentials: rotate yours, revoke any by token id, add named operators, recover the owner's
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Check, validate, apply, show and edit the configuration
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check the state directory, the daemon and the configuration; works offline too
    Doctor,
    /// Run the daemon as a service: write a systemd user unit for it
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Watch and steer the daemon in a terminal UI: Work and its log, calls waiting for approval
    /// with their exact input (approve or deny with one key), events as a causal tree, doctor's
    /// findings; `?` lists the keys
    Tui,
    /// Unified run history: each Work from creation to outcome across its attempts
    #[command(subcommand)]
    Runs(RunsCommand),
    /// List scopes (tombstones included) with their parents and whether they are enabled, or
    /// reconcile one's unfinished Work with the active configuration
    Scopes {
        #[command(subcommand)]
        command: Option<ScopesCommand>,
    },
    /// List waits in every state
    Waits {
        /// Only the waits of this Work
        #[arg(long, value_name = "ID")]
        work: Option<String>,
    },
    /// List what executions left behind (their logs and declared files), or print one
    #[command(subcommand)]
    Artifacts(ArtifactsCommand),
    /// List, show and decide human approvals of parked calls
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Install, list, show or remove extension packages (admin to change them)
    #[command(subcommand, alias = "package")]
    Packages(PackageCommand),
    /// Store, list and remove the `file:` secrets of <state>/private/secrets.json (owner-only),
    /// which the configuration references as `file:NAME`; works with the daemon stopped too
    #[command(subcommand)]
    Secrets(SecretsCommand),
    /// List the registered operations (the tool catalog), or show one's descriptor
    Tools {
        /// An operation's toolId, such as emit or github.issue.view
        #[arg(value_name = "ID")]
        id: Option<String>,
        /// Only the operations this scope's ceiling allows
        #[arg(long, value_name = "SCOPE", conflicts_with = "id")]
        scope: Option<String>,
        /// Only the operations of this source: host-extension, node-pack or mcp
        #[arg(long, value_name = "SOURCE", conflicts_with = "id")]
        source: Option<String>,
    },
    /// Print a shell's completion script for open-conduit, e.g. `open-conduit completion bash >
    /// ~/.local/share/bash-completion/completions/open-conduit`
    Completion {
        /// The shell to complete in
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print open-conduit's manual page (roff), or with --dir write one page per command there
    Man {
        /// Write open-conduit.1 and a page per command into this directory instead
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Trace how the router would handle an event now (nothing is accepted), or list a scope's samples
    Route(RouteArgs),
    /// List the toolbelt's call records (every call, called or rejected, with its result), or with
    /// --operators what operators changed
    Audit {
        /// Only the calls of this execution
        #[arg(long, value_name = "ID")]
        execution: Option<String>,
        /// Only the calls made for this Work
        #[arg(long, value_name = "ID")]
        work: Option<String>,
        /// Only the calls of this operation
        #[arg(long, value_name = "NAME")]
        operation: Option<String>,
        /// Only the calls with this result: ok, replayed, or a refusal's code
        #[arg(long, value_name = "RESULT")]
        result: Option<String>,
        /// Only the calls recorded at or after this RFC 3339 time (2026-12-01T16:00:00Z)
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only the calls recorded before this RFC 3339 time
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// List what operators changed instead: every change made through the API, and who made it
        #[arg(long, conflicts_with_all = ["execution", "work", "operation", "result", "since", "until"])]
        operators: bool,
        /// With --operators: only what this operator changed (`local` is the owner)
        #[arg(long, value_name = "NAME", requires = "operators")]
        operator: Option<String>,
    },
    /// List executions, the attempts at running Work; cancel one, or confirm a cancelled one stopped
    #[command(subcommand, alias = "execution")]
    Executions(ExecutionsCommand),
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Configuration file to load
    #[arg(long, env = "OPEN_CONDUIT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Expire execution tokens after this long (at least 1m), rotating them while attempts run
    /// [default: tokens last until the attempt deadline]
    #[arg(long, env = "OPEN_CONDUIT_TOKEN_LIFETIME", value_name = "DURATION", value_parser = conduit_cli::daemon::parse_token_lifetime)]
    pub token_lifetime: Option<conduit_core::Duration>,
    /// How long an attempt's lease lasts unrenewed (at least 10s; renewed every third of it). On a
    /// shared store, how long another daemon waits before taking over the attempts of a daemon
    /// that stopped renewing them [default: 30s]
    #[arg(long, env = "OPEN_CONDUIT_LEASE", value_name = "DURATION", value_parser = conduit_cli::daemon::parse_lease)]
    pub lease: Option<conduit_core::Duration>,
    /// Also serve the management API (same tokens and roles) on this loopback TCP address, for HTTP
    /// clients that cannot dial a Unix socket; only 127.0.0.1 or [::1] is accepted
    #[arg(long, env = "OPEN_CONDUIT_LISTEN", value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// Serve OpenWOP's host-sample test seams (/v1/host/sample/...) on the --listen address, to
    /// authenticated operators only; for conformance runs, never for everyday use
    #[arg(long, env = "OPEN_CONDUIT_CONFORMANCE_SEAMS", requires = "listen", value_parser = clap::builder::BoolishValueParser::new())]
    pub conformance_seams: bool,
    #[command(flatten)]
    pub store: StoreArg,
}

#[derive(Args)]
pub struct StoreArg {
    /// The store: `sqlite:` (the embedded <state>/store.db) or a postgres:// URL several daemons
    /// share, each with its own --state directory; pass a URL with a password through the
    /// environment, not the command line, which other users can read [default: sqlite:]
    // Read as text and parsed by `main`, so that a mistyped URL (and its password) is never echoed.
    #[arg(
        long = "store",
        env = "OPEN_CONDUIT_STORE",
        value_name = "URL",
        default_value = "sqlite:",
        hide_default_value = true,
        hide_env_values = true
    )]
    pub url: String,
    /// A postgres:// store's password, as a secret reference: keyring:<service>/<account>,
    /// file:<key> (of <state>/private/secrets.json), env:<NAME> or cmd:<command>
    #[arg(
        long = "store-password",
        env = "OPEN_CONDUIT_STORE_PASSWORD",
        value_name = "REFERENCE",
        hide_env_values = true
    )]
    pub password: Option<String>,
    /// A postgres:// store's certificate authority (PEM): the server's certificate must chain to
    /// it [default: the public roots]. A store on another host is reached only over TLS
    #[arg(long = "store-ca", env = "OPEN_CONDUIT_STORE_CA", value_name = "FILE")]
    pub ca: Option<PathBuf>,
}

/// Never the URL itself: it may carry a password.
impl std::fmt::Debug for StoreArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreArg(..)")
    }
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first, with their attempts and latest execution
    List {
        /// Only runs in this scope
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
        /// Only runs in this state
        #[arg(long, value_name = "STATE", value_parser = WORK_STATES)]
        in_state: Option<String>,
    },
    /// Show one run: its Work, every attempt and every event
    Get {
        /// The run's Work id
        work: String,
    },
    /// Count runs per scope and binding: how they ended and the attempts they took
    Table,
    /// Print a line each time a run changes state, until interrupted (with --json, the Work as
    /// one JSON line)
    Watch {
        /// Only runs in this scope
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
    },
    /// Print every attempt's log of one run, in order
    Log {
        /// The run's Work id
        work: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScopesCommand {
    /// List scopes (the default)
    List,
    /// Hold the scope's ready and waiting Work whose binding the active configuration no longer
    /// has (rebind it to release it), and report Work whose grants its binding no longer offers
    Reconcile {
        /// The scope's id
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum WorkCommand {
    /// Create Work in a scope, to be run by one of its bindings; prints the Work's id
    Create {
        /// Scope the Work belongs to
        #[arg(long, value_name = "SCOPE")]
        scope: String,
        /// Binding (within the scope) that runs the Work
        #[arg(long, value_name = "BINDING")]
        binding: String,
        /// Input handed to the Work, as JSON
        #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
        input: Option<Value>,
        /// Correlation key the Work owns (repeatable)
        #[arg(long = "key", value_name = "KEY")]
        keys: Vec<String>,
        /// A binding grant the Work takes: its operations join the Work's tokens (repeatable)
        #[arg(long = "grant", value_name = "NAME")]
        grants: Vec<String>,
        /// Wait until the Work finishes (its states shown on stderr) and exit with its outcome:
        /// 0 succeeded, 1 failed or cancelled
        #[arg(long)]
        wait: bool,
    },
    /// Wait until Work finishes (its states shown on stderr) and exit with its outcome: 0
    /// succeeded, 1 failed or cancelled
    Wait {
        /// The Work's id
        id: String,
    },
    /// List Work, newest first
    List {
        /// Only Work in this scope
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
        /// Only Work in this state
        #[arg(long, value_name = "STATE", value_parser = WORK_STATES)]
        in_state: Option<String>,
    },
    /// Show one Work
    Get {
        /// The Work's id
        id: String,
    },
    /// Retry Work that is held (its attempt cancelled) or failed: a new attempt starts
    Retry {
        /// The Work's id
        id: String,
    },
    /// Cancel unfinished Work: its running attempt is fenced at once and stopped
    Cancel {
        /// The Work's id
        id: String,
    },
    /// Hold unfinished Work: it is not claimed again until released (a running attempt goes on)
    Hold {
        /// The Work's id
        id: String,
    },
    /// Release Work held with `work hold`, so it is claimed again when ready
    Release {
        /// The Work's id
        id: String,
    },
    /// Rebind Work that is not running: another binding of its scope runs its next attempt
    Rebind {
        /// The Work's id
        id: String,
        /// The binding (within the Work's scope) to run it from now on
        #[arg(long, value_name = "BINDING")]
        binding: String,
    },
    /// Attach a correlation key to unfinished Work: events on the key route to it and wake it
    Attach {
        /// The Work's id
        id: String,
        /// The key, such as github:owner/repo#12; no other Work may own it
        #[arg(long, value_name = "KEY")]
        key: String,
    },
    /// Emit an event on the Work's own key; reports whether it woke the Work from a wait
    Wake {
        /// The Work's id
        id: String,
        /// Event type, a namespaced name such as demo.go
        #[arg(long = "type", value_name = "TYPE")]
        event_type: String,
        /// Event data, as JSON
        #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
        data: Option<Value>,
    },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["work", "scope"])))]
pub struct ActArgs {
    /// The action, a namespaced name such as deploy.approve
    #[arg(value_name = "ACTION")]
    pub action: String,
    /// The Work to invoke it on
    #[arg(long, value_name = "ID")]
    pub work: Option<String>,
    /// The scope to invoke it in (instead of on a Work)
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<String>,
    /// With --scope: the correlation key to invoke it on
    #[arg(long, value_name = "KEY", requires = "scope")]
    pub correlation_key: Option<String>,
    /// The action's data, as JSON
    #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
    pub data: Option<Value>,
}

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// Event type, a namespaced name such as demo.requested
    #[arg(value_name = "TYPE")]
    pub event_type: String,
    /// Scope the event is emitted into
    #[arg(long, value_name = "SCOPE")]
    pub scope: String,
    /// Event data, as JSON
    #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
    pub data: Option<Value>,
    /// Correlation key, routing the event to the Work that owns the key
    #[arg(long, value_name = "KEY")]
    pub correlation_key: Option<String>,
    /// An event of the same scope this one follows from (its causal chain continues from it)
    #[arg(long, value_name = "EVENT")]
    pub parent: Option<String>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["trace", "samples"])))]
pub struct RouteArgs {
    /// The event type (or the name of one of the scope's samples) to trace
    #[arg(long, value_name = "TYPE|SAMPLE")]
    pub trace: Option<String>,
    /// List the sample events the scope's routes offer
    #[arg(long)]
    pub samples: bool,
    /// The scope whose routes to trace
    #[arg(long, value_name = "S")]
    pub scope: String,
    /// The traced event's correlation key
    #[arg(long, value_name = "KEY", requires = "trace")]
    pub correlation_key: Option<String>,
    /// The Work the traced event is addressed to (as `work wake` would)
    #[arg(long, value_name = "ID", requires = "trace")]
    pub work: Option<String>,
    /// The traced event's data, as JSON
    #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse, requires = "trace")]
    pub data: Option<Value>,
}

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// List events in acceptance order, or with --follow keep printing them as they are accepted
    List {
        /// Only events of this Work
        #[arg(long, value_name = "ID")]
        work: Option<String>,
        /// Only events of this type, such as core.work.created
        #[arg(long = "type", value_name = "TYPE")]
        event_type: Option<String>,
        /// Only events accepted at or after this RFC 3339 time (2026-12-01T16:00:00Z)
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Keep printing events as they are accepted, until interrupted (with --json, one event
        /// per line)
        #[arg(long, short = 'f', conflicts_with = "limit")]
        follow: bool,
    },
    /// Show the causal chain of an event, from its root down to the event
    Chain {
        /// The event's id
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ArtifactsCommand {
    /// List artifacts: each execution's log and the files its declared outcome named (kept, with
    /// size, or refused, with the reason)
    List {
        /// Only the artifacts of this execution
        #[arg(long, value_name = "ID")]
        execution: Option<String>,
    },
    /// Print an artifact's content (`log:<execution id>` or `file:<execution id>:<index>`)
    Cat {
        /// The artifact's id, as `artifacts list` prints it
        #[arg(value_name = "ID")]
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List approvals (oldest first), optionally in one state
    List {
        /// pending, approved, denied, expired or used
        #[arg(long = "in-state", value_name = "STATE")]
        in_state: Option<String>,
    },
    /// Show one approval: the Work, the operation, the approvers, its state
    Show {
        /// The approval's id
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Approve a pending call: its Work resumes and its repeated call goes through, once
    Approve {
        /// The approval's id
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Deny a pending call: its Work resumes and its repeated call is refused with the reason
    Deny {
        /// The approval's id
        #[arg(value_name = "ID")]
        id: String,
        /// Why, shown to the agent
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PackageCommand {
    /// Install the package in DIR (its open-conduit.json): prints what it requires and the
    /// permissions it asks for; refused when the host's package grant set lacks a requirement
    Install {
        /// The package's directory, holding its open-conduit.json
        #[arg(value_name = "DIR")]
        dir: std::path::PathBuf,
    },
    /// List installed packages, each with its status under the current grant set
    List,
    /// Show one installed package
    Show {
        /// The package's name
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Remove an installed package
    Remove {
        /// The package's name
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Store a secret's value, read from stdin (typed without echo at a terminal, else the whole
    /// input less one trailing newline): `printf %s "$TOKEN" | open-conduit secrets set github_token`
    Set {
        /// The secret's name, referenced in the configuration as `file:NAME`
        #[arg(value_name = "NAME")]
        name: String,
        /// Store it in the system keyring instead (the Secret Service, else the kernel's
        /// keyring), referenced as `keyring:open-conduit/NAME`
        #[arg(long)]
        keyring: bool,
    },
    /// List the stored secrets' names (never their values)
    List,
    /// Remove a stored secret
    Rm {
        /// The secret's name
        #[arg(value_name = "NAME")]
        name: String,
        /// Remove `keyring:open-conduit/NAME` from the system keyring instead
        #[arg(long)]
        keyring: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write ~/.config/systemd/user/open-conduit.service ($XDG_CONFIG_HOME honoured), running
    /// this program's daemon on the state directory, and print it with the commands that start it
    Install {
        /// A user unit (the only kind: the daemon runs as the user whose agents it runs)
        #[arg(long, required = true)]
        user: bool,
        /// The configuration file the daemon starts with (made absolute)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Replace a unit that already exists with other settings
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Replace your credential: the old one is revoked and the new one written to the token file
    Rotate,
    /// Revoke a credential by its token id (an execution token, yours, or as admin a named operator's)
    Revoke {
        /// The credential's token id (`auth operators` lists operators'; never the token itself)
        #[arg(value_name = "TOKEN_ID")]
        token_id: String,
    },
    /// List every operator credential (names, roles, revocations; never tokens), or add one
    Operators {
        #[command(subcommand)]
        add: Option<OperatorsCommand>,
    },
    /// With the daemon stopped, issue the owner a new credential into <state>/private/operator.token
    Recover {
        #[command(flatten)]
        store: StoreArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum OperatorsCommand {
    /// Issue a named operator's credential (admin only); prints its token this once
    Add {
        /// The operator's name: a lower-case letter, then up to 31 lower-case letters, digits or `-`
        #[arg(value_name = "NAME")]
        name: String,
        /// What the operator may do [default: view]
        #[arg(long, value_name = "ROLE", value_parser = ["view", "operate", "admin"])]
        role: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file offline, against this release; prints every diagnostic and
    /// exits 1 when any is an error
    Check {
        /// The configuration file
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Validate a configuration file through the running daemon, changing nothing
    Validate {
        /// The configuration file
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Apply a configuration file: the daemon saves it and publishes it as the next generation
    Apply {
        /// The configuration file
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Refuse (409 stale_generation) unless this generation is still the active one
        #[arg(long, value_name = "N")]
        expected_generation: Option<i64>,
    },
    /// Show the active configuration, with secret references redacted
    Show,
    /// Set one value of the active configuration and apply it, e.g. `config set /scopes/setup/enabled false`
    Set {
        /// JSON pointer of the value to set (its parent must exist; `/-` appends to an array)
        #[arg(value_name = "POINTER")]
        pointer: String,
        /// The new value, as JSON
        #[arg(value_name = "JSON", value_parser = conduit_cli::json::parse)]
        value: Value,
        /// Refuse (409 stale_generation) unless this generation is still the active one
        #[arg(long, value_name = "N")]
        expected_generation: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ExecutionsCommand {
    /// List executions, oldest first
    List {
        /// Only executions of this Work
        #[arg(long, value_name = "ID")]
        work: Option<String>,
    },
    /// Cancel a running attempt: it is fenced and stopped, and its Work held until `work retry`
    Cancel {
        /// The execution's id
        id: String,
    },
    /// Confirm that a cancelled attempt's process is gone when the daemon could not see it end
    /// (e.g. an earlier daemon started it), so its Work may be retried
    ConfirmStopped {
        /// The execution's id
        id: String,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::help_check;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_matches_its_snapshot() {
        help_check::assert_help_snapshot(Cli::command(), "open-conduit-help.txt");
    }

    #[test]
    fn every_argument_says_what_it_is() {
        let missing = help_check::undocumented(&Cli::command());
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn global_flags_go_before_or_after_the_subcommand() {
        for args in [
            ["open-conduit", "--json", "--state", "/s", "health"],
            ["open-conduit", "health", "--state", "/s", "--json"],
        ] {
            let cli = Cli::try_parse_from(args).expect("parses");
            assert!(cli.global.json);
            assert_eq!(cli.global.state, Some(PathBuf::from("/s")));
        }
    }

    #[test]
    fn invalid_json_and_unknown_states_are_usage_errors() {
        for args in [
            &[
                "open-conduit",
                "work",
                "create",
                "--scope",
                "s",
                "--binding",
                "b",
                "--input",
                "{",
            ][..],
            &["open-conduit", "emit", "t", "--scope", "s", "--data", "nope"],
            &["open-conduit", "work", "list", "--in-state", "sleeping"],
        ] {
            let error = Cli::try_parse_from(args).expect_err("usage error");
            assert_eq!(error.exit_code(), 2, "{error}");
        }
    }
}
