//! Async code reaches the synchronous store off the runtime's hands (`conduit_server::off_runtime`).

use std::sync::Arc;

use conduit_store::{Store, StoreError};

/// Runs `f` against the store off the runtime's hands. Work that panicked is a backend failure.
pub(crate) async fn on_store_thread<T, E>(
    store: Arc<dyn Store>,
    f: impl FnOnce(&dyn Store) -> Result<T, E> + Send + 'static,
) -> Result<T, E>
where
    T: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    conduit_server::off_runtime(move || f(&*store))
        .await
        .unwrap_or_else(|_| Err(StoreError::Backend("the store work panicked".into()).into()))
}
