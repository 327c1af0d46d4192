//! Starting an attempt's process: its working directory, program, secrets and confinement, then
//! the spawn.

use std::path::{Path, PathBuf};

use conduit_config::Executable;
use conduit_core::execution::SegmentEnd;
use conduit_core::Execution;

use super::Runtime;
use crate::confine::{self, Prepared};
use crate::executor::rundir::RunDir;
use crate::executor::shell::{self, Launch};
use crate::secrets::{resolve_for, Secret, Unresolved};

/// What starts an attempt's process: its argv, the executor's own variables, the home it writes
/// (an agent CLI's), its stdin and where its stdout goes (an agent's transcript; else the log).
#[derive(Default)]
pub(super) struct Program {
    pub argv: Vec<String>,
    pub defaults: Vec<(String, String)>,
    pub home: Option<PathBuf>,
    /// What its stdin reads (an agent's prompt); else nothing.
    pub stdin: Option<PathBuf>,
    pub transcript: Option<PathBuf>,
}

/// Where an attempt works.
pub(super) enum Workdir {
    /// The binding's `cwd`: the operator's directory, checked before each start.
    Binding(PathBuf),
    /// An agent's directory for its Work (`<state>/works/<key>/work`), kept across the Work's
    /// attempts (a resumed session finds its files, and the CLI files its sessions by directory)
    /// and removed when the Work finishes.
    Work(PathBuf),
    /// A fresh directory in the attempt's run directory.
    Attempt,
}

impl Workdir {
    /// Where an attempt of `executable` (none: its binding cannot run) works.
    pub fn of(executable: Option<&Executable>, work_root: &Path) -> Workdir {
        match (executable.and_then(|e| e.process().cwd), executable) {
            (Some(cwd), _) => Workdir::Binding(PathBuf::from(cwd)),
            (None, Some(Executable::Agent(..))) => Workdir::Work(work_root.join("work")),
            (None, _) => Workdir::Attempt,
        }
    }

    pub fn path(&self) -> Option<PathBuf> {
        match self {
            Workdir::Binding(dir) | Workdir::Work(dir) => Some(dir.clone()),
            Workdir::Attempt => None,
        }
    }
}

/// The file in a Work's directory that names its Work (the directory is named by a digest).
pub(super) const WORK_MARKER: &str = "work-id";

impl Runtime {
    /// How the attempt's binding runs, in the generation the attempt pinned; `None` when the
    /// binding is gone from it or names an executor the host does not run.
    pub(super) async fn pinned_executable(&self, x: &Execution) -> Option<Executable> {
        let (configs, x) = (self.configs.clone(), x.clone());
        let pinned = move || configs.generation(x.generation)?.executable(&x.scope, &x.binding);
        tokio::task::spawn_blocking(pinned).await.ok().flatten()
    }

    /// An agent Work's own directory (its working directory and the CLI's home), which names the
    /// Work in [`WORK_MARKER`].
    pub(super) fn work_root(&self, work_id: &str) -> PathBuf {
        self.works_dir.join(crate::executor::rundir::run_key(work_id))
    }

    /// Creates the Work's directory and `sub` inside it, owner-only.
    pub(super) fn create_in_work_root(&self, work_id: &str, sub: &str) -> Result<PathBuf, crate::DaemonError> {
        let root = self.work_root(work_id);
        crate::state::create_private_dir(&root.join(sub))?;
        let marker = root.join(WORK_MARKER);
        if !marker.exists() {
            crate::state::write_private_file(&marker, work_id.as_bytes())?;
        }
        Ok(root.join(sub))
    }

    /// How the attempt's program starts: the shell's argv as written, the agent CLI's command
    /// line built for this attempt, or the GitHub hold's.
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
            Executable::GithubHold(hold) => Ok(Program {
                argv: self.hold_argv(hold),
                ..Program::default()
            }),
        }
    }

    /// The GitHub hold is `os github-hold`, calling the toolbelt through its own execution socket.
    fn hold_argv(&self, hold: &conduit_config::HoldConfig) -> Vec<String> {
        let mut argv = vec![
            self.os_dir.join("os").display().to_string(),
            "github-hold".into(),
            format!("--until={}", hold.until),
        ];
        let options = [
            ("--repo", hold.repo.clone()),
            ("--number", hold.number.map(|n| n.to_string())),
            ("--wait", hold.wait.clone()),
        ];
        for (flag, value) in options {
            // One token each, so a value starting with `-` is never read as a flag.
            if let Some(value) = value {
                argv.push(format!("{flag}={value}"));
            }
        }
        argv
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
            stdin: program.stdin.as_deref(),
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
    pub(super) async fn secrets_for(&self, x: &Execution) -> Result<Vec<(String, Secret)>, Unresolved> {
        let (configs, resolver, x) = (self.configs.clone(), self.resolver.clone(), x.clone());
        let resolve = move || {
            let current = configs.current().get();
            let pinned = configs.generation(x.generation).ok_or_else(|| {
                Unresolved::new(
                    "*",
                    "generation_unavailable",
                    "retry the Work: its next attempt pins the active generation",
                )
            })?;
            resolve_for(&resolver, &pinned, &current, &x.scope, &x.binding)
        };
        crate::secrets::off_runtime(resolve)
            .await
            .unwrap_or_else(|| Err(Unresolved::new("*", "internal", "see the daemon's log")))
    }
}
