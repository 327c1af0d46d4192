//! Tool sessions (RFC 0078 §D): content-free brackets around one or more calls of one tool by one
//! execution. `tool.session.opened` and `tool.session.closed` on the Work's log enclose the calls'
//! `agent.toolCalled` / `agent.toolReturned`.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// How a session ended: closed by its execution (`completed` or `failed`), or by the host: `parked`
/// when a gate parked a call in it (the approval interrupt ends the segment, inside the bracket;
/// the resumed attempt opens a session of its own), `failed` when the execution's authority ended
/// otherwise with the session still open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionOutcome {
    Completed,
    Failed,
    Parked,
}

impl SessionOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionOutcome::Completed => "completed",
            SessionOutcome::Failed => "failed",
            SessionOutcome::Parked => "parked",
        }
    }

    pub fn parse(text: &str) -> Option<SessionOutcome> {
        [
            SessionOutcome::Completed,
            SessionOutcome::Failed,
            SessionOutcome::Parked,
        ]
        .into_iter()
        .find(|o| o.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSession {
    pub id: String,
    pub execution_id: String,
    pub work_id: String,
    pub scope: String,
    /// The operation its calls make.
    pub tool_id: String,
    /// The `tool.session.opened` event, which the closing event continues from.
    pub opened_event: String,
    pub opened_at: Timestamp,
    pub closed: Option<(SessionOutcome, Timestamp)>,
}

impl ToolSession {
    pub fn is_open(&self) -> bool {
        self.closed.is_none()
    }
}
