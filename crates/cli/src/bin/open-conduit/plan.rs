//! What a parsed `open-conduit` command line asks for: one [`Plan`] per command, planned by one
//! function per command family. Planning sends nothing.

use std::path::Path;

use conduit_cli::config_file;
use conduit_cli::connection::Request;
use conduit_cli::management as m;
use conduit_cli::render;
use conduit_cli::report::Human;
use serde_json::Value;

use crate::cli::{
    ApprovalsCommand, ArtifactsCommand, AuthCommand, Command, ConfigCommand, DaemonArgs, EventsCommand,
    ExecutionsCommand, OperatorsCommand, PackageCommand, RouteArgs, RunsCommand, ScopesCommand, SecretsCommand,
    ServiceCommand, StoreArg, WorkCommand,
};

/// What a parsed command line asks for.
#[derive(Debug)]
pub enum Plan {
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
    /// The terminal UI, until the operator quits it.
    Tui,
    /// A service unit written for the daemon.
    Service(ServiceCommand),
    /// Rotation: the request, then the new token written where the old one was read from.
    Rotate,
    /// The owner's credential reissued locally, under the state lock.
    Recover(StoreArg),
    /// Work waited for until it finishes: created first, or already there.
    Wait(Awaited),
    /// Events printed as they are accepted, until interrupted.
    Follow(m::EventQuery),
    /// A change to, or a list of, the state directory's `file:` secrets, made here.
    Secrets(SecretsCommand),
    /// A shell's completion script, printed.
    Completion(clap_complete::Shell),
    /// The manual: one page printed, or every command's written into a directory.
    Man(Option<std::path::PathBuf>),
}

/// The Work `--wait` or `work wait` waits for.
#[derive(Debug)]
pub enum Awaited {
    /// The Work this request creates.
    Created(Request),
    /// Work by its id.
    Existing(String),
}

/// What a command line asks for; `state_dir` (when it can be found) holds the playbooks an offline
/// check reads.
pub fn plan(command: Command, state_dir: Option<&Path>) -> Plan {
    match command {
        Command::Daemon(args) => Plan::Daemon(args),
        Command::Health => Plan::Call(m::health(), render::health),
        Command::Work(command) => work(command),
        Command::Emit(args) => Plan::Call(
            m::emit(
                &args.event_type,
                &args.scope,
                args.data,
                args.correlation_key,
                args.parent,
            ),
            render::id,
        ),
        Command::Act(args) => Plan::Call(
            m::invoke_action(&args.action, args.work, args.scope, args.correlation_key, args.data),
            render::woke,
        ),
        Command::Events(command) => events(command),
        Command::Auth(command) => auth(command),
        Command::Config(command) => config(command, state_dir),
        Command::Doctor => Plan::Doctor,
        Command::Tui => Plan::Tui,
        Command::Service(command) => Plan::Service(command),
        Command::Runs(command) => Plan::Runs(command),
        Command::Scopes { command } => match command {
            None | Some(ScopesCommand::List) => Plan::Call(m::scopes(), render::scope_table),
            Some(ScopesCommand::Reconcile { id }) => Plan::Call(m::reconcile_scope(&id), render::reconciled),
        },
        Command::Waits { work } => Plan::Call(m::waits(work.as_deref()), render::wait_table),
        Command::Artifacts(command) => artifacts(command),
        Command::Approvals(command) => approvals(command),
        Command::Packages(command) => package(command),
        Command::Tools { id: Some(id), .. } => Plan::Call(m::tool(&id), render::tool_detail),
        Command::Tools {
            id: None,
            scope,
            source,
        } => Plan::Call(m::list_tools(scope.as_deref(), source.as_deref()), render::tool_table),
        Command::Secrets(command) => Plan::Secrets(command),
        Command::Completion { shell } => Plan::Completion(shell),
        Command::Man { dir } => Plan::Man(dir),
        Command::Route(args) => route(args),
        Command::Audit {
            execution,
            work,
            operation,
            result,
            since,
            until,
            operators,
            operator,
        } => {
            if operators {
                return Plan::Call(
                    m::list_operator_actions(operator.as_deref()),
                    render::operator_action_table,
                );
            }
            let query = m::AuditQuery {
                execution: execution.as_deref(),
                work: work.as_deref(),
                operation: operation.as_deref(),
                result: result.as_deref(),
                since: since.as_deref(),
                until: until.as_deref(),
            };
            Plan::Call(m::list_audit(&query), render::audit_table)
        }
        Command::Executions(command) => executions(command),
    }
}

fn work(command: WorkCommand) -> Plan {
    match command {
        WorkCommand::Create {
            scope,
            binding,
            input,
            keys,
            grants,
            wait,
        } => {
            let create = m::create_work(&scope, &binding, m::NewWork { input, keys, grants });
            match wait {
                true => Plan::Wait(Awaited::Created(create)),
                false => Plan::Call(create, render::id),
            }
        }
        WorkCommand::Wait { id } => Plan::Wait(Awaited::Existing(id)),
        WorkCommand::List { scope, in_state } => {
            Plan::Call(m::list_work(scope.as_deref(), in_state.as_deref()), render::work_table)
        }
        WorkCommand::Get { id } => Plan::Call(m::get_work(&id), render::work_detail),
        WorkCommand::Retry { id } => Plan::Call(m::retry_work(&id), render::retried),
        WorkCommand::Cancel { id } => Plan::Call(m::cancel_work(&id), render::cancelled),
        WorkCommand::Hold { id } => Plan::Call(m::hold_work(&id, true), render::steered),
        WorkCommand::Release { id } => Plan::Call(m::hold_work(&id, false), render::steered),
        WorkCommand::Rebind { id, binding } => Plan::Call(m::rebind_work(&id, &binding), render::steered),
        WorkCommand::Attach { id, key } => Plan::Call(m::attach_key(&id, &key), render::steered),
        WorkCommand::Wake { id, event_type, data } => Plan::Call(m::wake_work(&id, &event_type, data), render::woke),
    }
}

fn events(command: EventsCommand) -> Plan {
    match command {
        EventsCommand::List {
            work,
            event_type,
            since,
            follow,
        } => {
            let query = m::EventQuery {
                work,
                event_type,
                since,
            };
            match follow {
                true => Plan::Follow(query),
                false => Plan::Call(m::list_events(&query, None), render::event_table),
            }
        }
        EventsCommand::Chain { id } => Plan::Call(m::event_chain(&id), render::event_chain),
    }
}

fn auth(command: AuthCommand) -> Plan {
    match command {
        AuthCommand::Rotate => Plan::Rotate,
        AuthCommand::Revoke { token_id } => Plan::Call(m::revoke(&token_id), render::revoked),
        AuthCommand::Operators { add: None } => Plan::Call(m::operators(), render::operator_table),
        AuthCommand::Operators {
            add: Some(OperatorsCommand::Add { name, role }),
        } => Plan::Call(m::add_operator(&name, role.as_deref()), render::issued),
        AuthCommand::Recover { store } => Plan::Recover(store),
    }
}

/// Plans a `config` command; an offline check reads playbooks from `state_dir`.
fn config(command: ConfigCommand, state_dir: Option<&Path>) -> Plan {
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

fn artifacts(command: ArtifactsCommand) -> Plan {
    match command {
        ArtifactsCommand::List { execution } => {
            Plan::Call(m::list_artifacts(execution.as_deref()), render::artifact_table)
        }
        ArtifactsCommand::Cat { id } => Plan::Cat(id),
    }
}

fn approvals(command: ApprovalsCommand) -> Plan {
    match command {
        ApprovalsCommand::List { in_state } => {
            Plan::Call(m::list_approvals(in_state.as_deref()), render::approval_table)
        }
        ApprovalsCommand::Show { id } => Plan::Call(m::approval(&id), render::approval_detail),
        ApprovalsCommand::Approve { id } => Plan::Call(m::approve(&id), render::decided),
        ApprovalsCommand::Deny { id, reason } => Plan::Call(m::deny(&id, &reason), render::decided),
    }
}

fn package(command: PackageCommand) -> Plan {
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

/// A trace when `--trace` names an event type, else the scope's samples.
fn route(args: RouteArgs) -> Plan {
    match args.trace {
        Some(event_type) => Plan::Call(
            m::route_trace(&args.scope, &event_type, args.correlation_key, args.work, args.data),
            render::route_trace,
        ),
        None => Plan::Call(m::route_samples(&args.scope), render::sample_table),
    }
}

fn executions(command: ExecutionsCommand) -> Plan {
    match command {
        ExecutionsCommand::List { work } => Plan::Call(m::list_executions(work.as_deref()), render::execution_table),
        ExecutionsCommand::Cancel { id } => Plan::Call(m::cancel_execution(&id), render::execution_cancelled),
        ExecutionsCommand::ConfirmStopped { id } => Plan::Call(m::confirm_stopped(&id), render::stop_confirmed),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::*;
    use crate::cli::Cli;

    fn request(args: &[&str]) -> Request {
        let cli = Cli::try_parse_from([&["open-conduit"], args].concat()).expect("parses");
        match plan(cli.command, None) {
            Plan::Call(request, _) | Plan::Validation(Ok(request)) => request,
            Plan::Daemon(args) => panic!("expected a request, got {args:?}"),
            Plan::Validation(Err(report)) => panic!("expected a request, got {report}"),
            Plan::Rotate
            | Plan::Recover(_)
            | Plan::Doctor
            | Plan::Tui
            | Plan::Service(_)
            | Plan::Runs(_)
            | Plan::Cat(_)
            | Plan::Secrets(_)
            | Plan::Wait(_)
            | Plan::Follow(_)
            | Plan::Completion(_)
            | Plan::Man(_) => {
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
        assert_eq!(report["diagnostics"][0]["code"], "config_unreadable");
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
}
