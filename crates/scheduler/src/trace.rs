//! Route trace: how acceptance would handle a hypothetical event now, without accepting it.
//!
//! It follows [`crate::accept`] step by step against the active configuration and the current Work
//! and wait state, reading only. Nothing is accepted, routed or recorded.

use conduit_config::{Reach, Snapshot};
use conduit_core::names::{type_matches, work_key};
use conduit_core::{Causation, Event, EventSample, Refusal, Source, Timestamp, Work, WorkState};
use conduit_store::Tx;
use serde::Serialize;
use serde_json::Value;

use crate::HostError;

/// The hypothetical event: what acceptance would be handed, less what the host assigns.
pub struct Probe {
    pub scope: String,
    pub event_type: String,
    /// An operator's (`core.manual`), an action's, or an ingress's that accepts events in the scope.
    pub source: Source,
    pub correlation_key: Option<String>,
    /// The Work the event is addressed to (an operator's wake): its own key stands in for a missing
    /// correlation key.
    pub work_id: Option<String>,
    pub data: Value,
}

#[derive(Debug, Serialize)]
pub struct Trace {
    /// Each route of the scope, in order, with its verdict.
    pub routes: Vec<RouteVerdict>,
    /// The existing Work the event resolves to, when it belongs to one.
    pub work: Option<String>,
    pub effect: Effect,
    pub detail: String,
    /// Other Work whose waits the event would satisfy.
    pub other_wakes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct RouteVerdict {
    pub on: String,
    pub binding: String,
    pub verdict: Verdict,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The route matches and would start its Work.
    Match,
    /// The route's `on` does not match the type, or the scope is disabled.
    Skip,
    /// An earlier final route matched, so routing stops before this one.
    NotReached,
    /// The event belongs to existing Work, so routing never runs.
    Bypassed,
}

/// What acceptance would do with the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// New Work is created for each matching route.
    Start,
    /// Running Work owns the event's key: a wait it declares later sees the event.
    Inject,
    /// Running Work owns the event's key and an interrupting route of its binding matches: its
    /// attempt is fenced and stopped, and its next attempt starts from the event.
    Interrupt,
    /// Waiting Work has an armed wait the event satisfies.
    Wake,
    /// Ready Work (already woken by another input) or waiting Work that does not wait for the
    /// event: it joins the input the Work's next attempt reads.
    Queue,
    /// The event is recorded but changes nothing.
    Drop,
    /// No route matches the type.
    Unmatched,
}

/// Traces `probe` through acceptance as it stands at `now`.
pub fn trace(tx: &mut dyn Tx, config: &Snapshot, probe: Probe, now: Timestamp) -> Result<Trace, HostError> {
    let work = resolve_work(tx, &probe)?;
    let event = hypothetical(probe, work.as_ref(), now);
    let woken = woken_work(tx, &event)?;
    let own_wake = work.as_ref().is_some_and(|w| woken.contains(&w.id));
    let other_wakes = woken
        .into_iter()
        .filter(|id| Some(id) != work.as_ref().map(|w| &w.id))
        .collect();
    let (routes, effect, detail) = match &work {
        Some(work) => {
            let interrupts =
                work.scope == event.scope && config.interrupts(&work.scope, &work.binding, &event.event_type);
            let (effect, detail) = effect_on(work, own_wake, interrupts);
            (bypassed(config, &event, work), effect, detail)
        }
        None => routed(config, &event),
    };
    Ok(Trace {
        routes,
        work: work.map(|w| w.id),
        effect,
        detail,
        other_wakes,
    })
}

/// The Work the event belongs to: the one it names, else the owner of its correlation key.
fn resolve_work(tx: &mut dyn Tx, probe: &Probe) -> Result<Option<Work>, HostError> {
    let id = match (&probe.work_id, &probe.correlation_key) {
        (Some(id), _) => Some(id.clone()),
        (None, Some(key)) => tx.work_owning_key(key)?,
        (None, None) => None,
    };
    let Some(id) = id else { return Ok(None) };
    match tx.get_work(&id)? {
        // A named Work must be in the traced scope; a key's owner bypasses routing wherever it is.
        Some(work) if probe.work_id.is_none() || work.scope == probe.scope => Ok(Some(work)),
        _ => Err(Refusal::not_found("Work").into()),
    }
}

/// The event as acceptance would store it: an operator's root event, after every existing one.
fn hypothetical(probe: Probe, work: Option<&Work>, now: Timestamp) -> Event {
    let correlation_key = probe.correlation_key.or_else(|| probe.work_id.as_deref().map(work_key));
    Event {
        id: String::new(),
        sequence: i64::MAX,
        event_type: probe.event_type,
        source: probe.source,
        scope: probe.scope,
        work_id: work.map(|w| w.id.clone()),
        execution_id: None,
        correlation_key,
        causation: Causation::root(""),
        actor: None,
        data: probe.data,
        accepted_at: now,
    }
}

/// The Work whose armed waits the event satisfies, each once.
fn woken_work(tx: &mut dyn Tx, event: &Event) -> Result<Vec<String>, HostError> {
    let Some(key) = &event.correlation_key else {
        return Ok(Vec::new());
    };
    let mut ids: Vec<String> = tx
        .armed_waits_for_key(key)?
        .into_iter()
        .filter(|w| w.matches(event))
        .map(|w| w.work_id)
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

fn effect_on(work: &Work, woken: bool, interrupts: bool) -> (Effect, String) {
    let id = &work.id;
    match work.state {
        _ if woken => (Effect::Wake, format!("Work {id} is waiting for this event and resumes")),
        WorkState::Running if interrupts => (
            Effect::Interrupt,
            format!("Work {id} is running: this event interrupts its attempt, and its next attempt starts from it"),
        ),
        WorkState::Running => (
            Effect::Inject,
            format!("Work {id} is running: a wait it declares later sees this event"),
        ),
        WorkState::Waiting => (
            Effect::Queue,
            format!("Work {id} waits for other events: its next attempt reads this one as input"),
        ),
        WorkState::Ready => (
            Effect::Queue,
            format!("another input woke Work {id} first: its next attempt reads this one as input too"),
        ),
        _ => (Effect::Drop, format!("Work {id} is finished")),
    }
}

fn bypassed(config: &Snapshot, event: &Event, work: &Work) -> Vec<RouteVerdict> {
    let reason = format!("the event belongs to Work {} ({})", work.id, work.state.as_str());
    scope_routes(config, event)
        .map(|(on, binding)| verdict(on, binding, Verdict::Bypassed, reason.clone()))
        .collect()
}

/// Routing as acceptance runs it for an event no Work owns: every matching route starts a Work.
fn routed(config: &Snapshot, event: &Event) -> (Vec<RouteVerdict>, Effect, String) {
    let enabled = config.scope_enabled(&event.scope);
    let routes: Vec<RouteVerdict> = config
        .route_reach(&event.scope, &event.event_type)
        .map(|(route, reach)| {
            let (on, binding) = (route.on.as_str(), route.binding.as_str());
            match reach {
                _ if !enabled => verdict(on, binding, Verdict::Skip, "the scope is disabled".into()),
                Reach::Matches => {
                    let stops = if route.last {
                        "; it is final, so routing stops here"
                    } else {
                        ""
                    };
                    let reason = format!("`{on}` matches; starts Work on {binding}{stops}");
                    verdict(on, binding, Verdict::Match, reason)
                }
                Reach::Skips => verdict(on, binding, Verdict::Skip, format!("`{on}` does not match the type")),
                Reach::NotReached => verdict(
                    on,
                    binding,
                    Verdict::NotReached,
                    "an earlier final route matched".into(),
                ),
            }
        })
        .collect();
    let started: Vec<&str> = routes
        .iter()
        .filter(|r| r.verdict == Verdict::Match)
        .map(|r| r.binding.as_str())
        .collect();
    match started.as_slice() {
        _ if !enabled => (routes, Effect::Drop, "the scope is disabled".into()),
        [] => (routes, Effect::Unmatched, "no route matches the type".into()),
        bindings => {
            let detail = format!("starts Work on {}", bindings.join(", "));
            (routes, Effect::Start, detail)
        }
    }
}

fn scope_routes<'a>(config: &'a Snapshot, event: &Event) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    config
        .scope(&event.scope)
        .into_iter()
        .flat_map(|s| s.routes.iter())
        .map(|r| (r.on.as_str(), r.binding.as_str()))
}

fn verdict(on: &str, binding: &str, verdict: Verdict, reason: String) -> RouteVerdict {
    RouteVerdict {
        on: on.to_owned(),
        binding: binding.to_owned(),
        verdict,
        reason,
    }
}

/// The sample events a scope's routes offer, in route order: for each route, the samples of the
/// ingresses that accept events in the scope whose type it matches, else one it synthesizes (a
/// family pattern `demo.*` standing for its `demo.sample` member, from an operator). A sample's
/// name is its type, each named once.
pub fn samples<'a>(config: &Snapshot, scope: &str, offered: impl Iterator<Item = &'a EventSample>) -> Vec<EventSample> {
    let offered: Vec<&EventSample> = offered
        .filter(|s| config.ingress_scope(&s.source.to_wire()) == Some(scope))
        .collect();
    let mut samples: Vec<EventSample> = Vec::new();
    for route in config.scope(scope).into_iter().flat_map(|s| s.routes.iter()) {
        let handled: Vec<EventSample> = offered
            .iter()
            .filter(|s| type_matches(&route.on, &s.event_type))
            .map(|s| (*s).clone())
            .collect();
        let offers = if handled.is_empty() {
            vec![synthesized(&route.on)]
        } else {
            handled
        };
        for sample in offers {
            if !samples.iter().any(|s| s.name == sample.name) {
                samples.push(sample);
            }
        }
    }
    samples
}

/// The sample an operator's event of a route's type makes.
fn synthesized(on: &str) -> EventSample {
    let event_type = match on.strip_suffix('*') {
        Some(family) => format!("{family}sample"),
        None => on.to_owned(),
    };
    EventSample {
        name: event_type.clone(),
        event_type,
        source: Source::Manual,
        correlation_key: None,
        data: Value::Null,
    }
}
