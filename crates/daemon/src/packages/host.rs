//! The packages this daemon serves: one runtime per installed package, and the registry they are
//! served in, rebuilt whole after every install and removal.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use conduit_config::CurrentConfig;
use conduit_packages::Manifest;
use conduit_store::Store;
use conduit_toolbelt::{LiveRegistry, Registry};

use crate::confine::Hidden;
use crate::extensions::approvals::HumanGate;
use crate::extensions::secret_access::SecretAccess;
use crate::extensions::{registry_with, Live};

use super::installed::installed_manifests;
use super::runtime::{PackageGate, PackageRuntime};

/// The packages this daemon serves, and the live registry they are served in: rebuilt whole from
/// the installed copies after every install and removal, keeping the running process of every
/// package whose version did not change and stopping the others.
pub struct PackageHost {
    /// The state directory (`hidden.state_dir`), hidden from every package with the configuration
    /// file.
    pub hidden: Hidden,
    pub logs_dir: PathBuf,
    pub config: CurrentConfig,
    pub store: Arc<dyn Store>,
    pub secrets: SecretAccess,
    pub live: Arc<LiveRegistry>,
    pub configs: Arc<crate::config_service::ConfigService>,
    /// The runtime serving each package, by `name@version`.
    runtimes: Mutex<HashMap<String, Arc<PackageRuntime>>>,
    /// For stopping replaced processes from whatever thread a reload runs on.
    tokio: tokio::runtime::Handle,
}

impl PackageHost {
    /// The host, with the installed packages loaded. Call from within the daemon's runtime.
    pub fn start(
        hidden: Hidden,
        logs_dir: PathBuf,
        config: CurrentConfig,
        store: Arc<dyn Store>,
        secrets: SecretAccess,
        live: Arc<LiveRegistry>,
        configs: Arc<crate::config_service::ConfigService>,
    ) -> Arc<PackageHost> {
        let host = Arc::new(PackageHost {
            hidden,
            logs_dir,
            config,
            store,
            secrets,
            live,
            configs,
            runtimes: Mutex::default(),
            tokio: tokio::runtime::Handle::current(),
        });
        host.reload();
        host
    }

    /// Serves exactly the installed packages: the toolbelt's registry and what configuration may
    /// name are replaced together.
    pub fn reload(&self) {
        self.reload_replacing(None);
    }

    /// [`PackageHost::reload`], starting `replaced` afresh even if its version did not change
    /// (a reinstall copies new files under the same version).
    pub fn reload_replacing(&self, replaced: Option<&str>) {
        let mut runtimes = self.runtimes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(name) = replaced {
            self.stop_versions_of(&mut runtimes, name);
        }
        let next = self.keep_or_start(&mut runtimes);
        for (_, stale) in runtimes.drain() {
            self.stop(stale);
        }
        let registry = self.registry_serving(&next);
        // What configuration may name is this registry's names (and the playbooks): no second scan.
        let playbooks = self.hidden.state_dir.join("playbooks");
        self.configs
            .set_registry(crate::playbooks::register(registry.config_registry(), &playbooks));
        self.live.replace(registry);
        *runtimes = next;
    }

    /// Stops every running version of `name` (a reinstall under the same version).
    fn stop_versions_of(&self, runtimes: &mut HashMap<String, Arc<PackageRuntime>>, name: &str) {
        let prefix = format!("{name}@");
        let stale: Vec<String> = runtimes.keys().filter(|id| id.starts_with(&prefix)).cloned().collect();
        for id in stale {
            if let Some(runtime) = runtimes.remove(&id) {
                self.stop(runtime);
            }
        }
    }

    /// A runtime for every installed package: the running one when its version is unchanged (taken
    /// out of `runtimes`, which keeps only what is stale), a new one otherwise.
    fn keep_or_start(
        &self,
        runtimes: &mut HashMap<String, Arc<PackageRuntime>>,
    ) -> HashMap<String, Arc<PackageRuntime>> {
        let mut next = HashMap::new();
        for manifest in installed_manifests(&self.hidden.state_dir.join("packages")) {
            let id = manifest.id();
            let runtime = runtimes.remove(&id).unwrap_or_else(|| self.runtime(manifest));
            next.insert(id, runtime);
        }
        next
    }

    fn stop(&self, runtime: Arc<PackageRuntime>) {
        self.tokio.spawn(async move { runtime.stop().await });
    }

    /// The release's extensions with the human approvals gate, then these packages, each gating
    /// package's gate installed.
    fn registry_serving(&self, runtimes: &HashMap<String, Arc<PackageRuntime>>) -> Registry {
        let registrations = runtimes
            .values()
            .map(|r| r.manifest.registration(r.handler()))
            .collect();
        let approvals = HumanGate {
            store: self.store.clone(),
            config: self.config.clone(),
            live: self.live.clone(),
        };
        let live = Live {
            secrets: self.secrets.clone(),
            approvals: Arc::new(approvals),
            store: self.store.clone(),
        };
        let mut registry = registry_with(Some(live), registrations);
        for runtime in runtimes.values() {
            let manifest = &runtime.manifest;
            if let Err(e) = registry.set_requirement(&manifest.name, manifest.requirement()) {
                tracing::warn!(package = %manifest.name, error = %e, "a package's requirement was not recorded");
            }
        }
        for runtime in runtimes.values().filter(|r| r.manifest.gates()) {
            let gate = Arc::new(PackageGate(runtime.clone()));
            if let Err(e) = registry.set_gate(&runtime.manifest.name, gate) {
                tracing::warn!(package = %runtime.manifest.name, error = %e, "a package's gate was not installed");
            }
        }
        registry
    }

    fn runtime(&self, manifest: Manifest) -> Arc<PackageRuntime> {
        let dir = self.hidden.state_dir.join("packages").join(&manifest.name);
        let log = self.logs_dir.join(format!("package-{}.log", manifest.name));
        PackageRuntime::new(
            manifest,
            self.hidden.clone(),
            dir,
            log,
            self.config.clone(),
            self.store.clone(),
        )
    }
}
