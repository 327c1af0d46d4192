//! Async code reaches the synchronous store on a blocking thread, never on the runtime's own.

use std::sync::Arc;

use conduit_store::{Store, StoreError};

/// Runs `f` against the store on a blocking thread. A thread that panicked is a backend failure.
pub(crate) async fn on_store_thread<T, E>(
    store: Arc<dyn Store>,
    f: impl FnOnce(&dyn Store) -> Result<T, E> + Send + 'static,
) -> Result<T, E>
where
    T: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    tokio::task::spawn_blocking(move || f(&*store))
        .await
        .unwrap_or_else(|_| Err(StoreError::Backend("the store thread panicked".into()).into()))
}
