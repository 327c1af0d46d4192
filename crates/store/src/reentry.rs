//! The one rule every adapter keeps about nesting: a thread inside a transaction opens no other.

use crate::StoreError;

thread_local! {
    /// Whether this thread is inside a transaction: a nested write would wait forever for what the
    /// outer one holds (SQLite's one writer, PostgreSQL's write lock), and a nested read would not
    /// see the outer one's writes.
    static IN_TRANSACTION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the thread as inside a transaction until dropped.
pub struct InTransaction(());

impl InTransaction {
    /// Refused with [`StoreError::Reentrant`] when this thread is already inside one.
    pub fn enter() -> Result<InTransaction, StoreError> {
        if IN_TRANSACTION.with(|t| t.replace(true)) {
            return Err(StoreError::Reentrant);
        }
        Ok(InTransaction(()))
    }
}

impl Drop for InTransaction {
    fn drop(&mut self) {
        IN_TRANSACTION.with(|t| t.set(false));
    }
}
