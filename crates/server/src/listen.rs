//! Listeners: owner-only Unix sockets, and the optional loopback TCP listener.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use axum::Router;
use tokio::net::UnixListener;

/// Binds a Unix socket at `path` with mode 0600. The caller holds the state lock and has already
/// removed any stale socket; the socket's directory is owner-only, so nobody else can reach it in
/// the instant before the mode is set.
pub fn bind_owner_only(path: &Path) -> std::io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves `router` on `listener` (a Unix socket or a TCP listener) until `shutdown` completes.
pub async fn serve<L>(listener: L, router: Router, shutdown: impl Future<Output = ()> + Send + 'static)
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(shutdown).await {
        tracing::warn!(error = %e, "socket server stopped");
    }
}
