//! Crash injection for the drills: `OPEN_CONDUIT_FAILPOINT=<name>` aborts the process when it
//! reaches the failpoint of that name, as a crash would, with nothing flushed or cleaned up.

/// Aborts the process if the environment names this failpoint.
pub fn failpoint(name: &str) {
    if std::env::var_os("OPEN_CONDUIT_FAILPOINT").is_some_and(|v| v == name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}
