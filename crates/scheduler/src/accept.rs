//! Event acceptance: causal bounds, then waking waits, then routing.

use conduit_config::Snapshot;
use conduit_core::names::is_reserved_type;
use conduit_core::{Event, NewEvent, Source, Timestamp};
use conduit_store::Tx;

use crate::causal::record;
use crate::interrupt::interrupt_running;
use crate::waits::wake_waits;
use crate::work::{create_work, NewWork};
use crate::HostError;

/// Accepts an event: refuses it past the causal depth bound, stores it, wakes every wait it
/// satisfies, interrupts the running Work it is interrupting input for, and starts Work for each
/// route it matches when it is no existing Work's input.
pub fn accept(tx: &mut dyn Tx, config: &Snapshot, event: NewEvent, now: Timestamp) -> Result<Event, HostError> {
    let event = record(tx, config, event)?;
    wake_waits(tx, &event, now)?;
    interrupt_running(tx, config, &event, now)?;
    route(tx, config, &event, now)?;
    Ok(event)
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
            grants: Vec::new(),
            parent_work: None,
            source: Source::Scheduler,
            actor: None,
            id_seed: None,
        };
        create_work(tx, config, new, Some(event), now)?;
    }
    Ok(())
}
