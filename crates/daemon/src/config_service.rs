//! The configuration service: which generation runs, and how a new one is applied.
//!
//! The committed generation is the source of truth. The store keeps each generation's hash and its
//! sealed text: every secret reference replaced by its digest, so no reference's text reaches the
//! store, and every daemon on a shared store can run the generation from it. The written text of
//! each generation this daemon published is kept owner-only in
//! `<state>/private/config/generation-<n>.json`, and every reference it was given in
//! `<state>/private/references.json`, from which the resolver resolves sealed references. A disk
//! edit of the configuration file alone never changes running behaviour: only `apply` (or a start
//! whose committed generation no longer validates) publishes a generation.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use conduit_config::{parse_with, CurrentConfig, Diagnostic, Registry, Snapshot};
use conduit_core::{ErrorCode, Refusal, TokenRecord};
use conduit_server::{now, Applied, Checked, ConfigControl, ConfigView};
use conduit_store::{Store, StoreError};
use conduit_toolbelt::{Generations, RefusalClassifier};
use serde_json::Value;

mod file;
mod generations;
mod pinned;

pub use file::last_good;
use file::{read_file, SavedFile};
use generations::{activate_at_start, publish, restore, Starting, Unpublished};

use crate::failpoint::failpoint;
use crate::secrets::learn;
use crate::state::create_private_dir;
use crate::DaemonError;

pub struct ConfigService {
    store: Arc<dyn Store>,
    current: CurrentConfig,
    /// What configuration may name; replaced when packages are installed or removed.
    registry: std::sync::RwLock<Registry>,
    /// The configuration file `apply` saves to.
    file: PathBuf,
    /// Where each generation's full text is kept, owner-only.
    generations: PathBuf,
    /// The private directory, where the reference book is kept.
    private: PathBuf,
    /// Other daemons may commit generations to this store.
    shared: bool,
    /// Applies, and catching up with another daemon's, run one at a time.
    applying: Mutex<()>,
    /// The last generation another daemon committed that this one could not run (so the log says
    /// so once, not at every call).
    unrunnable: AtomicI64,
    /// Each generation as this daemon validated it when it first ran or was restored.
    pinned: pinned::Pinned,
}

/// A file that says something other than the generation restored is not run: a disk edit alone
/// never changes running behaviour (the seed's start-up rule). Say so, with the command that runs
/// it. On a shared store the generation may be another daemon's newer one, which applying this
/// daemon's file would replace: say where to read what runs instead.
fn warn_if_unapplied(file: &Path, on_disk: &Snapshot, active: &Snapshot, shared: bool) {
    if on_disk.hash() == active.hash() {
        return;
    }
    if shared {
        tracing::warn!(
            file = %file.display(),
            generation = active.generation(),
            "the configuration file differs from the generation committed to the shared store, which \
             runs; `open-conduit config show` prints it (apply the file only to replace it on every daemon)"
        );
    } else {
        tracing::warn!(
            file = %file.display(),
            generation = active.generation(),
            "the configuration file differs from the active generation, which keeps running; \
             apply it with `open-conduit config apply {}`",
            file.display()
        );
    }
}

impl ConfigService {
    /// Activates the configuration at start: the committed generation if it still validates; else the
    /// file, published as the next generation; with neither, the default configuration as generation 1
    /// (no file is written). A file that exists but does not validate stops the start. The file's
    /// references are learned either way. Daemons starting at once on an empty shared store publish
    /// one generation 1: the others then run it. On a shared store, a committed generation that does
    /// not validate here is never replaced by this daemon's file (see [`activate_at_start`]).
    pub fn start(
        store: Arc<dyn Store>,
        file: &Path,
        private: &Path,
        registry: Registry,
        shared: bool,
    ) -> Result<ConfigService, DaemonError> {
        let generations = private.join("config");
        create_private_dir(&generations)?;
        let from_file = read_file(file, &registry);
        if let Ok(Some(snapshot)) = &from_file {
            learn(private, snapshot)?;
        }
        let starting = Starting {
            dirs: (&generations, private),
            registry: &registry,
            shared,
        };
        let activate = || activate_at_start(&*store, &starting, || read_file(file, &registry));
        let snapshot = match activate() {
            Err(Unpublished::Stale(_)) => activate(),
            other => other,
        }
        .map_err(|e| match e {
            Unpublished::Stale(g) => DaemonError::StoredConfig(format!(
                "generation {g} was published as this daemon started; start it again"
            )),
            Unpublished::Failed(e) => e,
        })?;
        tracing::info!(
            generation = snapshot.generation(),
            hash = snapshot.hash(),
            "configuration active"
        );
        if let Ok(Some(on_disk)) = &from_file {
            warn_if_unapplied(file, on_disk, &snapshot, shared);
        }
        let pinned = pinned::Pinned::default();
        pinned.keep(&snapshot);
        Ok(ConfigService {
            pinned,
            store,
            current: CurrentConfig::new(snapshot),
            registry: std::sync::RwLock::new(registry),
            file: file.to_owned(),
            generations,
            private: private.to_owned(),
            shared,
            applying: Mutex::new(()),
            unrunnable: AtomicI64::new(0),
        })
    }

    pub fn current(&self) -> CurrentConfig {
        self.current.clone()
    }

    /// What configuration may name now.
    fn registry(&self) -> Registry {
        self.registry.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces what configuration may name (an installed or removed package). Names only join or
    /// leave with a package, and removal is refused while the active generation names it, so the
    /// active generation stays valid.
    pub fn set_registry(&self, registry: Registry) {
        *self.registry.write().unwrap_or_else(|p| p.into_inner()) = registry;
    }

    /// A committed generation, for what an attempt pinned at claim (`None` if it cannot be restored).
    pub fn generation(&self, generation: i64) -> Option<Snapshot> {
        if let Some(pinned) = self.pinned.get(generation) {
            return Some(pinned);
        }
        let (hash, stored) = self.store.read(|tx| tx.generation(generation)).ok().flatten()?;
        let restored = restore(&self.generations, generation, (&hash, &stored), &self.registry()).ok()?;
        self.pinned.keep(&restored);
        Some(restored)
    }

    /// Makes `snapshot` the active generation, pinned as validated now.
    fn activate(&self, snapshot: Snapshot) {
        self.pinned.keep(&snapshot);
        self.current.replace(snapshot);
    }

    /// Runs generation `latest` (another daemon's) unless this daemon already does, and answers
    /// whether it now does; the caller holds `applying`.
    fn run_latest(&self, latest: i64) -> bool {
        let active = self.current.get().generation();
        if latest <= active {
            return true;
        }
        let stored = match self.store.read(|tx| tx.generation(latest)) {
            Ok(Some(stored)) => stored,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(error = %e, generation = latest, "could not read the latest configuration generation");
                return false;
            }
        };
        match restore(&self.generations, latest, (&stored.0, &stored.1), &self.registry()) {
            Ok(snapshot) => {
                tracing::info!(
                    generation = latest,
                    hash = snapshot.hash(),
                    "running the generation another daemon committed"
                );
                self.activate(snapshot);
                true
            }
            Err(why) => {
                if self.unrunnable.swap(latest, Ordering::Relaxed) != latest {
                    tracing::error!(
                        generation = latest,
                        running = active,
                        why,
                        "cannot run the generation another daemon committed (install here what it names, such as \
                         a package installed only there); refusing calls until it can"
                    );
                }
                false
            }
        }
    }

    /// On a shared store, runs the store's latest generation if it is newer than the active one;
    /// refuses with `generation_unavailable` while this daemon cannot. The caller holds `applying`.
    fn catch_up_locked(&self) -> Result<(), Refusal> {
        let latest = self.store.read(|tx| tx.latest_generation_number());
        let latest = latest.map_err(|e| internal("read the latest configuration generation", e))?;
        match latest {
            Some(latest) if !self.run_latest(latest) => Err(unavailable(latest)),
            _ => Ok(()),
        }
    }

    fn parse(&self, text: &str) -> Result<Snapshot, Refusal> {
        parse_with(text.as_bytes(), &self.registry()).map_err(|found| {
            Refusal::new(ErrorCode::InvalidConfig, "the configuration is not valid")
                .with_remedy("fix each diagnostic; `open-conduit config check FILE` shows them offline")
                .with_field("diagnostics", serde_json::to_value(found).unwrap_or_default())
        })
    }

    /// Apply, in order: validate and check the expected generation; refuse removing or reparenting a
    /// scope with unfinished Work; keep the generation's text privately; save the file atomically with
    /// a `.last-good` backup; publish the generation and its scope records in one transaction; switch.
    fn apply_checked(&self, text: &str, expected: Option<i64>) -> Result<Applied, Refusal> {
        let _one_at_a_time = self.applying.lock().unwrap_or_else(|e| e.into_inner());
        if self.shared {
            self.catch_up_locked()?;
        }
        let candidate = self.parse(text)?;
        // Even an unchanged configuration teaches this daemon the references it gives.
        learn(&self.private, &candidate).map_err(|e| internal("keep the configuration's references", e))?;
        let active = self.current.get();
        if expected.is_some_and(|e| e != active.generation()) {
            return Err(stale(active.generation()));
        }
        if candidate.hash() == active.hash() {
            return Ok(applied(&active, false));
        }
        self.check_scopes_in_use(&active, &candidate)?;
        failpoint("apply:validated");
        let next = active.generation() + 1;
        let saved = SavedFile::save(&self.file, text).map_err(|e| internal("save the configuration file", e))?;
        failpoint("apply:file_saved");
        let published = match publish(&*self.store, (&self.generations, &self.private), candidate, next, now()) {
            Ok(published) => published,
            Err(unpublished) => {
                saved.put_back();
                return Err(match unpublished {
                    // Another daemon's apply won: this daemon runs it now.
                    Unpublished::Stale(latest) => {
                        let _runs_it = self.run_latest(latest);
                        stale(latest)
                    }
                    Unpublished::Failed(e) => internal("publish the generation", e),
                });
            }
        };
        failpoint("apply:published");
        self.activate(published.clone());
        tracing::info!(generation = next, hash = published.hash(), "applied configuration");
        Ok(applied(&published, true))
    }

    /// Removing or reparenting a scope that still has unfinished Work is `scope_in_use`.
    fn check_scopes_in_use(&self, active: &Snapshot, candidate: &Snapshot) -> Result<(), Refusal> {
        let changed: Vec<&String> = active
            .config()
            .scopes
            .iter()
            .filter(|(id, scope)| candidate.scope(id).is_none_or(|c| c.parent != scope.parent))
            .map(|(id, _)| id)
            .collect();
        let busy: Vec<Diagnostic> = self
            .store
            .read(|tx| -> Result<Vec<Diagnostic>, StoreError> {
                let mut busy = Vec::new();
                for id in changed {
                    if tx.count_unfinished_work(id)? > 0 {
                        busy.push(Diagnostic::error(
                            format!("/scopes/{id}"),
                            "scope_in_use",
                            "this scope has unfinished Work; it cannot be removed or reparented now",
                            "let its Work finish (or cancel it), then apply again",
                        ));
                    }
                }
                Ok(busy)
            })
            .map_err(|e| internal("check the scopes in use", e))?;
        if busy.is_empty() {
            return Ok(());
        }
        Err(Refusal::new(
            ErrorCode::ScopeInUse,
            "a scope with unfinished Work would be removed or reparented",
        )
        .with_field("diagnostics", serde_json::to_value(busy).unwrap_or_default()))
    }
}

/// A refused call whose operation the playbook of the attempt's pinned binding declares is
/// `config_drift`: the configuration lags what the playbook uses, which is the operator's to fix.
impl RefusalClassifier for ConfigService {
    fn classify(&self, token: &TokenRecord, operation: &str) -> Option<&'static str> {
        let pinned = self.generation(token.generation)?;
        let declares = pinned
            .playbook_operations(&token.scope, &token.binding)?
            .contains(operation);
        declares.then_some("config_drift")
    }
}

impl Generations for ConfigService {
    fn shared(&self) -> bool {
        self.shared
    }

    /// On a shared store, makes the store's latest generation the active one when another daemon
    /// committed it since this one last looked: what every call and request asks first, so an apply
    /// on any daemon governs the next call on all. One small read when nothing changed.
    fn catch_up(&self) -> Result<(), Refusal> {
        if !self.shared {
            return Ok(());
        }
        let latest = self.store.read(|tx| tx.latest_generation_number());
        let latest = latest.map_err(|e| internal("read the latest configuration generation", e))?;
        if latest.is_none_or(|g| g <= self.current.get().generation()) {
            return Ok(());
        }
        let _one_at_a_time = self.applying.lock().unwrap_or_else(|e| e.into_inner());
        self.catch_up_locked()
    }
}

impl ConfigControl for ConfigService {
    fn view(&self) -> ConfigView {
        let active = self.current.get();
        ConfigView {
            generation: active.generation(),
            hash: active.hash().to_owned(),
            config: serde_json::from_str(&active.redacted_json()).unwrap_or_default(),
            warnings: active.warnings().to_vec(),
        }
    }

    fn check(&self, text: &str) -> Checked {
        match parse_with(text.as_bytes(), &self.registry()) {
            Ok(snapshot) => Checked {
                valid: true,
                hash: Some(snapshot.hash().to_owned()),
                diagnostics: snapshot.warnings().to_vec(),
            },
            Err(diagnostics) => Checked {
                valid: false,
                hash: None,
                diagnostics,
            },
        }
    }

    fn apply(&self, text: &str, expected_generation: Option<i64>) -> Result<Applied, Refusal> {
        self.apply_checked(text, expected_generation)
    }

    fn set(&self, pointer: &str, value: Value, expected_generation: Option<i64>) -> Result<Applied, Refusal> {
        let active = self.current.get();
        let mut document: Value = serde_json::from_str(active.written_json()).unwrap_or_default();
        set_pointer(&mut document, pointer, value)?;
        let text = serde_json::to_string_pretty(&document).unwrap_or_default();
        self.apply_checked(&text, expected_generation.or(Some(active.generation())))
    }
}

fn unavailable(latest: i64) -> Refusal {
    Refusal::new(
        ErrorCode::GenerationUnavailable,
        "this daemon cannot run the configuration generation another daemon committed",
    )
    .with_remedy("install on this daemon what that generation names (such as a package installed on another daemon); the daemon log names the generation")
    .with_field("generation", latest.into())
}

fn stale(active: i64) -> Refusal {
    Refusal::new(
        ErrorCode::StaleGeneration,
        "the active generation is not the one expected",
    )
    .with_remedy("read the active configuration again and reapply your change to it")
    .with_field("generation", active.into())
}

fn applied(snapshot: &Snapshot, changed: bool) -> Applied {
    Applied {
        generation: snapshot.generation(),
        hash: snapshot.hash().to_owned(),
        changed,
        // A valid configuration's warnings (`sandbox_disabled`, unused grants) say what it allows.
        diagnostics: snapshot.warnings().to_vec(),
    }
}

fn internal(what: &str, e: impl std::fmt::Display) -> Refusal {
    tracing::error!(error = %e, "could not {what}");
    Refusal::internal()
}

/// Sets `value` at `pointer`, creating the last segment of an object; `/a/-` appends to an array.
fn set_pointer(document: &mut Value, pointer: &str, value: Value) -> Result<(), Refusal> {
    let bad = || {
        Refusal::new(ErrorCode::InvalidRequest, "the pointer does not name a settable place")
            .with_remedy("use a JSON pointer whose parent exists, such as /scopes/setup/enabled")
    };
    let (parent, last) = pointer.rsplit_once('/').ok_or_else(bad)?;
    let last = last.replace("~1", "/").replace("~0", "~");
    match document.pointer_mut(parent).ok_or_else(bad)? {
        Value::Object(map) => {
            map.insert(last, value);
        }
        Value::Array(items) if last == "-" => items.push(value),
        Value::Array(items) => {
            *items
                .get_mut(last.parse::<usize>().map_err(|_| bad())?)
                .ok_or_else(bad)? = value
        }
        _ => return Err(bad()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_set_objects_and_arrays() {
        let mut doc = json!({"a": {"b": 1}, "list": [1, 2]});
        set_pointer(&mut doc, "/a/b", json!(2)).unwrap();
        set_pointer(&mut doc, "/a/c~1d", json!(3)).unwrap();
        set_pointer(&mut doc, "/list/-", json!(3)).unwrap();
        set_pointer(&mut doc, "/list/0", json!(0)).unwrap();
        assert_eq!(doc, json!({"a": {"b": 2, "c/d": 3}, "list": [0, 2, 3]}));
        assert!(set_pointer(&mut doc, "/missing/x", json!(1)).is_err());
        assert!(set_pointer(&mut doc, "/list/9", json!(1)).is_err());
    }

    #[test]
    fn an_apply_that_another_daemon_beat_to_its_generation_is_stale_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(conduit_store_sqlite::SqliteStore::open(&dir.path().join("s.db")).unwrap());
        // Not shared, so B does not catch up first: its apply meets A's only at the commit.
        let daemon = |name: &str| {
            let root = dir.path().join(name);
            create_private_dir(&root).unwrap();
            let file = root.join("config.json");
            let service = ConfigService::start(store.clone(), &file, &root.join("private"), Registry::default(), false);
            (service.unwrap(), file, root.join("private/config/generation-2.json"))
        };
        let ((a, _, _), (b, b_file, b_kept)) = (daemon("a"), daemon("b"));
        let limits = r#"{"version":1,"limits":{"causal_max_depth":3,"causal_per_minute":5}}"#;
        assert!(b.check(limits).valid);
        a.apply(r#"{"version":1}"#, Some(1)).unwrap();
        let refused = b.apply(limits, Some(1)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::StaleGeneration);
        assert!(
            !b_file.exists() && !b_kept.exists(),
            "B's file and copy are as they were"
        );
        assert_eq!(b.current().get().generation(), 2, "B runs the winner now");
        assert_eq!(
            b.apply(limits, Some(2)).unwrap().generation,
            3,
            "control: applied once current"
        );
    }

    #[test]
    fn the_backup_sits_beside_the_file() {
        assert_eq!(
            last_good(Path::new("/s/config.json")),
            PathBuf::from("/s/config.json.last-good")
        );
    }
}
