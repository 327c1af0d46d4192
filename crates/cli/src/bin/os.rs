//! `os`: an execution's client for its toolbelt, the socket through which it asks the host for
//! outcomes.

#![forbid(unsafe_code)]

use std::io::Read;
use std::process::ExitCode;

#[cfg(test)]
#[path = "common/help_check.rs"]
mod help_check;

use clap::{Args, Parser, Subcommand, ValueEnum};
use conduit_cli::connection::{Connection, Request};
use conduit_cli::git_credential;
use conduit_cli::github_hold::{Held, Hold, Until};
use conduit_cli::render;
use conduit_cli::report::{Failure, Human, Reporter};
use conduit_cli::toolbelt;
use serde_json::{json, Value};

/// Ask the Open Conduit host for outcomes from inside an execution.
///
/// os runs inside an Open Conduit execution: it dials the toolbelt socket named by OS_ENDPOINT and
/// authenticates with the token in the file named by OS_TOKEN_FILE, re-read on every call. A
/// socket nothing answers at (the daemon restarting) is dialled again for up to 30 seconds.
///
/// Exit status: 0 ok, 1 refused by the host (stderr's first line is `<code>: <message>`),
/// 2 usage error, missing environment or toolbelt unreachable, 3 the segment now waits: a gate
/// parked the call (such as a person's approval; make the same call again when resumed) or the
/// operation declared a wait (`github.pr.wait_review`; its output is on stdout). End the segment.
#[derive(Debug, Parser)]
#[command(name = "os", version)]
struct Cli {
    /// Print the whole response JSON on stdout; a refusal prints its error envelope
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Emit an event from this execution; prints the event's id
    Emit {
        /// Event type, a namespaced name such as demo.hello
        #[arg(value_name = "TYPE")]
        event_type: String,
        /// Event data, as JSON
        #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
        data: Option<Value>,
        /// Correlation key, routing the event to the Work that owns the key
        #[arg(long, value_name = "KEY")]
        correlation_key: Option<String>,
        #[command(flatten)]
        request_id: RequestId,
    },
    /// Declare this execution's outcome, which replaces the one its exit status would give
    Outcome {
        /// The outcome
        status: Status,
        /// A short summary of what happened
        #[arg(long, value_name = "TEXT")]
        summary: Option<String>,
        /// A file in the working directory for the host to keep as an artifact once this
        /// execution ends (repeatable; a relative path, no `..`, no symbolic links)
        #[arg(long = "artifact", value_name = "PATH")]
        artifacts: Vec<String>,
    },
    /// Print this execution's context (scope, Work, execution, wake reason, operations) as JSON
    Context,
    /// Print the input this execution's Work was created with, as JSON
    Input,
    /// Declare a wait: when this execution ends, its Work sleeps until a matching event or the timeout
    Wait {
        /// Event type to wake on (repeatable; at least one)
        #[arg(long = "for", value_name = "TYPE", required = true)]
        types: Vec<String>,
        /// Only events with this correlation key (repeatable)
        #[arg(long = "key", value_name = "KEY")]
        keys: Vec<String>,
        /// Give up waiting after this long, such as 30s or 10m
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// A file in the working directory for the host to keep as an artifact once this
        /// execution parks (repeatable; a relative path, no `..`, no symbolic links)
        #[arg(long = "artifact", value_name = "PATH")]
        artifacts: Vec<String>,
    },
    /// Create child Work in this execution's scope; prints the Work's id
    CreateWork {
        /// Binding that runs the Work
        #[arg(long, value_name = "BINDING")]
        binding: String,
        /// Input handed to the Work, as JSON
        #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
        input: Option<Value>,
        /// Correlation key the Work owns (repeatable)
        #[arg(long = "key", value_name = "KEY")]
        keys: Vec<String>,
        #[command(flatten)]
        request_id: RequestId,
    },
    /// Call any toolbelt operation by name; prints its output as JSON
    Call {
        /// Operation name, such as emit or http.fetch
        operation: String,
        /// The operation's input, as JSON [default: {}]
        #[arg(long, value_name = "JSON", value_parser = conduit_cli::json::parse)]
        input: Option<Value>,
        /// The open tool session (of this operation) the call belongs to
        #[arg(long, value_name = "SESSION_ID")]
        session: Option<String>,
        #[command(flatten)]
        request_id: RequestId,
    },
    /// Open or close a tool session: calls of one operation bracketed on the Work's log
    #[command(subcommand)]
    Session(SessionCommand),
    /// Print the toolbelt's guidance and the operations this execution may call
    Guidance,
    /// List the tools this execution may call (its RFC 0078 catalog), or show one tool's descriptor
    Tools {
        /// A tool's id (its operation name) to show whole
        id: Option<String>,
    },
    /// Serve this execution's toolbelt as an MCP server on stdin/stdout, for an MCP client such as
    /// Claude Code or Codex to mount; runs until the client disconnects
    ///
    /// tools/list is the execution's catalog; tools/call is a toolbelt call (a refusal is a tool
    /// error starting with its code); the instructions are the binding's playbook, else the
    /// toolbelt's guidance. A tool's calls share one tool session, closed when the client leaves.
    Mcp,
    /// A git credential helper: `git config credential.helper '!os git-credential'`
    ///
    /// `get` reads git's request (protocol, host, path) on stdin, asks the toolbelt which granted
    /// operation serves `git.credential`, and prints `username=` and `password=` when it has a
    /// credential for that host, nothing otherwise. `store` and `erase` keep nothing: the host owns
    /// the credential.
    GitCredential {
        /// What git asks of its helper
        action: CredentialAction,
    },
    /// Hold this execution's Work until a GitHub pull request's condition holds (the
    /// `github-hold` executor runs this)
    ///
    /// Declares the outcome when the condition holds (exit 0); otherwise declares a wait on the
    /// pull request's GitHub events and exits 3, to run again when one arrives. After a wait times
    /// out, an `approved` hold looks once more and a `checks` hold fails.
    GithubHold {
        /// The condition
        #[arg(long, value_enum)]
        until: Until,
        /// The repository, owner/name [default: the Work's input's `repo`]
        #[arg(long, value_name = "OWNER/NAME")]
        repo: Option<String>,
        /// The pull request's number [default: the Work's input's `number`]
        #[arg(long, value_name = "N")]
        number: Option<u64>,
        /// How long each wait may last, such as 2h [default: no limit]
        #[arg(long, value_name = "DURATION")]
        wait: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum CredentialAction {
    Get,
    Store,
    Erase,
}

#[derive(Debug, Subcommand)]
enum SessionCommand {
    /// Open a session of an operation this execution may call; prints the session's id
    Open {
        /// The operation, by its toolId (`os tools` lists those this execution may call)
        #[arg(value_name = "OPERATION")]
        operation: String,
    },
    /// Close a session (completed, or failed with --failed)
    Close {
        /// The session's id, as `os session open` printed it
        #[arg(value_name = "SESSION_ID")]
        id: String,
        /// The session's work failed
        #[arg(long)]
        failed: bool,
    },
}

/// What a command does: one toolbelt request and how its answer reads, or the MCP server.
enum Plan {
    Call(Request, Human),
    Mcp,
    GitCredential(CredentialAction),
    GithubHold(Hold),
}

#[derive(Debug, Args)]
struct RequestId {
    /// Idempotency id: a retried call with the same id is carried out once
    #[arg(long = "request-id", value_name = "ID")]
    id: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Status {
    Succeeded,
    Failed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let reporter = Reporter::execution(cli.json);
    let connection = toolbelt::connection_from_env();
    match plan(cli.command) {
        Plan::Call(request, human) => {
            let answer = connection.and_then(|c| c.send(&request));
            let parked = answer.as_ref().ok().and_then(toolbelt::parked_message);
            let code = reporter.finish(answer, human);
            match parked {
                Some(message) => {
                    eprintln!("{message}");
                    ExitCode::from(toolbelt::PARKED_EXIT)
                }
                None => code,
            }
        }
        Plan::Mcp => reporter.finish_printed(connection.and_then(conduit_cli::mcp::run)),
        Plan::GitCredential(action) => reporter.finish_printed(git_credential(action, connection)),
        Plan::GithubHold(hold) => match connection.and_then(|c| hold.run(&c)) {
            Ok(Held::Declared(status, summary)) => {
                println!("{status}: {summary}");
                ExitCode::SUCCESS
            }
            Ok(Held::Waiting) => {
                eprintln!("waiting for the pull request's next GitHub event; this segment ends now");
                ExitCode::from(toolbelt::PARKED_EXIT)
            }
            Err(failure) => reporter.fail(failure),
        },
    }
}

/// Answers git: reads its request from stdin and, for `get`, prints the credential lines (if any).
fn git_credential(action: CredentialAction, connection: Result<Connection, Failure>) -> Result<(), Failure> {
    let mut request = String::new();
    std::io::stdin()
        .read_to_string(&mut request)
        .map_err(|e| Failure::Local(format!("could not read git's request on stdin: {e}")))?;
    if let CredentialAction::Get = action {
        print!(
            "{}",
            git_credential::get(&connection?, &git_credential::parse(&request))?
        );
    }
    Ok(())
}

/// What a command does: the toolbelt request it makes and how its answer reads as text.
fn plan(command: Command) -> Plan {
    use toolbelt as t;
    match command {
        Command::Emit {
            event_type,
            data,
            correlation_key,
            request_id,
        } => Plan::Call(
            t::emit(&event_type, data, correlation_key, request_id.id),
            render::event_id,
        ),
        Command::Outcome {
            status,
            summary,
            artifacts,
        } => Plan::Call(
            t::declare_outcome(status.as_str(), summary, artifacts),
            render::declared,
        ),
        Command::Context => Plan::Call(t::read_context(), render::output),
        Command::Input => Plan::Call(t::read_context(), render::work_input),
        Command::Session(SessionCommand::Open { operation }) => {
            Plan::Call(t::open_session(&operation), render::session_id)
        }
        Command::Session(SessionCommand::Close { id, failed }) => {
            Plan::Call(t::close_session(&id, failed), render::session_closed)
        }
        Command::Wait {
            types,
            keys,
            timeout,
            artifacts,
        } => Plan::Call(t::wait(types, keys, timeout, artifacts), render::declared),
        Command::CreateWork {
            binding,
            input,
            keys,
            request_id,
        } => Plan::Call(t::create_work(&binding, input, keys, request_id.id), render::work_id),
        Command::Call {
            operation,
            input,
            session,
            request_id,
        } => Plan::Call(
            t::call_in(&operation, input.unwrap_or_else(|| json!({})), request_id.id, session),
            render::output,
        ),
        Command::Guidance => Plan::Call(t::guidance(), render::guidance),
        Command::Tools { id: None } => Plan::Call(t::tools(), render::tool_table),
        Command::Tools { id: Some(id) } => Plan::Call(t::tool(&id), render::tool_detail),
        Command::Mcp => Plan::Mcp,
        Command::GitCredential { action } => Plan::GitCredential(action),
        Command::GithubHold {
            until,
            repo,
            number,
            wait,
        } => Plan::GithubHold(Hold {
            until,
            repo,
            number,
            wait,
        }),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn body(args: &[&str]) -> Value {
        let cli = Cli::try_parse_from([&["os"], args].concat()).expect("parses");
        match plan(cli.command) {
            Plan::Call(Request::Post { body, .. }, _) => body,
            Plan::Call(Request::Get(path) | Request::GetContent(path) | Request::Delete(path), _) => {
                panic!("expected a call, got {path}")
            }
            Plan::Mcp | Plan::GitCredential(_) | Plan::GithubHold(_) => panic!("expected a call"),
        }
    }

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_matches_its_snapshot() {
        help_check::assert_help_snapshot(Cli::command(), "os-help.txt");
    }

    #[test]
    fn every_argument_says_what_it_is() {
        let missing = help_check::undocumented(&Cli::command());
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn arguments_map_to_toolbelt_calls() {
        for (args, expected) in [
            (
                &["emit", "demo.hello", "--data", "[1]", "--request-id", "r1"][..],
                json!({"operation": "emit", "input": {"type": "demo.hello", "data": [1]}, "request_id": "r1"}),
            ),
            (
                &["outcome", "succeeded", "--summary", "done"],
                json!({"operation": "declare_outcome", "input": {"status": "succeeded", "summary": "done"}}),
            ),
            (
                &["wait", "--for", "a.b", "--for", "c.d", "--key", "k", "--timeout", "30s"],
                json!({"operation": "wait", "input": {"types": ["a.b", "c.d"], "keys": ["k"], "timeout": "30s"}}),
            ),
            (
                &["create-work", "--binding", "shell", "--key", "k", "--request-id", "r2"],
                json!({"operation": "create_work", "input": {"binding": "shell", "keys": ["k"]}, "request_id": "r2"}),
            ),
            (
                &["call", "http.fetch", "--json"],
                json!({"operation": "http.fetch", "input": {}}),
            ),
        ] {
            assert_eq!(body(args), expected, "{args:?}");
        }
    }

    #[test]
    fn guidance_is_a_get() {
        let cli = Cli::try_parse_from(["os", "guidance"]).expect("parses");
        let Plan::Call(request, _) = plan(cli.command) else {
            panic!("expected a request")
        };
        assert_eq!(request, Request::Get("/v1/toolbelt/guidance".into()));
    }

    #[test]
    fn wait_needs_a_type_and_outcome_a_known_status() {
        for args in [
            &["os", "wait"][..],
            &["os", "outcome", "maybe"],
            &["os", "emit", "t", "--data", "{"],
        ] {
            let error = Cli::try_parse_from(args).expect_err("usage error");
            assert_eq!(error.exit_code(), 2, "{error}");
        }
    }
}
