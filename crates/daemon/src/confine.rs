//! Each attempt's confinement: the binding's sandbox setting turned into a policy over the
//! attempt's own paths, made ready (the Landlock ruleset built, off the async runtime) before its
//! process starts.

use std::path::PathBuf;

use conduit_core::sandbox::Sandbox;
use conduit_sandbox::{kernel, Confinement, ExecutionPaths, Policy, Unavailable};

use crate::rundir::RunDir;

/// What every attempt's policy hides besides its own paths.
#[derive(Debug, Clone)]
pub struct Hidden {
    /// The state directory, resolved through links.
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
    let build = move || Confinement::prepare(&policy, &kernel::probe()).map(Some);
    tokio::task::spawn_blocking(build).await.unwrap_or_else(|_| {
        Err(Unavailable {
            missing: vec!["a ruleset (its preparation failed)".into()],
        })
    })
}
