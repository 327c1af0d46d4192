use conduit_core::Refusal;
use conduit_store::StoreError;

/// A rule's failure: a refusal the caller may see, or a storage failure it must not.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl HostError {
    /// What the caller is told: the refusal itself, or a bare `internal` for a storage failure.
    pub fn refusal(&self) -> Refusal {
        match self {
            HostError::Refused(r) => r.clone(),
            HostError::Store(_) => Refusal::internal(),
        }
    }
}
