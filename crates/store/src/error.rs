/// A storage failure. Its text stays in the daemon's log; callers answer with a safe code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend's own error, as text for the log (an adapter converts its errors to this).
    #[error("storage backend: {0}")]
    Backend(String),
    #[error("stored record is malformed: {0}")]
    Corrupt(String),
    #[error("the correlation key is already owned")]
    KeyTaken,
    #[error("the write-ahead log could not be synced: {0}")]
    Wal(String),
    #[error("a transaction was started inside another on the same thread")]
    Reentrant,
    #[error("transaction rolled back")]
    RolledBack,
    #[error("the store schema version {found} is newer than this release ({supported})")]
    NewerSchema { found: i64, supported: i64 },
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}
