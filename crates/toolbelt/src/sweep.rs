//! The retention pass: token records 24 hours after they were revoked or expired, and replay records
//! 24 hours after they were written once their execution has finished.

use conduit_core::{Duration, Timestamp};
use conduit_store::{Store, StoreError};

/// How long a settled token or a finished execution's replay record is kept.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What one pass deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Swept {
    pub tokens: usize,
    pub requests: usize,
}

/// Deletes what has passed its retention at `now`. A deleted token is unknown, which every check
/// refuses exactly as it refused the revoked or expired token.
pub fn sweep(store: &dyn Store, now: Timestamp) -> Result<Swept, StoreError> {
    let cutoff = Timestamp(now.0 - RETENTION.0);
    store.write(|tx| {
        Ok(Swept {
            tokens: tx.delete_tokens_settled_before(cutoff)?,
            requests: tx.delete_finished_requests_before(cutoff)?,
        })
    })
}
