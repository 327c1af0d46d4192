//! The daemon: composition and lifetime. It locks the state directory, activates the configuration,
//! bootstraps the owner's credential, serves the management socket, recovers attempts an earlier
//! daemon left, and runs the scheduler loop until SIGINT or SIGTERM.
#![forbid(unsafe_code)]

mod artifacts;
mod config_service;
mod confine;
mod error;
mod extension;
mod failpoint;
mod http;
mod human;
mod operator;
mod packages;
mod playbooks;
mod rundir;
mod runtime;
pub mod secrets;
mod shell;
mod state;

use std::path::PathBuf;
use std::sync::Arc;

use crate::secrets::{Resolver, SystemKeyring};
use conduit_config::{Diagnostic, Snapshot};
use conduit_core::Duration;
pub use conduit_server::Checked;
use conduit_server::{
    bind_owner_only, loopback_router, management_router, now, serve, ArtifactFiles, Cursors, Management, SystemClock,
};
use conduit_store::{new_id, Store};
use conduit_store_sqlite::SqliteStore;
use conduit_toolbelt::{LiveRegistry, Registry, Toolbelt};
use config_service::ConfigService;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Notify};

pub use error::DaemonError;
pub use rundir::run_key;
pub use state::{check_private_dir, StateDir};

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
    /// A loopback address to serve the management API on over TCP too, for HTTP clients that cannot
    /// dial a Unix socket.
    pub listen: Option<std::net::SocketAddr>,
    /// Serve OpenWOP's host-sample test seams on the loopback listener (conformance runs only).
    pub conformance_seams: bool,
}

/// The extensions this release registers. The configuration may grant what they register.
pub fn release_registry() -> Registry {
    registry_with(None, None, Vec::new())
}

/// The release's extensions (`http.fetch` reaching the bindings' secrets through `secrets`), then
/// the installed packages' registrations. A package whose names no longer fit (a later release
/// took one) is left out and logged, never fatal.
pub(crate) fn registry_with(
    secrets: Option<http::SecretAccess>,
    approvals: Option<Arc<dyn conduit_toolbelt::gate::Gate>>,
    packages: Vec<conduit_toolbelt::registry::Registration>,
) -> Registry {
    let mut registry = Registry::default();
    let fetch = Arc::new(http::HttpFetch::new(secrets));
    #[allow(
        clippy::expect_used,
        reason = "the release's own registrations are constants, tested"
    )]
    registry
        .register(http::registration(fetch))
        .and_then(|()| registry.register(human::registration()))
        .expect("the release's own registrations are valid");
    if let Some(gate) = approvals {
        #[allow(clippy::expect_used, reason = "the human registration was just registered")]
        registry
            .set_gate(human::NAME, gate)
            .expect("the human registration is registered");
    }
    for package in packages {
        let name = package.name.clone();
        if let Err(e) = registry.register(package) {
            tracing::warn!(package = %name, error = %e, "an installed package was not loaded");
        }
    }
    registry
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
        registry_with(None, None, named).config_registry(),
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
pub fn recover_owner(state_dir: &std::path::Path) -> Result<PathBuf, DaemonError> {
    let state = StateDir::lock(state_dir)?;
    let store = SqliteStore::open(&state.store_path())?;
    operator::issue_owner(&state, &store, now())?;
    Ok(state.operator_token())
}

/// Runs the daemon until SIGINT or SIGTERM.
pub async fn run(options: DaemonOptions) -> Result<(), DaemonError> {
    if let Some(addr) = options.listen.filter(|a| !a.ip().is_loopback()) {
        return Err(DaemonError::NotLoopback(addr));
    }
    let state = StateDir::lock(&options.state_dir)?;
    // No process of the daemon's user may read its memory or its /proc files (ptrace-guarded).
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| DaemonError::io("make the daemon non-dumpable (prctl) for", state.root(), e.into()))?;
    // Before anything is served: a signal that arrives once clients can see the daemon stops it cleanly.
    let signals = Signals::install(&state)?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&state.store_path())?);
    let config_file = options
        .config_file
        .clone()
        .unwrap_or_else(|| state.root().join("config.json"));
    let service = ConfigService::start(
        store.clone(),
        &config_file,
        &state.private_dir(),
        config_registry(state.root()),
    )?;
    operator::bootstrap_owner(&state, &*store, now())?;
    let config = service.current();
    let service = Arc::new(service);
    let resolver = Resolver::new(state.private_dir().join("secrets.json"), Arc::new(SystemKeyring));
    // First-party extensions and installed packages register here; the configuration may grant
    // what they register. Installing or removing a package replaces the registry whole.
    let live = LiveRegistry::new(Arc::new(release_registry()));
    let hidden = confine::Hidden {
        state_dir: state.root().to_owned(),
        private_files: vec![config_file.clone(), config_service::last_good(&config_file)],
    };
    let package_host = extension::PackageHost::start(
        hidden.clone(),
        state.logs_dir(),
        config.clone(),
        store.clone(),
        http::SecretAccess {
            resolver: resolver.clone(),
            config: config.clone(),
        },
        live.clone(),
        service.clone(),
    );
    let (stop, shutdown) = watch::channel(false);
    let kick = Arc::new(Notify::new());
    let instance = new_id();

    let files = ArtifactFiles {
        logs: state.logs_dir(),
        declared: state.artifacts_dir(),
    };
    let socket_path = state.clear_management_socket()?;
    let listener =
        bind_owner_only(&socket_path).map_err(|e| DaemonError::io("bind the management socket", &socket_path, e))?;
    let state_of_api = Management {
        store: store.clone(),
        config: config.clone(),
        instance: instance.clone(),
        kick: kick.clone(),
        control: service.clone(),
        cursors: Cursors::new(operator::cursor_key(&state)?),
        files: files.clone(),
        registry: live.clone(),
        packages: Arc::new(packages::PackageService {
            store: store.clone(),
            config: config.clone(),
            dir: state.root().join("packages"),
            host: package_host,
        }),
    };
    let management = management_router(state_of_api.clone());
    if let Some(addr) = options.listen {
        // The same router: the same bearer authentication, roles and rules as on the socket.
        let tcp = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| DaemonError::io("listen on", std::path::Path::new(&addr.to_string()), e))?;
        tracing::info!(%addr, seams = options.conformance_seams, "serving the management API on loopback TCP too");
        let mut tcp_shutdown = shutdown.clone();
        let loopback = loopback_router(state_of_api, options.conformance_seams);
        tokio::spawn(serve(tcp, loopback, async move {
            let _ = tcp_shutdown.changed().await;
        }));
    }
    let mut server_shutdown = shutdown.clone();
    let server = tokio::spawn(serve(listener, management, async move {
        let _ = server_shutdown.changed().await;
    }));

    let os_dir = options.os_dir.unwrap_or_else(own_dir);
    if !os_dir.join("os").is_file() {
        tracing::warn!(dir = %os_dir.display(), "no `os` binary here; executions will not find it on PATH (build both binaries, e.g. `cargo build --release`)");
    }
    let runtime = runtime::Runtime {
        toolbelt: Toolbelt::new(store.clone(), config.clone(), Arc::new(SystemClock), live.get())
            .with_live_registry(live)
            .with_classifier(service.clone()),
        store,
        config,
        configs: service,
        resolver,
        instance,
        runs_dir: state.runs_dir(),
        files,
        playbook_dir: state.root().join("playbooks"),
        os_dir,
        hidden,
        token_lifetime: options.token_lifetime,
        kick,
        shutdown,
        supervised: Arc::default(),
    };
    if let Err(e) = runtime.recover().await {
        tracing::error!(error = %e, "recovery failed");
    }
    tokio::spawn(runtime.clone().sweep_loop());
    let scheduler = tokio::spawn(runtime.scheduler_loop());
    tracing::info!(state = %state.root().display(), socket = %socket_path.display(), "open-conduit daemon is up");

    signals.wait().await;
    tracing::info!("shutting down");
    let _ = stop.send(true);
    let _ = scheduler.await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), server).await;
    let _ = std::fs::remove_file(&socket_path);
    Ok(())
}

/// SIGINT and SIGTERM, the two ways to stop the daemon.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install(state: &StateDir) -> Result<Signals, DaemonError> {
        let io = |e| DaemonError::io("install signal handlers in", state.root(), e);
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(io)?,
            int: signal(SignalKind::interrupt()).map_err(io)?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

fn own_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."))
}
