//! Each attempt's confinement: the binding's sandbox setting turned into a policy over the
//! attempt's own paths, made ready (the Landlock ruleset built, off the async runtime) before its
//! process starts.

use std::path::{Path, PathBuf};

use conduit_core::sandbox::Sandbox;
use conduit_sandbox::programs::programs_of;
use conduit_sandbox::{kernel, Confinement, ExecutionPaths, PackagePaths, Policy, Unavailable};

use crate::rundir::RunDir;

/// What every attempt's policy hides besides its own paths.
#[derive(Debug, Clone)]
pub struct Hidden {
    /// The state directory, spelled as the run directories beneath it are (the sandbox resolves
    /// links itself; a resolved spelling here would hide the run directory from its own attempt).
    pub state_dir: PathBuf,
    /// The configuration file, when it lives outside the state directory.
    pub private_files: Vec<PathBuf>,
}

/// The attempt's confinement under `setting` (`None` when it is `off`).
pub async fn prepare(
    setting: Sandbox,
    hidden: &Hidden,
    run: &RunDir,
    playbooks: PathBuf,
    os_dir: PathBuf,
) -> Result<Option<Confinement>, Unavailable> {
    let paths = ExecutionPaths {
        state_dir: hidden.state_dir.clone(),
        run_dir: run.dir.clone(),
        workdir: run.workdir.clone(),
        tmpdir: run.tmpdir.clone(),
        playbooks,
        os_dir,
        private_files: hidden.private_files.clone(),
    };
    let Some(policy) = Policy::for_execution(&setting, &paths) else {
        return Ok(None);
    };
    enforce(policy).await.map(Some)
}

/// Where a package's process is started, and how.
pub struct PackageLaunch<'a> {
    pub requires: &'a [String],
    pub state_dir: &'a Path,
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
        state_dir: launch.state_dir.to_owned(),
        package_dir: launch.package_dir.to_owned(),
        tmpdir: launch.tmpdir.to_owned(),
        programs: found.programs,
        program_trees: found.trees,
        private_files: Vec::new(),
    };
    enforce(Policy::for_package(launch.requires, &paths)).await
}

/// Builds the policy's ruleset off the async runtime (it lists and opens directories).
async fn enforce(policy: Policy) -> Result<Confinement, Unavailable> {
    let build = move || Confinement::prepare(&policy, &kernel::probe());
    tokio::task::spawn_blocking(build).await.unwrap_or_else(|_| {
        Err(Unavailable {
            missing: vec!["a ruleset (its preparation failed)".into()],
        })
    })
}
