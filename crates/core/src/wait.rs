//! Waits: a parked Work's predicate over future events.

use serde::Serialize;

use crate::event::{Event, Source};
use crate::names::{is_type_pattern, type_matches};
use crate::time::{Duration, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitState {
    Armed,
    Satisfied,
    TimedOut,
    /// Its Work was cancelled.
    Cancelled,
}

impl WaitState {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitState::Armed => "armed",
            WaitState::Satisfied => "satisfied",
            WaitState::TimedOut => "timed_out",
            WaitState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<WaitState> {
        [
            WaitState::Armed,
            WaitState::Satisfied,
            WaitState::TimedOut,
            WaitState::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub id: String,
    pub work_id: String,
    pub execution_id: String,
    /// Type patterns, any of which matches.
    pub types: Vec<String>,
    /// Correlation keys, any of which matches; a type-only wait holds the Work's own keys.
    pub keys: Vec<String>,
    /// Events at or below this sequence were already seen by the segment that declared the wait.
    pub watermark: i64,
    pub timeout_at: Option<Timestamp>,
    pub state: WaitState,
    pub satisfied_by: Option<String>,
    pub created_at: Timestamp,
}

impl Wait {
    /// Whether `event` satisfies this wait. A Work's own emissions never wake it.
    pub fn matches(&self, event: &Event) -> bool {
        event.sequence > self.watermark
            && !self.is_own_emission(event)
            && self.types.iter().any(|p| type_matches(p, &event.event_type))
            && event.correlation_key.as_ref().is_some_and(|k| self.keys.contains(k))
    }

    fn is_own_emission(&self, event: &Event) -> bool {
        matches!(event.source, Source::Execution(_)) && event.work_id.as_deref() == Some(self.work_id.as_str())
    }
}

/// Whether a wait can be declared on `types` with `timeout`: one or more event types or family
/// patterns, and no timeout or a positive one. The `wait` builtin and a gate's parking plan both
/// ask this.
pub fn is_valid_wait(types: &[String], timeout: Option<Duration>) -> bool {
    !types.is_empty() && types.iter().all(|t| is_type_pattern(t)) && timeout.is_none_or(|t| t.0 > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Causation;
    use serde_json::Value;

    fn wait() -> Wait {
        Wait {
            id: "w".into(),
            work_id: "work1".into(),
            execution_id: "x1".into(),
            types: vec!["demo.*".into()],
            keys: vec!["work:work1".into()],
            watermark: 10,
            timeout_at: Some(Timestamp(100)),
            state: WaitState::Armed,
            satisfied_by: None,
            created_at: Timestamp(0),
        }
    }

    fn event(seq: i64, ty: &str, key: Option<&str>, source: Source, work: Option<&str>) -> Event {
        Event {
            id: format!("e{seq}"),
            sequence: seq,
            event_type: ty.into(),
            source,
            scope: "s".into(),
            work_id: work.map(Into::into),
            execution_id: None,
            correlation_key: key.map(Into::into),
            causation: Causation::root("r"),
            actor: None,
            data: Value::Null,
            accepted_at: Timestamp(0),
        }
    }

    #[test]
    fn matches_type_and_owned_key_after_watermark() {
        let w = wait();
        assert!(w.matches(&event(11, "demo.go", Some("work:work1"), Source::Manual, None)));
        assert!(
            !w.matches(&event(10, "demo.go", Some("work:work1"), Source::Manual, None)),
            "at watermark"
        );
        assert!(
            !w.matches(&event(11, "other.go", Some("work:work1"), Source::Manual, None)),
            "type"
        );
        assert!(
            !w.matches(&event(11, "demo.go", Some("work:other"), Source::Manual, None)),
            "key"
        );
        assert!(!w.matches(&event(11, "demo.go", None, Source::Manual, None)), "no key");
    }

    #[test]
    fn own_emissions_never_wake() {
        let own = event(
            11,
            "demo.go",
            Some("work:work1"),
            Source::Execution("x1".into()),
            Some("work1"),
        );
        assert!(!wait().matches(&own));
        let sibling = event(
            11,
            "demo.go",
            Some("work:work1"),
            Source::Execution("x9".into()),
            Some("work2"),
        );
        assert!(wait().matches(&sibling));
    }

    #[test]
    fn a_wait_needs_a_type_pattern_and_a_positive_timeout_if_any() {
        let types = |list: &[&str]| list.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        assert!(is_valid_wait(&types(&["demo.*"]), None));
        assert!(is_valid_wait(&types(&["demo.go"]), Some(Duration(1))));
        assert!(!is_valid_wait(&[], None));
        assert!(!is_valid_wait(&types(&["not a type"]), None));
        assert!(!is_valid_wait(&types(&["demo.go"]), Some(Duration(0))));
    }
}
