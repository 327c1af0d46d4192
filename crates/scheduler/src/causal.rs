//! Recording an event within its causal bounds: the limits its root pinned, a maximum depth and a
//! maximum number of events per minute. Acceptance, waits, Work creation and operator controls all
//! record through here.

use conduit_config::Snapshot;
use conduit_core::names::is_key;
use conduit_core::{CausalPin, Duration, ErrorCode, Event, NewEvent, Refusal, Timestamp};
use conduit_store::Tx;

use crate::HostError;

/// The window of the per-minute causal bound.
const CAUSAL_WINDOW: Duration = Duration::from_secs(60);

/// Stores an event after the causal bounds, without waking or routing: for the host's own lifecycle
/// events, which nothing subscribes to by route.
pub fn record(tx: &mut dyn Tx, config: &Snapshot, event: NewEvent) -> Result<Event, HostError> {
    if let Some(key) = &event.correlation_key {
        check_key(key)?;
    }
    check_json_size(config, &event.data, "an event's data")?;
    check_causal_bounds(tx, config, &event)?;
    Ok(tx.insert_event(event)?)
}

/// An event's data and a Work's input are stored whole, so each is bounded
/// (`limits.event_data_bytes`) as it is recorded.
pub(crate) fn check_json_size(config: &Snapshot, value: &serde_json::Value, what: &str) -> Result<(), Refusal> {
    let limit = config.limits().event_data_bytes as usize;
    if json_len(value) <= limit {
        return Ok(());
    }
    Err(
        Refusal::invalid_input(format!("{what} is at most {limit} bytes of JSON"))
            .with_remedy("keep large content in an artifact or a file and refer to it"),
    )
}

/// The length of `value` written as JSON, counted without building the text (the store writes it).
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// A correlation key is stored and indexed as given, so its size is bounded where it enters.
pub(crate) fn check_key(key: &str) -> Result<(), Refusal> {
    if is_key(key) {
        return Ok(());
    }
    Err(Refusal::invalid_input(
        "a correlation key is 1 to 200 bytes with no control character",
    ))
}

/// Whether a root already has `per_minute` causal events in the minute up to `now`: it does when
/// the `per_minute`-th latest was accepted (`time_back`) within it.
fn window_is_full(per_minute: u32, time_back: Option<Timestamp>, now: Timestamp) -> bool {
    if per_minute == 0 {
        return true;
    }
    let window_start = Timestamp(now.0 - CAUSAL_WINDOW.0);
    time_back.is_some_and(|at| at >= window_start)
}

/// The causal bounds of the event's root: the limits pinned by the root's first event (the
/// configuration's at that time), a maximum depth and a maximum number of events per minute.
fn check_causal_bounds(tx: &mut dyn Tx, config: &Snapshot, event: &NewEvent) -> Result<(), HostError> {
    let root = &event.causation.root;
    let (pin, time_back) = match tx.causal_bounds(root)? {
        Some(bounds) => bounds,
        None => {
            let limits = config.limits();
            let pin = CausalPin {
                max_depth: limits.causal_max_depth,
                per_minute: limits.causal_per_minute,
            };
            tx.insert_causal_pin(root, pin, event.accepted_at)?;
            (pin, tx.causal_event_time_back(root, pin.per_minute)?)
        }
    };
    if event.causation.depth > pin.max_depth {
        return Err(Refusal::new(
            ErrorCode::CausalDepthExceeded,
            format!("the causal chain would exceed its depth limit of {}", pin.max_depth),
        )
        .with_remedy("raise limits.causal_max_depth, or break the loop that keeps emitting")
        .into());
    }
    if window_is_full(pin.per_minute, time_back, event.accepted_at) {
        return Err(Refusal::new(
            ErrorCode::CausalRateExceeded,
            format!(
                "the causal chain would exceed its limit of {} events per minute",
                pin.per_minute
            ),
        )
        .with_remedy("raise limits.causal_per_minute, or slow the loop that keeps emitting")
        .into());
    }
    Ok(())
}
