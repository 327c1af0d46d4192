//! Fault injection for the drills. `OPEN_CONDUIT_FAILPOINT=<name>` aborts the process when it
//! reaches the failpoint of that name, as a crash would, with nothing flushed or cleaned up.
//! `OPEN_CONDUIT_PAUSEPOINT=<name>=<ms>[,<name>=<ms>...]` holds each task that reaches a named
//! pause point for its milliseconds, so a race test can order two tasks and land in a window.

use std::sync::OnceLock;
use std::time::Duration;

/// Aborts the process if the environment names this failpoint.
pub fn failpoint(name: &str) {
    if std::env::var_os("OPEN_CONDUIT_FAILPOINT").is_some_and(|v| v == name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

/// Holds the calling task if the environment names this pause point. The environment is read
/// once: a pause point may sit on a path taken after every call.
pub async fn pausepoint(name: &str) {
    static PAUSES: OnceLock<Vec<(String, Duration)>> = OnceLock::new();
    let pauses = PAUSES.get_or_init(|| named_pauses(&std::env::var("OPEN_CONDUIT_PAUSEPOINT").unwrap_or_default()));
    if let Some((_, pause)) = pauses.iter().find(|(named, _)| named == name) {
        tracing::warn!("pausepoint {name}: pausing");
        tokio::time::sleep(*pause).await;
    }
}

/// `name=ms` pairs, comma-separated; a pair that does not parse names no pause.
fn named_pauses(text: &str) -> Vec<(String, Duration)> {
    let pause = |pair: &str| {
        let (name, ms) = pair.split_once('=')?;
        Some((name.to_owned(), Duration::from_millis(ms.parse().ok()?)))
    };
    text.split(',').filter_map(pause).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_are_named_with_their_milliseconds() {
        assert_eq!(
            named_pauses("tick:fence=600,attempt:supervise=200"),
            [
                ("tick:fence".to_owned(), Duration::from_millis(600)),
                ("attempt:supervise".to_owned(), Duration::from_millis(200)),
            ]
        );
        assert!(named_pauses("").is_empty());
        assert!(named_pauses("tick:fence,x=soon").is_empty());
    }
}
