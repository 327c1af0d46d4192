//! The daemon's lifetime: lock the state directory, assemble the services, serve the management
//! API, recover and run the scheduler, and stop cleanly on SIGINT, SIGTERM or SIGHUP.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use conduit_config::CurrentConfig;
use conduit_scheduler::{Lessee, DEFAULT_LEASE};
use conduit_server::{
    bind_owner_only, ingress_router, loopback_router, management_router, now, serve, ArtifactFiles, ConnectionLimits,
    Cursors, KeptEvents, Management, SharedConnections, SystemClock,
};
use conduit_store::Store;
use conduit_toolbelt::{LiveRegistry, Toolbelt};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::config_service::{self, ConfigService};
use crate::confine::Hidden;
use crate::extensions::ingress::Ingresses;
use crate::extensions::secret_access::SecretAccess;
use crate::packages::{PackageHost, PackageService};
use crate::secrets::Resolver;
use crate::{config_registry, operator, release_registry, runtime, DaemonError, DaemonOptions, StateDir};

/// Runs the daemon until SIGINT, SIGTERM or SIGHUP.
pub async fn run(options: DaemonOptions) -> Result<(), DaemonError> {
    if let Some(addr) = options.listen.filter(|a| !a.ip().is_loopback()) {
        return Err(DaemonError::NotLoopback(addr));
    }
    let state = StateDir::lock(&options.state_dir)?;
    make_non_dumpable(&state)?;
    let open_files = raise_open_files_limit();
    // Before anything is served: a signal that arrives once clients can see the daemon stops it cleanly.
    let signals = Signals::install(&state)?;
    let services = Services::assemble(&state, &options)?;
    let (stop, shutdown) = watch::channel(false);
    let socket_path = state.clear_management_socket()?;
    let server = serve_management(&state, &services, &options, &socket_path, &shutdown).await?;
    let toolbelt_connections = toolbelt_budget(open_files, &services.config.get().limits());
    let scheduler = start_scheduler(&state, services, &options, toolbelt_connections, shutdown).await;
    tracing::info!(state = %state.root().display(), socket = %socket_path.display(), "open-conduit daemon is up");

    signals.wait().await;
    tracing::info!("shutting down");
    let _ = stop.send(true);
    let _ = scheduler.await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), server).await;
    let _ = std::fs::remove_file(&socket_path);
    Ok(())
}

/// No process of the daemon's user may read its memory or its /proc files (ptrace-guarded).
fn make_non_dumpable(state: &StateDir) -> Result<(), DaemonError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| DaemonError::io("make the daemon non-dumpable (prctl) for", state.root(), e.into()))
}

/// What every execution's toolbelt socket shares, sized once at start from the open-files limit.
fn toolbelt_budget(open_files: u64, limits: &conduit_config::Limits) -> SharedConnections {
    let budget =
        SharedConnections::within_open_files(open_files, limits.management_connections, limits.toolbelt_connections);
    tracing::info!(open_files, toolbelt_connections = budget.size(), "connection budget");
    budget
}

/// Lets the daemon hold as many open files as the hard limit allows: every connection, socket, log
/// and child pipe is one, and the connection caps are what keep them bounded. Answers the limit
/// the daemon runs under.
fn raise_open_files_limit() -> u64 {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let (current, maximum) = (limit.current.unwrap_or(u64::MAX), limit.maximum.unwrap_or(u64::MAX));
    if current >= maximum {
        return current;
    }
    let raised = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match rustix::process::setrlimit(rustix::process::Resource::Nofile, raised) {
        Ok(()) => maximum,
        Err(e) => {
            tracing::warn!(error = %e, "could not raise the open files limit");
            current
        }
    }
}

/// What the management API and the scheduler share.
struct Services {
    store: Arc<dyn Store>,
    configs: Arc<ConfigService>,
    config: CurrentConfig,
    resolver: Resolver,
    /// First-party extensions and installed packages register here; the configuration may grant
    /// what they register. Installing or removing a package replaces the registry whole.
    live: Arc<LiveRegistry>,
    hidden: Hidden,
    packages: Arc<PackageHost>,
    files: ArtifactFiles,
    instance: String,
    /// Other daemons may lease attempts on this store.
    shared_store: bool,
    kick: Arc<Notify>,
}

impl Services {
    /// Opens the store, activates the configuration, bootstraps the owner's credential and starts
    /// the installed packages' host.
    fn assemble(state: &StateDir, options: &DaemonOptions) -> Result<Services, DaemonError> {
        // First: a damaged id stops the start before anything is started.
        let instance = state.instance_id()?;
        let resolver = Resolver::of_state(state);
        let store = options.store.open(state, &resolver)?;
        let config_file = options
            .config_file
            .clone()
            .unwrap_or_else(|| state.root().join("config.json"));
        let configs = ConfigService::start(
            store.clone(),
            &config_file,
            &state.private_dir(),
            config_registry(state.root()),
            options.store.is_shared(),
        )?;
        operator::bootstrap_owner(state, &*store, now(), options.store.is_shared())?;
        let config = configs.current();
        let configs = Arc::new(configs);
        let live = LiveRegistry::new(Arc::new(release_registry()));
        let hidden = Hidden {
            state_dir: state.root().to_owned(),
            private_files: vec![config_file.clone(), config_service::last_good(&config_file)],
        };
        let secrets = SecretAccess {
            resolver: resolver.clone(),
            config: config.clone(),
        };
        let packages = PackageHost::start(
            hidden.clone(),
            state.logs_dir(),
            config.clone(),
            store.clone(),
            secrets,
            live.clone(),
            configs.clone(),
        );
        let files = ArtifactFiles {
            logs: state.logs_dir(),
            declared: state.artifacts_dir(),
        };
        Ok(Services {
            store,
            configs,
            config,
            resolver,
            live,
            hidden,
            packages,
            files,
            instance,
            shared_store: options.store.is_shared(),
            kick: Arc::new(Notify::new()),
        })
    }

    fn management(&self, state: &StateDir) -> Result<Management, DaemonError> {
        // Releases before the cursors' key moved into the store kept it here.
        let _ = std::fs::remove_file(state.private_dir().join("cursor.key"));
        Ok(Management {
            store: self.store.clone(),
            config: self.config.clone(),
            instance: self.instance.clone(),
            kick: self.kick.clone(),
            control: self.configs.clone(),
            cursors: Cursors::of_store(&*self.store)?,
            files: self.files.clone(),
            registry: self.live.clone(),
            packages: Arc::new(PackageService {
                store: self.store.clone(),
                config: self.config.clone(),
                dir: state.root().join("packages"),
                host: self.packages.clone(),
            }),
            kept_events: KeptEvents::default(),
        })
    }
}

/// Serves the management API on the owner-only socket, and on loopback TCP when asked.
async fn serve_management(
    state: &StateDir,
    services: &Services,
    options: &DaemonOptions,
    socket_path: &Path,
    shutdown: &watch::Receiver<bool>,
) -> Result<JoinHandle<()>, DaemonError> {
    let listener =
        bind_owner_only(socket_path).map_err(|e| DaemonError::io("bind the management socket", socket_path, e))?;
    let api = services.management(state)?;
    let limits = ConnectionLimits::management(&services.config.get().limits());
    if let Some(addr) = options.listen {
        // The same router: the same bearer authentication, roles and rules as on the socket.
        let tcp = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| DaemonError::io("listen on", Path::new(&addr.to_string()), e))?;
        tracing::info!(%addr, seams = options.conformance_seams, "serving the management API on loopback TCP too");
        let ingress = Arc::new(Ingresses {
            store: services.store.clone(),
            secrets: SecretAccess {
                resolver: services.resolver.clone(),
                config: services.config.clone(),
            },
            kick: services.kick.clone(),
            generations: services.configs.clone(),
        });
        // The ingresses prove their deliveries by signature, outside the API's bearer authentication.
        let loopback = loopback_router(api.clone(), options.conformance_seams).merge(ingress_router(ingress));
        tokio::spawn(serve(tcp, loopback, limits.clone(), stopped(shutdown.clone())));
    }
    Ok(tokio::spawn(serve(
        listener,
        management_router(api),
        limits,
        stopped(shutdown.clone()),
    )))
}

async fn stopped(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.changed().await;
}

/// Recovers the attempts an earlier daemon left, then runs the sweeps and the scheduler loop.
async fn start_scheduler(
    state: &StateDir,
    services: Services,
    options: &DaemonOptions,
    toolbelt_connections: SharedConnections,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let os_dir = options.os_dir.clone().unwrap_or_else(own_dir);
    if !os_dir.join("os").is_file() {
        tracing::warn!(dir = %os_dir.display(), "no `os` binary here; executions will not find it on PATH (build both binaries, e.g. `cargo build --release`)");
    }
    let runtime = runtime::Runtime {
        toolbelt: Toolbelt::new(
            services.store.clone(),
            services.config.clone(),
            Arc::new(SystemClock),
            services.live.get(),
        )
        .with_live_registry(services.live)
        .with_classifier(services.configs.clone())
        .with_generations(services.configs.clone()),
        store: services.store,
        config: services.config,
        configs: services.configs,
        resolver: services.resolver,
        lessee: Lessee {
            owner: services.instance,
            lease: options.lease.unwrap_or(DEFAULT_LEASE),
        },
        shared_store: services.shared_store,
        runs_dir: state.runs_dir(),
        works_dir: state.root().join("works"),
        files: services.files,
        playbook_dir: state.root().join("playbooks"),
        os_dir,
        hidden: services.hidden,
        token_lifetime: options.token_lifetime,
        toolbelt_connections,
        kick: services.kick,
        shutdown,
        supervised: Arc::default(),
    };
    if let Err(e) = runtime.recover().await {
        tracing::error!(error = %e, "recovery failed");
    }
    tokio::spawn(runtime.clone().sweep_loop());
    tokio::spawn(runtime.scheduler_loop())
}

/// SIGINT, SIGTERM and SIGHUP (its terminal went away): each stops the daemon cleanly.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install(state: &StateDir) -> Result<Signals, DaemonError> {
        let io = |e| DaemonError::io("install signal handlers in", state.root(), e);
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(io)?,
            int: signal(SignalKind::interrupt()).map_err(io)?,
            hup: signal(SignalKind::hangup()).map_err(io)?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
            _ = self.hup.recv() => {}
        }
    }
}

fn own_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."))
}
