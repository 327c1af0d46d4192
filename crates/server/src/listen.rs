//! Listeners: owner-only Unix sockets, the optional loopback TCP listener, and the accept loop that
//! holds every connection to its limits: the headers (and the wait between requests) within a
//! timeout, each body within another, and no more connections at once than the socket allows.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use conduit_config::Limits;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::UnixListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// Binds a Unix socket at `path` with mode 0600. The caller holds the state lock and has already
/// removed any stale socket; the socket's directory is owner-only, so nobody else can reach it in
/// the instant before the mode is set.
pub fn bind_owner_only(path: &Path) -> std::io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// What one listener allows each connection, and how many connections at once.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// For a request's headers, and for the wait between requests on a kept-alive connection.
    pub header_timeout: Duration,
    /// For a request's body, from when its headers arrived.
    pub body_timeout: Duration,
    pub max_connections: usize,
    /// What this listener's connections also draw from, with other listeners'.
    pub shared: Option<SharedConnections>,
}

impl ConnectionLimits {
    /// An execution's toolbelt socket, as the configuration's `limits` says, drawing from what
    /// every execution's socket shares.
    pub fn toolbelt(limits: &Limits, shared: &SharedConnections) -> ConnectionLimits {
        ConnectionLimits {
            shared: Some(shared.clone()),
            ..ConnectionLimits::with_connections(limits, limits.toolbelt_connections)
        }
    }

    /// The management socket and the loopback listener.
    pub fn management(limits: &Limits) -> ConnectionLimits {
        ConnectionLimits::with_connections(limits, limits.management_connections)
    }

    fn with_connections(limits: &Limits, connections: u32) -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: Duration::from_secs(limits.header_timeout_seconds.into()),
            body_timeout: Duration::from_secs(limits.body_timeout_seconds.into()),
            max_connections: connections as usize,
            shared: None,
        }
    }
}

/// Files the daemon keeps for itself whatever its executions' sockets hold: the store, logs,
/// listeners, child pipes, package processes.
const KEPT_FILES: u64 = 256;

/// The connections all executions' toolbelt sockets hold together. Each socket has its own cap,
/// but many flooded sockets together could use up the daemon's open files, and then the owner's
/// management socket could accept nothing: this budget leaves the management socket its cap and
/// the daemon its own files.
#[derive(Debug, Clone)]
pub struct SharedConnections(Arc<Semaphore>);

impl SharedConnections {
    /// The budget under an open-files limit of `open_files`, with `management` connections kept
    /// for the management socket: half of what remains (the other half is for what each execution
    /// costs beyond its connections: its listener, pipes and log), and at least one socket's cap.
    pub fn within_open_files(open_files: u64, management: u32, per_socket: u32) -> SharedConnections {
        let spare = open_files.saturating_sub(u64::from(management) + KEPT_FILES) / 2;
        let budget = spare.max(u64::from(per_socket)).min(Semaphore::MAX_PERMITS as u64);
        SharedConnections(Arc::new(Semaphore::new(budget as usize)))
    }

    /// How many connections the budget holds.
    pub fn size(&self) -> usize {
        self.0.available_permits()
    }
}

/// A connection's places, held while it is served: one on its socket, and one in what it shares
/// with other sockets.
type Slots = (OwnedSemaphorePermit, Option<OwnedSemaphorePermit>);

fn take_slots(own: &Arc<Semaphore>, shared: Option<&SharedConnections>) -> Option<Slots> {
    let mine = own.clone().try_acquire_owned().ok()?;
    let theirs = match shared {
        Some(SharedConnections(budget)) => Some(budget.clone().try_acquire_owned().ok()?),
        None => None,
    };
    Some((mine, theirs))
}

/// Serves `router` on `listener` (a Unix socket or a TCP listener) until `shutdown` completes, then
/// lets each connection finish the request it is serving. A connection past the cap is closed as
/// soon as it is accepted, so a flood of them costs the daemon no file descriptor it keeps.
pub async fn serve<L>(
    mut listener: L,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) where
    L: axum::serve::Listener,
{
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let (stop, stopped) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let io = tokio::select! {
            (io, _) = listener.accept() => io,
            () = &mut shutdown => break,
        };
        let Some(slots) = take_slots(&open, limits.shared.as_ref()) else {
            tracing::debug!("a socket is at its connection limit; closed a new connection");
            continue;
        };
        let (router, stopped, limits) = (router.clone(), stopped.clone(), limits.clone());
        tokio::spawn(async move {
            serve_connection(io, router, &limits, stopped).await;
            drop(slots);
        });
    }
    let _ = stop.send(true);
    let _ = open.acquire_many(limits.max_connections as u32).await;
}

/// The most headers hyper parses in a request: room past the envelope's own bound (100,
/// `MAX_HEADERS` in `envelope.rs`), so a request a little over it gets the envelope's 431 rather
/// than hyper's bare one. hyper makes room for this many on every request it parses (two arrays of
/// 32-byte slots, allocated and filled each time): its parse took 23,000 instructions a request at
/// 1,000, 15,000 at 128 (callgrind, the toolbelt bench).
const HYPER_MAX_HEADERS: usize = 128;

/// Serves one HTTP/1 connection, each request's body under the body timeout, until it ends or,
/// once the listener stops, until the request it is serving is answered.
async fn serve_connection<I>(io: I, router: Router, limits: &ConnectionLimits, mut stopped: watch::Receiver<bool>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let body_timeout = limits.body_timeout;
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let request: Request = request.map(|body| Body::new(Timed::new(body, body_timeout)));
        router.clone().oneshot(request)
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(HYPER_MAX_HEADERS);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = stopped.changed() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// A request body that fails once it keeps its reader waiting past its deadline, so a client
/// cannot hold a handler reading a body that never arrives (what has arrived is still read: the
/// body's size limit bounds that).
struct Timed {
    inner: Incoming,
    deadline: tokio::time::Instant,
    /// Set the first time the body is not ready: a body that came with its head (a toolbelt call's,
    /// nearly always) never enters the runtime's timer wheel, which took a lock to register the
    /// timer and another to take it out again on every request.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Timed {
    fn new(inner: Incoming, timeout: Duration) -> Timed {
        Timed {
            inner,
            deadline: tokio::time::Instant::now() + timeout,
            timer: None,
        }
    }
}

/// The error a body gives when its deadline passed.
#[derive(Debug)]
pub struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimedOut {}

impl hyper::body::Body for Timed {
    type Data = hyper::body::Bytes;
    type Error = axum::BoxError;

    /// What has arrived is read; only a body that keeps its reader waiting past the deadline fails.
    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_budget_leaves_the_management_cap_and_the_daemons_files() {
        let size = |open_files| SharedConnections::within_open_files(open_files, 256, 32).size();
        assert_eq!(size(20_000), (20_000 - 256 - 256) / 2);
        assert_eq!(size(1_024), (1_024 - 512) / 2);
        assert_eq!(size(400), 32, "never less than one socket's cap");
        assert_eq!(size(u64::MAX), Semaphore::MAX_PERMITS);
    }
}
