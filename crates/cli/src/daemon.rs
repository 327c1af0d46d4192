//! `open-conduit daemon`: the daemon run in the foreground on a multi-threaded runtime, logging to
//! stderr.

use std::io::IsTerminal;

use conduit_core::Duration;
use conduit_daemon::DaemonOptions;

use crate::report::Failure;
use crate::runtime;

/// A clap value parser for a token lifetime: a human duration of at least a minute, so rotation
/// has time to happen.
pub fn parse_token_lifetime(text: &str) -> Result<Duration, String> {
    at_least(
        text,
        Duration::from_secs(60),
        "a token lifetime is at least 1m",
        "10m or 1h",
    )
}

/// A clap value parser for a lease: a human duration of at least 10s, twice the longest a frozen
/// daemon can hold a shared store's write lock (5s), so that stall cannot lapse healthy leases.
pub fn parse_lease(text: &str) -> Result<Duration, String> {
    at_least(text, Duration::from_secs(10), "a lease is at least 10s", "30s or 2m")
}

fn at_least(text: &str, minimum: Duration, too_short: &str, example: &str) -> Result<Duration, String> {
    match Duration::parse(text) {
        Some(d) if d >= minimum => Ok(d),
        Some(_) => Err(too_short.into()),
        None => Err(format!("write a duration such as {example}")),
    }
}

/// Threads for blocking work: store transactions (one SQLite connection, so more threads would
/// only queue on its lock), secret resolution, confinement rulesets. Tokio's default of 512 let a
/// burst of calls start ~260 threads, of which dozens stayed alive for minutes (the periodic
/// store reads kept waking idle ones), each keeping its stack and allocator arena resident.
const BLOCKING_THREADS: usize = 32;

/// How long an idle blocking thread waits for work before it ends. The daemon's periodic store
/// reads (the scheduler's idle tick is 500 ms), handed to one idle thread after another, kept all
/// 32 alive after a burst with tokio's 10 s, each holding its allocator cache; with 2 s, 14 threads
/// of 37 remained and the RSS came down by another 0.6 MiB (`--bench burst`). A faster periodic
/// read would keep more alive again. Work after a quiet spell starts a thread again (tens of
/// microseconds).
const BLOCKING_THREAD_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the daemon looks at what its allocator holds free.
const LOOK_AT_FREE_MEMORY: std::time::Duration = std::time::Duration::from_secs(10);

/// How much free memory (more than at the last give-back) is worth giving back: after a burst of
/// 2,000 calls (`cargo bench -p conduit-cli --bench burst`) about 8 MiB stayed free in the arenas;
/// an idle daemon holds about 1 MiB.
const GIVE_BACK_OVER: usize = 4 << 20;

/// Runs the daemon until it stops.
pub fn run(options: DaemonOptions) -> Result<(), Failure> {
    // Before any thread of the runtime takes an arena of its own.
    conduit_allocator::limit_arenas(std::thread::available_parallelism().map_or(1, |n| n.get()));
    init_tracing();
    let runtime = runtime::build(
        tokio::runtime::Builder::new_multi_thread()
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_keep_alive(BLOCKING_THREAD_KEEP_ALIVE),
    )?;
    runtime.spawn(give_back_free_memory());
    runtime
        .block_on(conduit_daemon::run(options))
        .map_err(|e| Failure::Local(e.to_string()))
}

/// Hands what a burst freed back to the kernel, on a blocking thread (giving back holds each
/// arena's lock while it walks it). Ends with the runtime.
async fn give_back_free_memory() {
    let mut every = tokio::time::interval(LOOK_AT_FREE_MEMORY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut give_back = conduit_allocator::GiveBack::new(GIVE_BACK_OVER);
    loop {
        every.tick().await;
        let looked = tokio::task::spawn_blocking(move || {
            let freed = give_back.look();
            (give_back, freed)
        });
        let Ok((kept, freed)) = looked.await else { return };
        give_back = kept;
        if let Some(free) = freed {
            tracing::debug!(free_bytes = free, "gave the allocator's free memory back to the kernel");
        }
    }
}

/// Logs to stderr, filtered by `OPEN_CONDUIT_LOG` (default `info`), coloured only on a terminal
/// without `NO_COLOR`.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("OPEN_CONDUIT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only for a person at a terminal: a log file or a service journal gets plain text.
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(filter)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_lifetime_is_a_duration_of_at_least_a_minute() {
        assert_eq!(parse_token_lifetime("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_token_lifetime("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_token_lifetime("59s").is_err_and(|e| e.contains("at least 1m")));
        assert!(parse_token_lifetime("soon").is_err_and(|e| e.contains("such as 10m")));
    }

    #[test]
    fn a_lease_is_a_duration_of_at_least_ten_seconds() {
        assert_eq!(parse_lease("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_lease("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_lease("9s").is_err_and(|e| e.contains("at least 10s")));
        assert!(parse_lease("later").is_err_and(|e| e.contains("such as 30s")));
    }
}
