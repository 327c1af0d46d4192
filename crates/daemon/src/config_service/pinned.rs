//! Generations as this daemon validated them when each first ran or was restored: an attempt pinned
//! to a generation is judged against that validation (its grants, its bindings' playbooks), not a
//! revalidation against whatever playbooks and packages the daemon has since.

use std::collections::BTreeMap;
use std::sync::Mutex;

use conduit_config::Snapshot;

/// How many generations are kept; an older one is validated again when asked for.
const KEPT: usize = 32;

#[derive(Default)]
pub(super) struct Pinned(Mutex<BTreeMap<i64, Snapshot>>);

impl Pinned {
    pub(super) fn get(&self, generation: i64) -> Option<Snapshot> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&generation)
            .cloned()
    }

    /// Keeps `snapshot` as its generation's validation (the first kept stays), dropping the oldest
    /// past [`KEPT`].
    pub(super) fn keep(&self, snapshot: &Snapshot) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.entry(snapshot.generation()).or_insert_with(|| snapshot.clone());
        while kept.len() > KEPT {
            kept.pop_first();
        }
    }
}
