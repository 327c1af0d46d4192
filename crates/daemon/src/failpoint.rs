//! Fault injection for the drills. `OPEN_CONDUIT_FAILPOINT=<name>` aborts the process when it
//! reaches the failpoint of that name, as a crash would, with nothing flushed or cleaned up.
//! `OPEN_CONDUIT_PAUSEPOINT=<name>` holds the task that reaches the pause point of that name for
//! [`PAUSE`], widening the window a race needs to land in.

use std::ffi::OsString;
use std::sync::OnceLock;
use std::time::Duration;

/// How long a pause point holds its task.
pub const PAUSE: Duration = Duration::from_millis(500);

/// Aborts the process if the environment names this failpoint.
pub fn failpoint(name: &str) {
    if std::env::var_os("OPEN_CONDUIT_FAILPOINT").is_some_and(|v| v == name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

/// Holds the calling task for [`PAUSE`] if the environment names this pause point. The name is
/// read once: a pause point may sit on a path taken after every call.
pub async fn pausepoint(name: &str) {
    static NAMED: OnceLock<Option<OsString>> = OnceLock::new();
    let named = NAMED.get_or_init(|| std::env::var_os("OPEN_CONDUIT_PAUSEPOINT"));
    if named.as_deref().is_some_and(|v| v == name) {
        tracing::warn!(pausepoint = name, "pausing");
        tokio::time::sleep(PAUSE).await;
    }
}
