//! Each attempt's confinement: the binding's sandbox setting turned into a policy over the
//! attempt's own paths, made ready (the Landlock ruleset built, off the async runtime) before its
//! process starts.

use std::path::{Path, PathBuf};

use conduit_core::sandbox::Sandbox;
use conduit_sandbox::programs::programs_of;
use conduit_sandbox::{kernel, Confinement, ExecutionPaths, PackagePaths, Policy, Rulesets, Unavailable};

use crate::executor::rundir::RunDir;

/// What every attempt's policy hides besides its own paths.
#[derive(Debug, Clone)]
pub struct Hidden {
    /// The state directory, spelled as the run directories beneath it are (the sandbox resolves
    /// links itself; a resolved spelling here would hide the run directory from its own attempt).
    pub state_dir: PathBuf,
    /// The configuration file, when it lives outside the state directory.
    pub private_files: Vec<PathBuf>,
}

/// An attempt's confinement, and the policy whose next ruleset is built ahead once it has started.
pub struct Prepared {
    confinement: Confinement,
    policy: Policy,
}

impl Prepared {
    /// Starts the process with `start`, then builds the base of the policy's next ruleset (off the
    /// start's path: it lists directories while this process runs).
    pub fn start<T>(self, start: impl FnOnce(Confinement) -> T) -> T {
        let started = start(self.confinement);
        let policy = self.policy;
        tokio::task::spawn_blocking(move || RULESETS.make_ready(&policy));
        started
    }
}

/// The attempt's confinement under `setting` (`None` when it is `off`); `home` is an agent
/// CLI's own directory, writable.
pub async fn prepare(
    setting: Sandbox,
    hidden: &Hidden,
    run: &RunDir,
    home: Option<PathBuf>,
    playbooks: PathBuf,
    os_dir: PathBuf,
) -> Result<Option<Prepared>, Unavailable> {
    let paths = ExecutionPaths {
        state_dir: hidden.state_dir.clone(),
        run_dir: run.dir.clone(),
        workdir: run.workdir.clone(),
        tmpdir: run.tmpdir.clone(),
        home,
        playbooks,
        os_dir,
        private_files: hidden.private_files.clone(),
    };
    let Some(policy) = Policy::for_execution(&setting, &paths) else {
        return Ok(None);
    };
    let (confinement, policy) = enforce(policy).await;
    Ok(Some(Prepared {
        confinement: confinement?,
        policy,
    }))
}

/// Where a package's process is started, and how.
pub struct PackageLaunch<'a> {
    pub requires: &'a [String],
    /// What stays hidden from it: the state directory (but its own directory) and the
    /// configuration file.
    pub hidden: &'a Hidden,
    pub package_dir: &'a Path,
    pub entry: &'a Path,
    /// The PATH its environment gives, which its `#!/usr/bin/env` line searches.
    pub path: &'a str,
    /// Its private temporary directory, created owner-only if need be.
    pub tmpdir: &'a Path,
}

/// A package's confinement, from the primitives its manifest declares.
pub async fn for_package(launch: PackageLaunch<'_>) -> Result<Confinement, Unavailable> {
    if crate::state::create_private_dir(launch.tmpdir).is_err() {
        return Err(Unavailable {
            missing: vec!["a private temporary directory for the package".into()],
        });
    }
    let found = programs_of(launch.entry, launch.path);
    let paths = PackagePaths {
        state_dir: launch.hidden.state_dir.clone(),
        package_dir: launch.package_dir.to_owned(),
        tmpdir: launch.tmpdir.to_owned(),
        programs: found.programs,
        program_trees: found.trees,
        private_files: launch.hidden.private_files.clone(),
    };
    enforce(Policy::for_package(launch.requires, &paths)).await.0
}

/// The daemon's rulesets: what they cut around the state directory is kept between attempts.
static RULESETS: Rulesets = Rulesets::new();

/// Builds the policy's ruleset off the async runtime (it lists and opens directories).
async fn enforce(policy: Policy) -> (Result<Confinement, Unavailable>, Policy) {
    let kept = policy.clone();
    let build = move || Confinement::prepare(&policy, &kernel::probe(), &RULESETS);
    let confinement = tokio::task::spawn_blocking(build).await.unwrap_or_else(|_| {
        Err(Unavailable {
            missing: vec!["a ruleset (its preparation failed)".into()],
        })
    });
    (confinement, kept)
}
