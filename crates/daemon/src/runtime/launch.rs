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

/// Where an attempt works.
pub(super) enum Workdir {
    /// The binding's `cwd`: the operator's directory, checked before each start.
    Binding(PathBuf),
    /// An agent's directory for its Work (`<state>/works/<work>`), kept across the Work's attempts
    /// (a resumed session finds its files, and the CLI files its sessions by directory) and
    /// removed when the Work finishes.
    Work(PathBuf),
    /// A fresh directory in the attempt's run directory.
    Attempt,
}

impl Workdir {
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            Workdir::Binding(dir) | Workdir::Work(dir) => Some(dir.clone()),
            Workdir::Attempt => None,
        }
    }
}

impl Runtime {
    /// Where the attempt works, from its binding in the generation it pinned.
    pub(super) async fn workdir(&self, x: &Execution) -> Workdir {
        let (configs, x, work_dir) = (self.configs.clone(), x.clone(), self.work_dir(&x.work_id));
        let pinned = move || {
            let executable = configs.generation(x.generation)?.executable(&x.scope, &x.binding)?;
            Some(match (executable.process().cwd, &executable) {
                (Some(cwd), _) => Workdir::Binding(PathBuf::from(cwd)),
                (None, Executable::Agent(..)) => work_dir.map_or(Workdir::Attempt, Workdir::Work),
                (None, Executable::Shell(_)) => Workdir::Attempt,
            })
        };
        let found = tokio::task::spawn_blocking(pinned).await.ok().flatten();
        found.unwrap_or(Workdir::Attempt)
    }

    /// An agent Work's own directory, named by the Work's id (the host's, a UUID); none for an id
    /// that is not a plain name.
    pub(super) fn work_dir(&self, work_id: &str) -> Option<PathBuf> {
        let plain = work_id.len() <= 64 && work_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        (plain && !work_id.is_empty()).then(|| self.works_dir.join(work_id))
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
