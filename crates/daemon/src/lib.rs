//! The daemon: composition and lifetime. It locks the state directory, activates the configuration,
//! bootstraps the owner's credential, serves the management socket, recovers attempts an earlier
//! daemon left, and runs the scheduler loop until SIGINT or SIGTERM.
#![forbid(unsafe_code)]

mod config_service;
mod confine;
mod error;
mod executor;
mod extensions;
mod failpoint;
pub mod files;
mod lifetime;
mod operator;
mod packages;
mod playbooks;
mod runtime;
pub mod secrets;
mod state;
mod store_location;
mod store_thread;

use std::path::PathBuf;

use conduit_config::{Diagnostic, Snapshot};
use conduit_core::Duration;
use conduit_server::now;
pub use conduit_server::Checked;
use conduit_toolbelt::Registry;

pub use error::DaemonError;
pub use executor::agent::find_program;
pub use executor::rundir::run_key;
pub use lifetime::run;
pub use state::{check_private_dir, StateDir};
pub use store_location::StoreLocation;

/// How the daemon is started.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub state_dir: PathBuf,
    pub config_file: Option<PathBuf>,
    /// The directory of the `os` binary put first on every execution's PATH; default: this
    /// executable's own directory.
    pub os_dir: Option<PathBuf>,
    /// Execution tokens expire after this long (and are rotated while their attempt runs) instead of
    /// at the attempt deadline.
    pub token_lifetime: Option<Duration>,
    /// How long an attempt's lease lasts unrenewed (default 30s): on a shared store, how long a
    /// silent daemon's attempts wait before another daemon takes them over.
    pub lease: Option<Duration>,
    /// A loopback address to serve the management API on over TCP too, for HTTP clients that cannot
    /// dial a Unix socket.
    pub listen: Option<std::net::SocketAddr>,
    /// Serve OpenWOP's host-sample test seams on the loopback listener (conformance runs only).
    pub conformance_seams: bool,
    /// The store to open: the embedded SQLite file by default.
    pub store: StoreLocation,
}

/// The extensions this release registers. The configuration may grant what they register.
pub fn release_registry() -> Registry {
    extensions::registry_with(None, Vec::new())
}

/// What configuration may name: this release's operations and toolsets, the installed packages'
/// (from their copies in `<state>/packages/`), and the playbooks in `<state>/playbooks/skills/`.
pub fn config_registry(state_dir: &std::path::Path) -> conduit_config::Registry {
    let named = packages::installed_manifests(&state_dir.join("packages"))
        .iter()
        .map(packages::names_only)
        .collect();
    let state = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_owned());
    playbooks::register(
        extensions::registry_with(None, named).config_registry(),
        &state_dir.join("playbooks"),
    )
    .with_state_dir(&state.to_string_lossy())
}

/// Validates configuration text offline against this release (and the state directory's
/// playbooks, when there is one), as the daemon would.
pub fn check_config(bytes: &[u8], state_dir: Option<&std::path::Path>) -> Result<Snapshot, Vec<Diagnostic>> {
    let registry = state_dir.map_or_else(|| release_registry().config_registry(), config_registry);
    conduit_config::parse_with(bytes, &registry)
}

/// The locked local path after a lost rotation: with the daemon stopped (it takes the state lock),
/// issues the owner a new credential into `<state>/private/operator.token` and answers its path.
pub fn recover_owner(state_dir: &std::path::Path, store: &StoreLocation) -> Result<PathBuf, DaemonError> {
    let state = StateDir::lock(state_dir)?;
    let store = store.open(&state, &secrets::Resolver::of_state(&state))?;
    operator::issue_owner(&state, &*store, now())?;
    Ok(state.operator_token())
}
