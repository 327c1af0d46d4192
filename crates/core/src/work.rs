//! Work: a unit of work in a scope, run by a binding through one or more attempts.

use serde::Serialize;
use serde_json::Value;

use crate::execution::Outcome;
use crate::time::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    Ready,
    Running,
    Waiting,
    Succeeded,
    Failed,
    Cancelled,
}

impl WorkState {
    pub fn is_terminal(self) -> bool {
        matches!(self, WorkState::Succeeded | WorkState::Failed | WorkState::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkState::Ready => "ready",
            WorkState::Running => "running",
            WorkState::Waiting => "waiting",
            WorkState::Succeeded => "succeeded",
            WorkState::Failed => "failed",
            WorkState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<WorkState> {
        [
            WorkState::Ready,
            WorkState::Running,
            WorkState::Waiting,
            WorkState::Succeeded,
            WorkState::Failed,
            WorkState::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// Why a Work reconcile held is not claimed: its binding is gone from the active configuration
/// (rebind it to release it).
pub const BINDING_REMOVED: &str = "binding_removed";

/// Why interrupted Work is not claimed yet: its fenced attempt has not been seen to stop (see the
/// scheduler's interrupt).
pub const INTERRUPTED: &str = "interrupted";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Work {
    pub id: String,
    pub scope: String,
    pub binding: String,
    pub parent_work: Option<String>,
    pub state: WorkState,
    pub input: Value,
    /// Correlation keys this Work owns: always `work:<id>`, plus any given at creation.
    pub keys: Vec<String>,
    /// The lease epoch of the latest attempt; the next claim takes `epoch + 1`.
    pub epoch: u32,
    pub outcome: Option<Outcome>,
    /// The event the next (or current) segment continues from: creation, or what woke it.
    pub wake_event: String,
    /// The configuration generation the Work was created under.
    pub generation: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Why a ready Work is not being claimed (`operator_cancelled` until a manual retry).
    pub blocked_reason: Option<String>,
    /// Attempts in a row that failed and were retried under the binding's policy (see
    /// `crate::retry`); a segment that waits, or a retry by hand, starts the count over.
    pub failed_attempts: u32,
    /// A ready Work waiting out its retry backoff is not claimed before this.
    pub not_before: Option<Timestamp>,
    /// The binding grants the Work took at creation: their operations join its attempts' tokens,
    /// within the scope's ceiling.
    pub grants: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_terminality() {
        for s in ["ready", "running", "waiting", "succeeded", "failed", "cancelled"] {
            assert_eq!(WorkState::parse(s).map(WorkState::as_str), Some(s));
        }
        assert!(WorkState::Failed.is_terminal() && !WorkState::Waiting.is_terminal());
        assert_eq!(WorkState::parse("done"), None);
    }
}
