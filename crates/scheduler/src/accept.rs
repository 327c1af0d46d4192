//! Event acceptance: causal bounds, then waking waits, then routing.

use conduit_config::Snapshot;
use conduit_core::names::is_reserved_type;
use conduit_core::{CausalPin, Duration, ErrorCode, Event, NewEvent, Refusal, Source, Timestamp};
use conduit_store::Tx;

use crate::waits::wake_waits;
use crate::work::{create_work, NewWork};
use crate::HostError;

/// The window of the per-minute causal bound.
const CAUSAL_WINDOW: Duration = Duration::from_secs(60);

/// Accepts an event: refuses it past the causal depth bound, stores it, wakes every wait it
/// satisfies, and starts Work for each route it matches when it is no running Work's input.
pub fn accept(tx: &mut dyn Tx, config: &Snapshot, event: NewEvent, now: Timestamp) -> Result<Event, HostError> {
    let event = record(tx, config, event)?;
    wake_waits(tx, &event, now)?;
    route(tx, config, &event, now)?;
    Ok(event)
}

/// Stores an event after the causal bounds, without waking or routing: for the host's own lifecycle
/// events, which nothing subscribes to by route.
pub fn record(tx: &mut dyn Tx, config: &Snapshot, event: NewEvent) -> Result<Event, HostError> {
    check_causal_bounds(tx, config, &event)?;
    Ok(tx.insert_event(event)?)
}

/// The causal bounds of the event's root: the limits pinned by the root's first event (the
/// configuration's at that time), a maximum depth and a maximum number of events per minute.
fn check_causal_bounds(tx: &mut dyn Tx, config: &Snapshot, event: &NewEvent) -> Result<(), HostError> {
    let root = &event.causation.root;
    let pin = match tx.causal_pin(root)? {
        Some(pin) => pin,
        None => {
            let limits = config.limits();
            let pin = CausalPin {
                max_depth: limits.causal_max_depth,
                per_minute: limits.causal_per_minute,
            };
            tx.insert_causal_pin(root, pin, event.accepted_at)?;
            pin
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
    let window_start = Timestamp(event.accepted_at.0 - CAUSAL_WINDOW.0);
    if tx.count_root_events_since(root, window_start)? >= u64::from(pin.per_minute) {
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

/// Routes an event that belongs to no existing Work: each matching route starts a Work that owns the
/// event's correlation key (when it has one), so later events under that key reach that Work.
fn route(tx: &mut dyn Tx, config: &Snapshot, event: &Event, now: Timestamp) -> Result<(), HostError> {
    if is_reserved_type(&event.event_type) || !config.scope_enabled(&event.scope) {
        return Ok(());
    }
    if let Some(key) = &event.correlation_key {
        if tx.work_owning_key(key)?.is_some() {
            return Ok(());
        }
    }
    let bindings: Vec<String> = config
        .routes_for(&event.scope, &event.event_type)
        .map(str::to_owned)
        .collect();
    for (i, binding) in bindings.into_iter().enumerate() {
        // Only the first route's Work can own the key; keys have one owner.
        let keys = if i == 0 {
            event.correlation_key.clone().into_iter().collect()
        } else {
            Vec::new()
        };
        let new = NewWork {
            scope: event.scope.clone(),
            binding,
            input: event.data.clone(),
            keys,
            parent_work: None,
            source: Source::Scheduler,
            actor: None,
            id_seed: None,
        };
        create_work(tx, config, new, Some(event), now)?;
    }
    Ok(())
}
