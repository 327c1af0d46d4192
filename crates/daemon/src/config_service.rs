//! Which configuration generation the daemon runs.
//!
//! First cut (until `config apply` lands): a config file given at start is published as the next
//! generation when its hash differs from the committed one; without a file the committed generation
//! is restored, and a store with none activates the default configuration as generation 1 without
//! writing a file.

use std::path::Path;

use conduit_config::{default_config_json, parse_with, Registry, Snapshot};
use conduit_core::Timestamp;
use conduit_store::Store;

use crate::DaemonError;

pub fn activate(
    store: &dyn Store,
    file: Option<&Path>,
    registry: &Registry,
    now: Timestamp,
) -> Result<Snapshot, DaemonError> {
    let parse = |bytes: &[u8]| parse_with(bytes, registry);
    let committed = store.read(|tx| tx.latest_generation())?;
    let candidate = match (file, &committed) {
        (Some(path), _) => {
            let bytes = std::fs::read(path).map_err(|e| DaemonError::io("read the config file", path, e))?;
            parse(&bytes).map_err(DaemonError::Config)?
        }
        (None, Some((generation, _, written))) => {
            return parse(written.as_bytes())
                .map(|s| s.at_generation(*generation))
                .map_err(|_| DaemonError::StoredConfig);
        }
        (None, None) => parse(default_config_json().as_bytes()).map_err(DaemonError::Config)?,
    };
    match committed {
        Some((generation, hash, _)) if hash == candidate.hash() => Ok(candidate.at_generation(generation)),
        committed => publish(store, candidate, committed.map_or(1, |(g, _, _)| g + 1), now),
    }
}

/// Publishes a generation and its scope records in one transaction.
fn publish(store: &dyn Store, snapshot: Snapshot, generation: i64, now: Timestamp) -> Result<Snapshot, DaemonError> {
    let snapshot = snapshot.at_generation(generation);
    store.write(|tx| {
        tx.insert_generation(generation, snapshot.hash(), snapshot.written_json(), now)?;
        for (id, scope) in &snapshot.config().scopes {
            tx.upsert_scope(id, generation, scope.parent.as_deref(), scope.enabled)?;
        }
        Ok::<_, conduit_store::StoreError>(())
    })?;
    tracing::info!(generation, hash = snapshot.hash(), "activated configuration generation");
    Ok(snapshot)
}
