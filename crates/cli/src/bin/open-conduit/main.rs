//! `open-conduit`: runs the daemon, and drives it as its operator over the management socket.
//!
//! [`cli`] is the command line and [`plan`] what each command asks for; `main` carries the plan
//! out through the library and reports how it went.

#![forbid(unsafe_code)]

mod cli;
#[cfg(test)]
#[path = "../common/help_check.rs"]
mod help_check;
mod ids;
mod pages;
mod plan;

use std::process::ExitCode;

use clap::Parser;
use conduit_cli::management::{self, Locations};
use conduit_cli::report::{Failure, Human, Reporter};
use conduit_cli::{artifacts, auth, daemon, doctor, render, runs, secrets, service, tui, watch};
use serde_json::Value;

use crate::cli::{Cli, DaemonArgs, RunsCommand, SecretsCommand, ServiceCommand, StoreArg};
use crate::plan::{plan, Awaited, Plan};

fn main() -> ExitCode {
    let Cli { global, command } = Cli::parse();
    render::set_style(stdout_style());
    let reporter = Reporter::operator(global.json);
    let locations = Locations {
        state: global.state,
        endpoint: global.endpoint,
        token_file: global.token_file,
        idempotency_key: global.idempotency_key,
        limit: global.limit.map(|n| n as usize),
    };
    let command = match ids::expand(command, &locations) {
        Ok(command) => command,
        Err(failure) => return reporter.finish(Err(failure), render::content),
    };
    match plan(command, locations.state_dir().ok().as_deref()) {
        Plan::Daemon(args) => reporter.finish_printed(run_daemon(&locations, args)),
        Plan::Call(request, human) => reporter.finish(locations.send_all(&request), human),
        Plan::Cat(id) if global.json => {
            reporter.finish(locations.send_all(&management::artifact_content(&id)), render::content)
        }
        Plan::Cat(id) => reporter.finish_printed(artifacts::cat(&locations, &id)),
        Plan::Wait(awaited) => finish_waited(&reporter, wait_for(&locations, awaited)),
        Plan::Follow(query) => reporter.finish_printed(watch::follow_events(&locations, &query, global.json)),
        Plan::Runs(command) => {
            let (answer, human) = read_runs(&locations, command, global.json);
            reporter.finish(answer, human)
        }
        Plan::Validation(Ok(request)) => reporter.finish_validation(locations.send_all(&request), render::checked),
        Plan::Validation(Err(offline)) => reporter.finish_validation(Ok(offline), render::checked),
        Plan::Rotate => reporter.finish(auth::rotate(&locations), render::rotated),
        Plan::Doctor => reporter.finish_validation(Ok(doctor::report(&locations)), render::doctor),
        Plan::Tui => reporter.finish_printed(tui::run(&locations)),
        Plan::Service(ServiceCommand::Install { config, force, .. }) => reporter.finish(
            install_service(&locations, config.as_deref(), force),
            render::service_installed,
        ),
        Plan::Secrets(command) => {
            let (answer, human) = secrets(&locations, command);
            reporter.finish(answer, human)
        }
        Plan::Completion(shell) => reporter.finish_printed(pages::completion(shell)),
        Plan::Man(dir) => reporter.finish_printed(pages::man(dir.as_deref())),
        Plan::Recover(store) => reporter.finish(
            store_location(&store).and_then(|store| auth::recover(&locations, &store)),
            render::recovered,
        ),
    }
}

/// Tables fit and are coloured only when stdout is a terminal; `COLUMNS` overrides its width and
/// `NO_COLOR` (or `TERM=dumb`) turns colour off.
fn stdout_style() -> render::Style {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return render::Style::default();
    }
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
    let measured = || ratatui::crossterm::terminal::size().ok().map(|(w, _)| usize::from(w));
    render::Style {
        width: columns.or_else(measured),
        colour: std::env::var_os("NO_COLOR").is_none() && std::env::var("TERM").as_deref() != Ok("dumb"),
        terminal: true,
    }
}

/// Runs the daemon with the options its flags and the state directory give.
fn run_daemon(locations: &Locations, args: DaemonArgs) -> Result<(), Failure> {
    // A file named on purpose that is not there is a mistake, not a wish for the default.
    if let Some(file) = args.config.as_ref().filter(|f| !f.exists()) {
        return Err(Failure::Local(format!(
            "the configuration file {} does not exist; write it (`open-conduit config check FILE` validates it), or leave out --config to run <state>/config.json or the default",
            file.display()
        )));
    }
    daemon::run(conduit_daemon::DaemonOptions {
        state_dir: locations.state_dir()?,
        config_file: args.config,
        os_dir: None,
        token_lifetime: args.token_lifetime,
        lease: args.lease,
        listen: args.listen,
        conformance_seams: args.conformance_seams,
        store: store_location(&args.store)?,
    })
}

/// The store `--store` names, refused without echoing what was given (it may hold a password).
fn store_location(arg: &StoreArg) -> Result<conduit_daemon::StoreLocation, Failure> {
    let location: conduit_daemon::StoreLocation = arg
        .url
        .parse()
        .map_err(|why| Failure::Local(format!("--store: {why}")))?;
    location
        .with_access(arg.password.clone(), arg.ca.clone())
        .map_err(|why| Failure::Local(format!("--store-password, --store-ca: {why}")))
}

/// The Work awaited, once it has finished (created first when asked).
fn wait_for(locations: &Locations, awaited: Awaited) -> Result<Value, Failure> {
    let id = match awaited {
        Awaited::Existing(id) => id,
        Awaited::Created(create) => {
            let created = locations.send(&create)?;
            created["id"].as_str().unwrap_or_default().to_owned()
        }
    };
    watch::wait_for_work(locations, &id)
}

/// Prints the finished Work; exit 1 unless it succeeded.
fn finish_waited(reporter: &Reporter, result: Result<Value, Failure>) -> ExitCode {
    let unsuccessful = matches!(&result, Ok(work) if work["state"] != "succeeded");
    match reporter.finish(result, render::work_detail) {
        code if unsuccessful && code == ExitCode::SUCCESS => ExitCode::from(1),
        code => code,
    }
}

/// Writes the systemd user unit that runs this program's daemon on the state directory.
fn install_service(locations: &Locations, config: Option<&std::path::Path>, force: bool) -> Result<Value, Failure> {
    let absolute = |path: &std::path::Path| std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let program =
        std::env::current_exe().map_err(|e| Failure::Local(format!("cannot find this program's path: {e}")))?;
    let state = absolute(&locations.state_dir()?);
    let config = config.map(absolute);
    let dir = service::user_unit_dir(std::env::var_os("XDG_CONFIG_HOME"), std::env::var_os("HOME"))
        .ok_or_else(|| Failure::Local("neither XDG_CONFIG_HOME nor HOME is set".to_owned()))?;
    // Only absolute entries: an empty or relative one would search the service's working directory.
    let path = std::env::var("PATH").ok().map(|path| {
        let absolute: Vec<&str> = path.split(':').filter(|dir| dir.starts_with('/')).collect();
        absolute.join(":")
    });
    let daemon = service::Daemon {
        program: &program,
        state: &state,
        config: config.as_deref(),
        path: path.as_deref(),
    };
    service::install(&dir, &service::unit_text(&daemon)?, force)
}

/// A `secrets` command's answer and how it reads as text.
fn secrets(locations: &Locations, command: SecretsCommand) -> (Result<Value, Failure>, Human) {
    match command {
        SecretsCommand::Set { name, keyring: true } => (secrets::set_in_keyring(&name), render::secret_stored),
        SecretsCommand::Rm { name, keyring: true } => (secrets::remove_from_keyring(&name), render::secret_removed),
        command => {
            let state = match locations.state_dir() {
                Ok(state) => state,
                Err(failure) => return (Err(failure), render::content),
            };
            match command {
                SecretsCommand::Set { name, .. } => (secrets::set(&state, &name), render::secret_stored),
                SecretsCommand::Rm { name, .. } => (secrets::remove(&state, &name), render::secret_removed),
                SecretsCommand::List => (secrets::list(&state), render::secret_table),
            }
        }
    }
}

/// A `runs` command's answer and how it reads as text.
fn read_runs(locations: &Locations, command: RunsCommand, json: bool) -> (Result<Value, Failure>, Human) {
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
        // It prints as it goes, and returns only when it cannot go on.
        RunsCommand::Watch { scope } => (
            watch::watch_runs(locations, scope.as_deref(), json).map(|()| Value::Null),
            render::content,
        ),
    }
}
