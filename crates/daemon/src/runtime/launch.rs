//! Starting an attempt's process: its working directory, program, secrets and confinement, then
//! the spawn.

use std::path::PathBuf;

use conduit_config::Executable;
use conduit_core::execution::SegmentEnd;
use conduit_core::Execution;

use super::Runtime;
use crate::confine::{self, Prepared};
use crate::executor::rundir::RunDir;
use crate::executor::shell::{self, Launch};
use crate::secrets::{resolve_for, Secret};

/// What starts an attempt's process: its argv, the executor's own variables, the home it writes
/// (an agent CLI's) and where its stdout goes (an agent's transcript; else the log).
#[derive(Default)]
pub(super) struct Program {
    pub argv: Vec<String>,
    pub defaults: Vec<(String, String)>,
    pub home: Option<PathBuf>,
    pub transcript: Option<PathBuf>,
}

impl Runtime {
    /// The working directory the attempt's binding gives (`cwd`) in the generation it pinned;
    /// without one, the attempt works in a directory of its own in its run directory.
    pub(super) async fn configured_cwd(&self, x: &Execution) -> Option<PathBuf> {
        let (configs, x) = (self.configs.clone(), x.clone());
        let pinned_cwd = move || {
            let executable = configs.generation(x.generation)?.executable(&x.scope, &x.binding)?;
            executable.process().cwd.map(PathBuf::from)
        };
        tokio::task::spawn_blocking(pinned_cwd).await.ok().flatten()
    }

    /// How the attempt's program starts: the shell's argv as written, or the agent CLI's command
    /// line built for this attempt.
    pub(super) async fn program_for(
        &self,
        x: &Execution,
        run: &RunDir,
        executable: &Executable,
    ) -> Result<Program, SegmentEnd> {
        match executable {
            Executable::Shell(shell) => Ok(Program {
                argv: shell.command.clone(),
                ..Program::default()
            }),
            Executable::Agent(agent, config) => self.agent_program(x, run, *agent, config).await,
        }
    }

    /// The attempt's confinement under its binding's sandbox (`None` when it is off); when the
    /// kernel cannot enforce it, the segment ends `SandboxUnavailable`, said in the attempt's log.
    pub(super) async fn confinement_for(
        &self,
        execution: &Execution,
        run: &RunDir,
        home: Option<PathBuf>,
    ) -> Result<Option<Prepared>, SegmentEnd> {
        let setting = self
            .config
            .get()
            .sandbox(&execution.scope, &execution.binding)
            .unwrap_or_default();
        let prepared = confine::prepare(
            setting,
            &self.hidden,
            run,
            home,
            self.playbook_dir.clone(),
            self.os_dir.clone(),
        );
        prepared.await.map_err(|unavailable| {
            tracing::warn!(execution = %execution.id, %unavailable, "the sandbox cannot be enforced; the process was not started");
            let line = format!("open-conduit: sandbox_unavailable: {unavailable}; the process was not started");
            shell::append_log(&self.files.log(&execution.id), &line);
            SegmentEnd::SandboxUnavailable
        })
    }

    /// Starts the attempt's process (`FailedToStart` when it cannot be).
    pub(super) fn spawn(
        &self,
        execution: &Execution,
        run: &RunDir,
        (executable, program): (&Executable, &Program),
        secrets: &[(String, Secret)],
        confinement: Option<Prepared>,
    ) -> Result<tokio::process::Child, SegmentEnd> {
        let process = executable.process();
        let launch = Launch {
            argv: &program.argv,
            env: process.env,
            path: process.path,
            workdir: &run.workdir,
            tmpdir: &run.tmpdir,
            endpoint: &run.socket,
            token_file: &run.token_file,
            os_dir: &self.os_dir,
            log: &self.files.log(&execution.id),
            secrets,
            playbook_dir: &self.playbook_dir,
            defaults: &program.defaults,
            stdout: program.transcript.as_deref(),
        };
        let started = match confinement {
            Some(prepared) => prepared.start(|c| shell::spawn(&launch, Some(c))),
            None => shell::spawn(&launch, None),
        };
        started.map_err(|e| {
            tracing::warn!(execution = %execution.id, error = %e, "could not start the process");
            let name = program.argv.first().map_or("", String::as_str);
            let line = format!("open-conduit: could not start `{name}`: {e}; the process was not started");
            shell::append_log(&self.files.log(&execution.id), &line);
            SegmentEnd::FailedToStart(e.raw_os_error())
        })
    }

    /// Resolves the attempt's secrets on a blocking thread, immediately before it starts.
    pub(super) async fn secrets_for(&self, x: &Execution) -> Result<Vec<(String, Secret)>, (String, &'static str)> {
        let (configs, resolver, x) = (self.configs.clone(), self.resolver.clone(), x.clone());
        let resolve = move || {
            let current = configs.current().get();
            let pinned = configs
                .generation(x.generation)
                .ok_or_else(|| ("*".to_owned(), "generation_unavailable"))?;
            resolve_for(&resolver, &pinned, &current, &x.scope, &x.binding)
        };
        crate::secrets::off_runtime(resolve)
            .await
            .unwrap_or_else(|| Err(("*".to_owned(), "internal")))
    }
}
