//! A generation's texts: the private copy of what this daemon published, the sealed copy in the
//! store, and the choice a start makes between the committed generation, the file and the default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use conduit_config::{default_config_json, parse_with, Registry, Snapshot};
use conduit_core::canonical::sha256_hex;
use conduit_core::Timestamp;
use conduit_server::now;
use conduit_store::{Store, StoreError, Tx};

use crate::secrets::learn;
use crate::state::write_private_file;
use crate::DaemonError;

/// Why a generation was not published.
pub(super) enum Unpublished {
    /// Another daemon committed generation `.0` first.
    Stale(i64),
    Failed(DaemonError),
}

impl From<DaemonError> for Unpublished {
    fn from(e: DaemonError) -> Self {
        Unpublished::Failed(e)
    }
}

/// What a start chooses its generation with.
pub(super) struct Starting<'a> {
    /// The private copies of generations, and the private directory (the reference book's).
    pub(super) dirs: (&'a Path, &'a Path),
    pub(super) registry: &'a Registry,
    /// Other daemons run the committed generation.
    pub(super) shared: bool,
}

/// Chooses the generation a start runs (see [`ConfigService::start`]), publishing it when it is
/// new; `from_file` reads the configuration file. On a shared store, a committed generation that
/// does not validate here (it names a package installed only on another daemon) is the other
/// daemons' configuration too: this daemon does not publish its file over it, but starts on the
/// file (or the default) as generation 0, unpublished, and refuses every call until it can run
/// the committed one.
pub(super) fn activate_at_start(
    store: &dyn Store,
    starting: &Starting<'_>,
    from_file: impl Fn() -> Result<Option<Snapshot>, DaemonError>,
) -> Result<Snapshot, Unpublished> {
    let (dirs, registry) = (starting.dirs, starting.registry);
    let committed = store.read(|tx| tx.latest_generation()).map_err(DaemonError::from)?;
    let restored = committed
        .as_ref()
        .map(|(g, hash, stored)| restore(dirs.0, *g, (hash, stored), registry));
    let from_file = match (from_file(), &restored) {
        (Err(file_error), Some(Err(stored))) => {
            return Err(Unpublished::Failed(DaemonError::Unrestorable {
                stored: stored.clone(),
                file: Box::new(file_error),
            }))
        }
        (result, _) => result?,
    };
    let default = || parse_with(default_config_json().as_bytes(), registry).map_err(DaemonError::Config);
    let at = now();
    match (restored, from_file) {
        (Some(Ok(snapshot)), _) => Ok(snapshot),
        (Some(Err(stored)), file) if starting.shared => {
            tracing::error!(error = %stored, "the shared store's committed generation does not validate here; refusing calls until it does");
            Ok(file.map_or_else(default, Ok)?.at_generation(0))
        }
        (Some(Err(stored)), Some(file_snapshot)) => {
            tracing::warn!(error = %stored, "the committed generation no longer validates; adopting the config file");
            let next = committed.map_or(1, |(g, _, _)| g + 1);
            publish(store, dirs, file_snapshot, next, at)
        }
        (Some(Err(stored)), None) => Err(DaemonError::StoredConfig(stored).into()),
        (None, Some(file_snapshot)) => publish(store, dirs, file_snapshot, 1, at),
        (None, None) => publish(store, dirs, default()?, 1, at),
    }
}

/// A committed generation, from this daemon's private copy of its text when it has one (written
/// with its references), else from the sealed text the store keeps; checked against its stored
/// hash and validated against the running release. The error says why it cannot be restored,
/// without quoting any of it.
pub(super) fn restore(
    generations: &Path,
    generation: i64,
    (hash, stored): (&str, &str),
    registry: &Registry,
) -> Result<Snapshot, String> {
    let private = std::fs::read(generation_file(generations, generation)).ok();
    let registry = &pinned_playbooks(generations, generation, registry);
    let candidates = private
        .as_deref()
        .map(|text| (text, true))
        .into_iter()
        .chain([(stored.as_bytes(), false)]);
    let mut why = None;
    for (text, ours) in candidates {
        match parse_with(text, registry) {
            // The store's copy names references only sealed: a daemon resolves only references it
            // was itself given, never ones the store hands it.
            Ok(snapshot) if !ours && snapshot.references().next().is_some() => {
                why.get_or_insert(format!(
                    "generation {generation}'s text in the store names a reference unsealed"
                ));
            }
            // A generation published before hashes were over the sealed text has its written text's.
            Ok(snapshot) if snapshot.hash() == hash || sha256_hex(text) == hash => {
                return Ok(snapshot.at_generation(generation))
            }
            Ok(_) => {}
            Err(found) => {
                let codes: Vec<String> = found.iter().map(|d| format!("{} {}", d.pointer, d.code)).collect();
                why.get_or_insert(format!(
                    "generation {generation} no longer validates: {}",
                    codes.join(", ")
                ));
            }
        }
    }
    Err(why.unwrap_or_else(|| format!("generation {generation}'s text does not match its hash")))
}

pub(super) fn generation_file(generations: &Path, generation: i64) -> PathBuf {
    generations.join(format!("generation-{generation}.json"))
}

/// Where this daemon keeps the operations each playbook of a generation declared when it published
/// the generation.
fn playbooks_file(generations: &Path, generation: i64) -> PathBuf {
    generations.join(format!("generation-{generation}.playbooks.json"))
}

/// `registry` with the playbooks of `generation` as they were when this daemon published it, so a
/// playbook edited since does not change what the generation declared (`config_drift`).
fn pinned_playbooks(generations: &Path, generation: i64, registry: &Registry) -> Registry {
    let kept = std::fs::read(playbooks_file(generations, generation)).ok();
    let pinned: BTreeMap<String, Vec<String>> = kept
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    pinned.into_iter().fold(registry.clone(), |registry, (name, ops)| {
        registry.with_playbook(&name, ops)
    })
}

/// Keeps the generation's written text and its references privately, then publishes its sealed
/// text and its scope records in one transaction, unless another daemon committed `generation`
/// first. A crash before the commit leaves the previous generation committed.
pub(super) fn publish(
    store: &dyn Store,
    (generations, private): (&Path, &Path),
    snapshot: Snapshot,
    generation: i64,
    at: Timestamp,
) -> Result<Snapshot, Unpublished> {
    let snapshot = snapshot.at_generation(generation);
    let kept = generation_file(generations, generation);
    write_private_file(&kept, snapshot.written_json().as_bytes())?;
    let playbooks = serde_json::to_vec(&snapshot.pinned_playbooks()).unwrap_or_default();
    write_private_file(&playbooks_file(generations, generation), &playbooks)?;
    learn(private, &snapshot)?;
    let published = store.write(|tx: &mut dyn Tx| {
        // Writers take turns on the store, so this check and the insert are one step.
        if let Some(latest) = tx.latest_generation_number()?.filter(|g| *g >= generation) {
            return Ok(Err(latest));
        }
        tx.insert_generation(generation, snapshot.hash(), snapshot.sealed_json(), at)?;
        for (id, scope) in &snapshot.config().scopes {
            tx.upsert_scope(id, generation, scope.parent.as_deref(), scope.enabled)?;
        }
        let kept: Vec<String> = snapshot.config().scopes.keys().cloned().collect();
        tx.tombstone_scopes(&kept, generation)?;
        Ok::<_, StoreError>(Ok(()))
    });
    if let Err(latest) = published.map_err(DaemonError::from)? {
        // Another daemon's generation has this number: what was kept of this one is not it.
        let _ = std::fs::remove_file(&kept);
        let _ = std::fs::remove_file(playbooks_file(generations, generation));
        return Err(Unpublished::Stale(latest));
    }
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stores_copy_of_a_generation_must_name_its_references_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::default();
        let written = parse_with(br#"{"version":1,"secrets":{"gh":"cmd:printf x"}}"#, &registry).unwrap();
        let from_store = |text: &str| restore(dir.path(), 7, (written.hash(), text), &registry);
        let forged = from_store(written.written_json());
        assert!(
            forged.is_err_and(|why| why.contains("unsealed")),
            "a plain cmd: handed by the store"
        );
        assert_eq!(
            from_store(written.sealed_json()).unwrap().generation(),
            7,
            "control: sealed"
        );
        std::fs::write(generation_file(dir.path(), 7), written.written_json()).unwrap();
        assert!(
            from_store(written.sealed_json()).is_ok(),
            "this daemon's own copy holds its references"
        );
    }
}
