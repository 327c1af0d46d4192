//! Creating Work, with its causal `core.work.created` event, in one transaction.

use conduit_config::Snapshot;
use conduit_core::names::work_key;
use conduit_core::{Causation, ErrorCode, Event, NewEvent, Parent, Refusal, Source, Timestamp, Work, WorkState};
use conduit_store::{derived_id, new_id, StoreError, Tx};
use serde_json::{json, Value};

use crate::causal::{check_json_size, check_key, record};
use crate::HostError;

/// What a caller asks for when it creates Work.
#[derive(Debug, Clone)]
pub struct NewWork {
    pub scope: String,
    pub binding: String,
    pub input: Value,
    /// Correlation keys beyond `work:<id>`, which every Work owns.
    pub keys: Vec<String>,
    /// Binding grants the Work takes (an operator's to give).
    pub grants: Vec<String>,
    pub parent_work: Option<String>,
    pub source: Source,
    pub actor: Option<String>,
    /// Derives the Work's and its event's ids from this seed instead of allocating fresh ones, so a
    /// retried request creates the same Work.
    pub id_seed: Option<String>,
}

impl NewWork {
    /// Work an operator (or a test) creates by hand: `core.manual`, no parent, no extra keys, fresh
    /// ids. Callers set the rest with struct update syntax.
    pub fn manual(scope: &str, binding: &str, input: Value, actor: Option<String>) -> NewWork {
        NewWork {
            scope: scope.to_owned(),
            binding: binding.to_owned(),
            input,
            keys: Vec::new(),
            grants: Vec::new(),
            parent_work: None,
            source: Source::Manual,
            actor,
            id_seed: None,
        }
    }
}

/// The most correlation keys a Work may claim besides its own: each is stored and indexed.
pub(crate) const MAX_KEYS: usize = 32;

/// Creates ready Work and its `core.work.created` event (derived from `cause`, or a new root).
pub fn create_work(
    tx: &mut dyn Tx,
    config: &Snapshot,
    new: NewWork,
    cause: Option<&Event>,
    now: Timestamp,
) -> Result<(Work, Event), HostError> {
    check_target(config, &new.scope, &new.binding)?;
    check_json_size(config, &new.input, "a Work's input")?;
    if new.keys.len() > MAX_KEYS {
        return Err(Refusal::invalid_input(format!("a Work claims at most {MAX_KEYS} correlation keys")).into());
    }
    for key in &new.keys {
        check_key(key)?;
    }
    check_grants(config, &new.scope, &new.binding, &new.grants)?;
    let (id, event_id) = match &new.id_seed {
        Some(seed) => (derived_id(&[seed, "work"]), derived_id(&[seed, "work.created"])),
        None => (new_id(), new_id()),
    };
    let own_key = work_key(&id);
    let mut keys = vec![own_key.clone()];
    keys.extend(new.keys.iter().filter(|k| **k != own_key).cloned());
    let work = Work {
        id: id.clone(),
        scope: new.scope.clone(),
        binding: new.binding.clone(),
        parent_work: new.parent_work.clone(),
        state: WorkState::Ready,
        input: new.input,
        keys,
        epoch: 0,
        outcome: None,
        wake_event: event_id.clone(),
        generation: config.generation(),
        created_at: now,
        updated_at: now,
        blocked_reason: None,
        failed_attempts: 0,
        not_before: None,
        grants: new.grants,
    };
    tx.insert_work(&work).map_err(|e| match e {
        StoreError::KeyTaken => HostError::from(
            Refusal::new(
                ErrorCode::Conflict,
                "a correlation key given for the Work is already owned by another Work",
            )
            .with_remedy("use a key no other Work owns"),
        ),
        e => e.into(),
    })?;
    let causation = Causation::continuing(cause.map(Parent::from), &event_id);
    let event = NewEvent {
        id: event_id,
        event_type: "core.work.created".into(),
        source: new.source,
        scope: new.scope,
        work_id: Some(id),
        execution_id: None,
        correlation_key: Some(own_key),
        causation,
        actor: new.actor,
        data: json!({"binding": new.binding, "parent_work": new.parent_work}),
        accepted_at: now,
        delivery_id: None,
    };
    let event = record(tx, config, event)?;
    Ok((work, event))
}

/// The Work that owns `key`, if any.
pub(crate) fn owner_of(tx: &mut dyn Tx, key: &str) -> Result<Option<Work>, HostError> {
    match tx.work_owning_key(key)? {
        Some(id) => Ok(tx.get_work(&id)?),
        None => Ok(None),
    }
}

/// Every grant named is one the binding offers, each named once.
pub(crate) fn check_grants(config: &Snapshot, scope: &str, binding: &str, grants: &[String]) -> Result<(), Refusal> {
    for (i, grant) in grants.iter().enumerate() {
        if !config.offers_grant(scope, binding, grant) || grants[..i].contains(grant) {
            return Err(
                Refusal::invalid_input("each grant named is one the binding offers, once")
                    .with_remedy("name grants declared under the binding's `grants`"),
            );
        }
    }
    Ok(())
}

pub(crate) fn check_target(config: &Snapshot, scope: &str, binding: &str) -> Result<(), Refusal> {
    if config.scope(scope).is_none() {
        return Err(Refusal::unknown_scope());
    }
    if !config.scope_enabled(scope) {
        return Err(Refusal::new(
            ErrorCode::ScopeDisabled,
            "the scope is disabled in the active configuration",
        ));
    }
    if config.binding(scope, binding).is_none() {
        return Err(
            Refusal::new(ErrorCode::UnknownBinding, "the scope has no binding with this name")
                .with_remedy("name a binding declared under the scope's `bindings`"),
        );
    }
    Ok(())
}
