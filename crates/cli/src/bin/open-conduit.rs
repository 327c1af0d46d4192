//! `open-conduit`: runs the daemon, and drives it as its operator over the management socket.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use conduit_cli::connection::Request;
use conduit_cli::management::{self, Locations};
use conduit_cli::report::{Failure, Human, Reporter};
use conduit_cli::{artifacts, auth, config_file, daemon, doctor, render};
use serde_json::Value;

/// Run the Open Conduit daemon, and drive it as its operator.
///
/// Exit status: 0 ok, 1 refused by the daemon (the error code is printed), 2 usage error or
/// daemon unreachable.
#[derive(Debug, Parser)]
#[command(name = "open-conduit", version)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Global {
    /// Print the API's JSON on stdout instead of text; a refusal prints its error envelope
    #[arg(long, global = true)]
    json: bool,

    /// State directory [default: $XDG_STATE_HOME/open-conduit, else $HOME/.local/state/open-conduit]
    #[arg(long, global = true, env = "OPEN_CONDUIT_STATE", value_name = "DIR")]
    state: Option<PathBuf>,

    /// Management socket to dial [default: <state>/management.sock]
    #[arg(long, global = true, env = "OPEN_CONDUIT_ENDPOINT", value_name = "PATH")]
    endpoint: Option<PathBuf>,

    /// File holding the operator token [default: <state>/private/operator.token]
    #[arg(long, global = true, env = "OPEN_CONDUIT_TOKEN_FILE", value_name = "PATH")]
    token_file: Option<PathBuf>,

    /// Idempotency-Key for a mutation; give the same one to retry it safely [default: a fresh key]
    #[arg(long, global = true, value_name = "KEY")]
    idempotency_key: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon in the foreground; logs go to stderr, filtered by OPEN_CONDUIT_LOG (default info)
    Daemon(DaemonArgs),
    /// Check that the daemon is up, and show its version and configuration generation
    Health,
    /// Create, list, inspect, cancel, retry and wake Work
    #[command(subcommand)]
    Work(WorkCommand),
    /// Emit an event into a scope as the operator; prints the event's id
    Emit(EmitArgs),
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
    /// Unified run history: each Work from creation to outcome across its attempts
    #[command(subcommand)]
    Runs(RunsCommand),
    /// List scopes (tombstones included) with their parents and whether they are enabled
    Scopes,
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
    #[command(subcommand)]
    Package(PackageCommand),
    /// Trace how the router would handle an event now (nothing is accepted), or list a scope's samples
    Route(RouteArgs),
    /// List the toolbelt's call records: every call, called or rejected, with its result
    Audit {
        /// Only the calls of this execution
        #[arg(long, value_name = "ID")]
        execution: Option<String>,
    },
    /// List executions, the attempts at running Work; cancel one, or confirm a cancelled one stopped
    #[command(subcommand, alias = "execution")]
    Executions(ExecutionsCommand),
}

#[derive(Debug, Args)]
struct DaemonArgs {
    /// Configuration file to load
    #[arg(long, env = "OPEN_CONDUIT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Expire execution tokens after this long (at least 1m), rotating them while attempts run
    /// [default: tokens last until the attempt deadline]
    #[arg(long, env = "OPEN_CONDUIT_TOKEN_LIFETIME", value_name = "DURATION", value_parser = conduit_cli::daemon::parse_token_lifetime)]
    token_lifetime: Option<conduit_core::Duration>,
    /// Also serve the management API (same tokens and roles) on this loopback TCP address, for HTTP
    /// clients that cannot dial a Unix socket; only 127.0.0.1 or [::1] is accepted
    #[arg(long, env = "OPEN_CONDUIT_LISTEN", value_name = "ADDR:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// Serve OpenWOP's host-sample test seams (/v1/host/sample/...) on the --listen address, to
    /// authenticated operators only; for conformance runs, never for everyday use
    #[arg(long, env = "OPEN_CONDUIT_CONFORMANCE_SEAMS", requires = "listen", value_parser = clap::builder::BoolishValueParser::new())]
    conformance_seams: bool,
}

#[derive(Debug, Subcommand)]
enum RunsCommand {
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
    /// Print every attempt's log of one run, in order
    Log {
        /// The run's Work id
        work: String,
    },
}

#[derive(Debug, Subcommand)]
enum WorkCommand {
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

/// The states a Work can be in, as the API names them.
const WORK_STATES: [&str; 6] = ["ready", "running", "waiting", "succeeded", "failed", "cancelled"];

#[derive(Debug, Args)]
struct EmitArgs {
    /// Event type, a namespaced name such as demo.requested
    #[arg(value_name = "TYPE")]
    event_type: String,
    /// Scope the event is emitted into
    #[arg(long, value_name = "SCOPE")]
    scope: String,
    /// Event data, as JSON
    #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
    data: Option<Value>,
    /// Correlation key, routing the event to the Work that owns the key
    #[arg(long, value_name = "KEY")]
    correlation_key: Option<String>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["trace", "samples"])))]
struct RouteArgs {
    /// The event type (or the name of one of the scope's samples) to trace
    #[arg(long, value_name = "TYPE|SAMPLE")]
    trace: Option<String>,
    /// List the sample events the scope's routes offer
    #[arg(long)]
    samples: bool,
    /// The scope whose routes to trace
    #[arg(long, value_name = "S")]
    scope: String,
    /// The traced event's correlation key
    #[arg(long, value_name = "KEY", requires = "trace")]
    correlation_key: Option<String>,
    /// The Work the traced event is addressed to (as `work wake` would)
    #[arg(long, value_name = "ID", requires = "trace")]
    work: Option<String>,
    /// The traced event's data, as JSON
    #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse, requires = "trace")]
    data: Option<Value>,
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// List events in acceptance order
    List {
        /// Only events of this Work
        #[arg(long, value_name = "ID")]
        work: Option<String>,
    },
    /// Show the causal chain of an event, from its root down to the event
    Chain {
        /// The event's id
        id: String,
    },
}

#[derive(Debug, Subcommand)]
enum ArtifactsCommand {
    /// List artifacts: each execution's log and the files its declared outcome named (kept, with
    /// size, or refused, with the reason)
    List {
        /// Only the artifacts of this execution
        #[arg(long, value_name = "ID")]
        execution: Option<String>,
    },
    /// Print an artifact's content (`log:<execution id>` or `file:<execution id>:<index>`)
    Cat {
        #[arg(value_name = "ID")]
        id: String,
    },
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// List approvals (oldest first), optionally in one state
    List {
        /// pending, approved, denied, expired or used
        #[arg(long = "in-state", value_name = "STATE")]
        in_state: Option<String>,
    },
    /// Show one approval: the Work, the operation, the approvers, its state
    Show {
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Approve a pending call: its Work resumes and its repeated call goes through, once
    Approve {
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Deny a pending call: its Work resumes and its repeated call is refused with the reason
    Deny {
        #[arg(value_name = "ID")]
        id: String,
        /// Why, shown to the agent
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
enum PackageCommand {
    /// Install the package in DIR (its open-conduit.json): prints what it requires and the
    /// permissions it asks for; refused when the host's package grant set lacks a requirement
    Install {
        #[arg(value_name = "DIR")]
        dir: std::path::PathBuf,
    },
    /// List installed packages, each with its status under the current grant set
    List,
    /// Show one installed package
    Show {
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Remove an installed package
    Remove {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum AuthCommand {
    /// Replace your credential: the old one is revoked and the new one written to the token file
    Rotate,
    /// Revoke a credential by its token id (an execution token, yours, or as admin a named operator's)
    Revoke {
        #[arg(value_name = "TOKEN_ID")]
        token_id: String,
    },
    /// List the active operator credentials (names and roles, never tokens), or add one
    Operators {
        #[command(subcommand)]
        add: Option<OperatorsCommand>,
    },
    /// With the daemon stopped, issue the owner a new credential into <state>/private/operator.token
    Recover,
}

#[derive(Debug, Subcommand)]
enum OperatorsCommand {
    /// Issue a named operator's credential (admin only); prints its token this once
    Add {
        /// The operator's name: a lower-case letter, then up to 31 lower-case letters, digits or `-`
        #[arg(value_name = "NAME")]
        name: String,
        /// What the operator may do [default: view]
        #[arg(long, value_parser = ["view", "operate", "admin"])]
        role: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a configuration file offline, against this release; prints every diagnostic and
    /// exits 1 when any is an error
    Check {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Validate a configuration file through the running daemon, changing nothing
    Validate {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Apply a configuration file: the daemon saves it and publishes it as the next generation
    Apply {
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
enum ExecutionsCommand {
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

/// What a parsed command line asks for.
#[derive(Debug)]
enum Plan {
    Daemon(DaemonArgs),
    /// One management request, and how its answer reads as text.
    Call(Request, Human),
    /// An artifact's content: byte for byte, or inside the JSON envelope with `--json`.
    Cat(String),
    /// A run-history read, composed from several requests.
    Runs(RunsCommand),
    /// A validation, local or through the daemon: its report, and exit 1 when invalid.
    Validation(Result<Request, Value>),
    /// The doctor's checks, local and through the daemon.
    Doctor,
    /// Rotation: the request, then the new token written where the old one was read from.
    Rotate,
    /// The owner's credential reissued locally, under the state lock.
    Recover,
}

fn main() -> ExitCode {
    let Cli { global, command } = Cli::parse();
    let reporter = Reporter::operator(global.json);
    let locations = Locations {
        state: global.state,
        endpoint: global.endpoint,
        token_file: global.token_file,
        idempotency_key: global.idempotency_key,
    };
    match plan(command, locations.state_dir().ok().as_deref()) {
        Plan::Daemon(args) => reporter.finish_printed(run_daemon(&locations, args)),
        Plan::Call(request, human) => reporter.finish(locations.send_all(&request), human),
        Plan::Cat(id) if global.json => {
            reporter.finish(locations.send_all(&management::artifact_content(&id)), render::content)
        }
        Plan::Cat(id) => reporter.finish_printed(artifacts::cat(&locations, &id)),
        Plan::Runs(command) => {
            let (answer, human) = runs(&locations, command);
            reporter.finish(answer, human)
        }
        Plan::Validation(Ok(request)) => reporter.finish_validation(locations.send_all(&request), render::checked),
        Plan::Validation(Err(offline)) => reporter.finish_validation(Ok(offline), render::checked),
        Plan::Rotate => reporter.finish(auth::rotate(&locations), render::rotated),
        Plan::Doctor => reporter.finish_validation(Ok(doctor::report(&locations)), render::doctor),
        Plan::Recover => reporter.finish(auth::recover(&locations), render::recovered),
    }
}

fn approvals_plan(command: ApprovalsCommand) -> Plan {
    use management as m;
    match command {
        ApprovalsCommand::List { in_state } => {
            Plan::Call(m::list_approvals(in_state.as_deref()), render::approval_table)
        }
        ApprovalsCommand::Show { id } => Plan::Call(m::approval(&id), render::approval_detail),
        ApprovalsCommand::Approve { id } => Plan::Call(m::approve(&id), render::decided),
        ApprovalsCommand::Deny { id, reason } => Plan::Call(m::deny(&id, &reason), render::decided),
    }
}

fn package_plan(command: PackageCommand) -> Plan {
    use management as m;
    match command {
        PackageCommand::Install { dir } => {
            // The daemon reads the directory, so it gets an absolute path (relative to here).
            let dir = std::path::absolute(&dir).unwrap_or(dir);
            Plan::Call(m::install_package(&dir.to_string_lossy()), render::package_installed)
        }
        PackageCommand::List => Plan::Call(m::list_packages(), render::package_table),
        PackageCommand::Show { name } => Plan::Call(m::package(&name), render::package_detail),
        PackageCommand::Remove { name } => Plan::Call(m::remove_package(&name), render::package_removed),
    }
}

/// A `runs` command's answer and how it reads as text.
fn runs(locations: &Locations, command: RunsCommand) -> (Result<Value, Failure>, Human) {
    use conduit_cli::runs;
    let connection = match locations.connection() {
        Ok(connection) => connection,
        Err(failure) => return (Err(failure), render::content),
    };
    match command {
        RunsCommand::List { scope, in_state } => (
            runs::list(&connection, scope.as_deref(), in_state.as_deref()),
            render::run_table,
        ),
        RunsCommand::Get { work } => (runs::get(&connection, &work), render::run_detail),
        RunsCommand::Table => (runs::table(&connection), render::run_tally),
        RunsCommand::Log { work } => (runs::log(&connection, &work), render::content),
    }
}

/// What a command line asks for; `state_dir` (when it can be found) holds the playbooks an offline
/// check reads.
fn plan(command: Command, state_dir: Option<&std::path::Path>) -> Plan {
    use management as m;
    match command {
        Command::Daemon(args) => Plan::Daemon(args),
        Command::Health => Plan::Call(m::health(), render::health),
        Command::Work(WorkCommand::Create {
            scope,
            binding,
            input,
            keys,
        }) => Plan::Call(m::create_work(&scope, &binding, input, keys), render::id),
        Command::Work(WorkCommand::List { scope, in_state }) => {
            Plan::Call(m::list_work(scope.as_deref(), in_state.as_deref()), render::work_table)
        }
        Command::Work(WorkCommand::Get { id }) => Plan::Call(m::get_work(&id), render::work_detail),
        Command::Work(WorkCommand::Cancel { id }) => Plan::Call(m::cancel_work(&id), render::cancelled),
        Command::Work(WorkCommand::Retry { id }) => Plan::Call(m::retry_work(&id), render::retried),
        Command::Executions(ExecutionsCommand::Cancel { id }) => {
            Plan::Call(m::cancel_execution(&id), render::execution_cancelled)
        }
        Command::Executions(ExecutionsCommand::ConfirmStopped { id }) => {
            Plan::Call(m::confirm_stopped(&id), render::stop_confirmed)
        }
        Command::Work(WorkCommand::Wake { id, event_type, data }) => {
            Plan::Call(m::wake_work(&id, &event_type, data), render::woke)
        }
        Command::Emit(args) => Plan::Call(
            m::emit(&args.event_type, &args.scope, args.data, args.correlation_key),
            render::id,
        ),
        Command::Events(EventsCommand::List { work }) => {
            Plan::Call(m::list_events(work.as_deref()), render::event_table)
        }
        Command::Events(EventsCommand::Chain { id }) => Plan::Call(m::event_chain(&id), render::event_chain),
        Command::Executions(ExecutionsCommand::List { work }) => {
            Plan::Call(m::list_executions(work.as_deref()), render::execution_table)
        }
        Command::Config(command) => plan_config(command, state_dir),
        Command::Artifacts(ArtifactsCommand::List { execution }) => {
            Plan::Call(m::list_artifacts(execution.as_deref()), render::artifact_table)
        }
        Command::Artifacts(ArtifactsCommand::Cat { id }) => Plan::Cat(id),
        Command::Package(command) => package_plan(command),
        Command::Approvals(command) => approvals_plan(command),
        Command::Scopes => Plan::Call(m::scopes(), render::scope_table),
        Command::Doctor => Plan::Doctor,
        Command::Runs(command) => Plan::Runs(command),
        Command::Waits { work } => Plan::Call(m::waits(work.as_deref()), render::wait_table),
        Command::Auth(AuthCommand::Rotate) => Plan::Rotate,
        Command::Auth(AuthCommand::Recover) => Plan::Recover,
        Command::Auth(AuthCommand::Revoke { token_id }) => Plan::Call(m::revoke(&token_id), render::revoked),
        Command::Auth(AuthCommand::Operators { add: None }) => Plan::Call(m::operators(), render::operator_table),
        Command::Auth(AuthCommand::Operators {
            add: Some(OperatorsCommand::Add { name, role }),
        }) => Plan::Call(m::add_operator(&name, role.as_deref()), render::issued),
        Command::Route(args) => match args.trace {
            Some(event_type) => Plan::Call(
                m::route_trace(&args.scope, &event_type, args.correlation_key, args.work, args.data),
                render::route_trace,
            ),
            None => Plan::Call(m::route_samples(&args.scope), render::sample_table),
        },
        Command::Audit { execution } => Plan::Call(m::list_audit(execution.as_deref()), render::audit_table),
    }
}

/// Plans a `config` command; an offline check reads playbooks from `state_dir`.
fn plan_config(command: ConfigCommand, state_dir: Option<&std::path::Path>) -> Plan {
    use management as m;
    match command {
        ConfigCommand::Check { file } => Plan::Validation(Err(config_file::check_offline(&file, state_dir))),
        ConfigCommand::Validate { file } => Plan::Validation(config_file::read(&file).map(m::config_validate)),
        ConfigCommand::Apply {
            file,
            expected_generation,
        } => match config_file::read(&file) {
            Ok(text) => Plan::Call(m::config_apply(text, expected_generation), render::applied),
            Err(report) => Plan::Validation(Err(report)),
        },
        ConfigCommand::Show => Plan::Call(m::config_show(), render::config_view),
        ConfigCommand::Set {
            pointer,
            value,
            expected_generation,
        } => Plan::Call(m::config_set(&pointer, value, expected_generation), render::applied),
    }
}

/// Runs the daemon with the options its flags and the state directory give.
fn run_daemon(locations: &Locations, args: DaemonArgs) -> Result<(), Failure> {
    daemon::run(conduit_daemon::DaemonOptions {
        state_dir: locations.state_dir()?,
        config_file: args.config,
        os_dir: None,
        token_lifetime: args.token_lifetime,
        listen: args.listen,
        conformance_seams: args.conformance_seams,
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use serde_json::json;

    use super::*;

    fn request(args: &[&str]) -> Request {
        let cli = Cli::try_parse_from([&["open-conduit"], args].concat()).expect("parses");
        match plan(cli.command, None) {
            Plan::Call(request, _) | Plan::Validation(Ok(request)) => request,
            Plan::Daemon(args) => panic!("expected a request, got {args:?}"),
            Plan::Validation(Err(report)) => panic!("expected a request, got {report}"),
            Plan::Rotate | Plan::Recover | Plan::Doctor | Plan::Runs(_) | Plan::Cat(_) => {
                panic!("expected a request, got a local step")
            }
        }
    }

    #[test]
    fn config_commands_map_to_requests() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "{\"version\": 1}").unwrap();
        let path = file.path().to_str().unwrap();
        let text = json!({"config_text": "{\"version\": 1}"});
        assert_eq!(
            request(&["config", "validate", path]),
            Request::Post {
                path: "/v1/config/validate".into(),
                body: text
            }
        );
        let apply = request(&["config", "apply", path, "--expected-generation", "3"]);
        let body = json!({"config_text": "{\"version\": 1}", "expected_generation": 3});
        assert_eq!(
            apply,
            Request::Post {
                path: "/v1/config/apply".into(),
                body
            }
        );
        let set = request(&["config", "set", "/scopes/setup/enabled", "false"]);
        let body = json!({"pointer": "/scopes/setup/enabled", "value": false});
        assert_eq!(
            set,
            Request::Post {
                path: "/v1/config/set".into(),
                body
            }
        );
        assert_eq!(request(&["config", "show"]), Request::Get("/v1/config".into()));
    }

    #[test]
    fn an_offline_check_reports_without_a_daemon() {
        let cli = Cli::try_parse_from(["open-conduit", "config", "check", "/no/such/file"]).unwrap();
        let Plan::Validation(Err(report)) = plan(cli.command, None) else {
            panic!("an offline report")
        };
        assert_eq!(report["valid"], false);
        assert_eq!(report["diagnostics"][0]["code"], "unreadable_file");
    }

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn arguments_map_to_requests() {
        let get = |path: &str| Request::Get(path.to_owned());
        assert_eq!(request(&["health"]), get("/v1/health"));
        assert_eq!(
            request(&["work", "list", "--json", "--scope", "setup", "--in-state", "ready"]),
            get("/v1/work?scope=setup&state=ready")
        );
        assert_eq!(request(&["events", "chain", "e/1"]), get("/v1/events/e%2F1/chain"));
        assert_eq!(
            request(&[
                "work",
                "create",
                "--scope",
                "s",
                "--binding",
                "b",
                "--key",
                "k1",
                "--key",
                "k2"
            ]),
            Request::Post {
                path: "/v1/work".into(),
                body: json!({"scope": "s", "binding": "b", "keys": ["k1", "k2"]}),
            }
        );
        assert_eq!(
            request(&["emit", "demo.hello", "--scope", "s", "--data", "{\"a\":1}"]),
            Request::Post {
                path: "/v1/events".into(),
                body: json!({"type": "demo.hello", "scope": "s", "data": {"a": 1}}),
            }
        );
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
