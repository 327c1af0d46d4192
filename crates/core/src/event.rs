//! Events: the durable, causally linked log every action leaves.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

use crate::time::Timestamp;

/// Where an event came from. Only the host assigns a source; nothing a caller sends can set one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An operator, through the management API.
    Manual,
    /// An action an operator invoked (`open-conduit act`): an event on a Work or a scope, stamped
    /// with the operator as its actor like a manual one.
    Action,
    /// The host's scheduler (Work created by a route, a timed-out wait).
    Scheduler,
    /// A running execution, through its toolbelt.
    Execution(String),
    /// The toolbelt's own records of calls (`agent.toolCalled`, `agent.toolReturned`).
    Toolbelt,
    /// An extension's ingress (`github`: a signed webhook delivery), named by its registration.
    Ingress(String),
}

impl Source {
    /// Whether an event of this source keeps its actor: only an operator's own events and actions
    /// do, so only the host says who acted.
    pub fn keeps_actor(&self) -> bool {
        matches!(self, Source::Manual | Source::Action)
    }

    /// Its name on the wire and in the store (borrowed but for an execution's).
    pub fn to_wire(&self) -> Cow<'_, str> {
        match self {
            Source::Manual => "core.manual".into(),
            Source::Action => "core.action".into(),
            Source::Scheduler => "core.scheduler".into(),
            Source::Execution(id) => format!("execution:{id}").into(),
            Source::Toolbelt => "core.toolbelt".into(),
            Source::Ingress(name) => name.as_str().into(),
        }
    }

    pub fn from_wire(text: &str) -> Option<Source> {
        match text {
            "core.manual" => Some(Source::Manual),
            "core.action" => Some(Source::Action),
            "core.scheduler" => Some(Source::Scheduler),
            "core.toolbelt" => Some(Source::Toolbelt),
            _ => match text.strip_prefix("execution:") {
                Some(id) => Some(Source::Execution(id.to_owned())),
                None => crate::names::is_registration_name(text).then(|| Source::Ingress(text.to_owned())),
            },
        }
    }
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_wire())
    }
}

/// An event's place in its causal chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Causation {
    pub parent: Option<String>,
    pub root: String,
    pub depth: u32,
}

impl Causation {
    /// The causation of a new root event.
    pub fn root(own_id: &str) -> Causation {
        Causation {
            parent: None,
            root: own_id.to_owned(),
            depth: 0,
        }
    }

    /// The causation of an event derived from `parent`.
    pub fn derived_from(parent: &Event) -> Causation {
        Causation::after(Parent::from(parent))
    }

    /// The causation of an event following `parent` in its chain.
    pub fn after(parent: Parent<'_>) -> Causation {
        Causation {
            parent: Some(parent.id.to_owned()),
            root: parent.causation.root.clone(),
            depth: parent.causation.depth + 1,
        }
    }

    /// The causation of a host event continuing from `parent` when there is one, else a new root.
    pub fn continuing(parent: Option<Parent<'_>>, own_id: &str) -> Causation {
        parent.map_or_else(|| Causation::root(own_id), Causation::after)
    }
}

/// What an event continuing from another takes of it: its id and its place in its chain.
#[derive(Debug, Clone, Copy)]
pub struct Parent<'a> {
    pub id: &'a str,
    pub causation: &'a Causation,
}

impl<'a> From<&'a Event> for Parent<'a> {
    fn from(event: &'a Event) -> Parent<'a> {
        Parent {
            id: &event.id,
            causation: &event.causation,
        }
    }
}

/// A named sample event an ingress offers for the scopes it delivers into, so a view can show
/// "Suppose…" choices (route samples and trace) without hard-coding them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventSample {
    pub name: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub source: Source,
    pub correlation_key: Option<String>,
    pub data: Value,
}

/// An accepted event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub id: String,
    /// Acceptance sequence: strictly increasing in the order the store accepted events.
    pub sequence: i64,
    #[serde(rename = "type")]
    pub event_type: String,
    pub source: Source,
    pub scope: String,
    pub work_id: Option<String>,
    pub execution_id: Option<String>,
    pub correlation_key: Option<String>,
    pub causation: Causation,
    /// Who did it, set only by the host for operator events.
    pub actor: Option<String>,
    pub data: Value,
    pub accepted_at: Timestamp,
}

/// An event about to be accepted: everything but the sequence the store assigns.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: String,
    pub event_type: String,
    pub source: Source,
    pub scope: String,
    pub work_id: Option<String>,
    pub execution_id: Option<String>,
    pub correlation_key: Option<String>,
    pub causation: Causation,
    pub actor: Option<String>,
    pub data: Value,
    pub accepted_at: Timestamp,
    /// A stable identity for idempotent delivery: a second event with the same one is not accepted.
    pub delivery_id: Option<String>,
}

impl NewEvent {
    pub fn into_event(self, sequence: i64) -> Event {
        let actor = self.actor.filter(|_| self.source.keeps_actor());
        Event {
            id: self.id,
            sequence,
            event_type: self.event_type,
            source: self.source,
            scope: self.scope,
            work_id: self.work_id,
            execution_id: self.execution_id,
            correlation_key: self.correlation_key,
            causation: self.causation,
            actor,
            data: self.data,
            accepted_at: self.accepted_at,
        }
    }
}

/// A record the host appends to a Work's log (source `core.toolbelt`, no correlation key, actor or
/// delivery identity), its data JSON text already: the toolbelt's records of each call, written
/// without a value tree, and every other host record.
pub struct NewRecord<'a> {
    pub id: &'a str,
    pub event_type: &'a str,
    pub scope: &'a str,
    pub work_id: &'a str,
    pub execution_id: &'a str,
    pub causation: &'a Causation,
    pub data: &'a str,
    pub accepted_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_event(source: Source) -> NewEvent {
        NewEvent {
            id: "e1".into(),
            event_type: "demo.x".into(),
            source,
            scope: "s".into(),
            work_id: None,
            execution_id: None,
            correlation_key: None,
            causation: Causation::root("e1"),
            actor: Some("operator:local".into()),
            data: Value::Null,
            accepted_at: Timestamp(0),
            delivery_id: None,
        }
    }

    #[test]
    fn acceptance_keeps_actor_only_for_operator_events() {
        assert_eq!(
            new_event(Source::Manual).into_event(1).actor.as_deref(),
            Some("operator:local")
        );
        assert_eq!(new_event(Source::Execution("x".into())).into_event(1).actor, None);
        assert_eq!(new_event(Source::Scheduler).into_event(1).actor, None);
    }

    #[test]
    fn source_round_trips() {
        for s in [
            Source::Manual,
            Source::Scheduler,
            Source::Toolbelt,
            Source::Execution("abc".into()),
            Source::Ingress("github".into()),
        ] {
            assert_eq!(Source::from_wire(&s.to_wire()), Some(s));
        }
        assert_eq!(Source::from_wire("core.bogus"), None);
        assert_eq!(Source::from_wire("Not A Name"), None);
    }

    #[test]
    fn derived_causation_extends_the_chain() {
        let parent = new_event(Source::Manual).into_event(1);
        let c = Causation::derived_from(&parent);
        assert_eq!((c.parent.as_deref(), c.root.as_str(), c.depth), (Some("e1"), "e1", 1));
    }
}
