//! Executions (attempts), their declarations, and how a finished segment settles.

use serde::{Deserialize, Serialize};

use crate::time::{Duration, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    Running,
    /// The segment ended on a declared wait; the Work resumes in a new attempt.
    Waiting,
    Succeeded,
    Failed,
    /// Fenced by an operator's cancel of its Work.
    Cancelled,
}

impl ExecutionState {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionState::Running => "running",
            ExecutionState::Waiting => "waiting",
            ExecutionState::Succeeded => "succeeded",
            ExecutionState::Failed => "failed",
            ExecutionState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<ExecutionState> {
        [
            ExecutionState::Running,
            ExecutionState::Waiting,
            ExecutionState::Succeeded,
            ExecutionState::Failed,
            ExecutionState::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    Succeeded,
    Failed,
}

/// Where an outcome came from: the execution declared it, or the host mapped the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeSource {
    Declared,
    Exit,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub status: OutcomeStatus,
    pub summary: Option<String>,
    pub source: OutcomeSource,
}

/// What a segment declared through its toolbelt; at most one per epoch, applied when the segment ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Declaration {
    Outcome {
        status: OutcomeStatus,
        summary: Option<String>,
        /// Files in the working directory the host keeps when the segment ends.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<String>,
    },
    Wait {
        types: Vec<String>,
        keys: Vec<String>,
        timeout: Option<Duration>,
        /// Files in the working directory the host keeps when the segment parks.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<String>,
    },
}

impl Declaration {
    /// The files the declaration names for the host to keep when the segment ends.
    pub fn artifacts(&self) -> &[String] {
        match self {
            Declaration::Outcome { artifacts, .. } | Declaration::Wait { artifacts, .. } => artifacts,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Execution {
    pub id: String,
    pub work_id: String,
    pub scope: String,
    pub binding: String,
    pub epoch: u32,
    /// The daemon instance that holds the lease.
    pub owner: String,
    pub state: ExecutionState,
    /// The event this segment continues from; an emission's causal parent.
    pub cause_event: String,
    /// The highest event sequence acknowledged when the segment started.
    pub watermark: i64,
    pub declaration: Option<Declaration>,
    pub outcome: Option<Outcome>,
    pub exit_code: Option<i32>,
    #[serde(skip)]
    pub pid: Option<i32>,
    pub generation: i64,
    pub lease_expires_at: Timestamp,
    pub deadline_at: Timestamp,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// When the attempt's process was known to be gone after it was fenced: observed by the host,
    /// or confirmed by an operator (`confirm-stopped`). Until then its Work is not retried.
    pub stopped_at: Option<Timestamp>,
    /// An agent executor's own session id, which the Work's next attempt resumes after a wait.
    pub agent_session: Option<String>,
    /// What the agent CLI reported it used (tokens, cost), as it reported it.
    pub agent_usage: Option<serde_json::Value>,
}

/// How a segment ended, as the host observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentEnd {
    Exited(i32),
    /// Killed by a signal or by the attempt deadline.
    Killed,
    /// The process ended while no daemon watched it (after a restart); its exit status is unknown.
    Lost,
    /// Its daemon stopped renewing the lease, and another daemon on the shared store took the
    /// attempt over: its process may still run where that daemon did, but its authority is gone.
    Abandoned,
    /// An adopted process (started by an earlier daemon, so not our child) ended while watched;
    /// its exit status is unknown, and it may well have finished its work.
    ExitUnknown,
    /// The executor could not start the process; the OS error number, when it was the spawn that
    /// failed.
    FailedToStart(Option<i32>),
    /// A secret the binding receives could not be resolved, so the process was not started.
    SecretUnavailable,
    /// The kernel cannot enforce the binding's sandbox, so the process was not started.
    SandboxUnavailable,
    /// The attempt's toolbelt endpoint could not be placed (its socket path too long even in the
    /// fallback directory, or that directory unsafe), so the process was not started.
    EndpointUnavailable,
}

/// What the host does with a finished segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    Finished(Outcome),
    Wait {
        types: Vec<String>,
        keys: Vec<String>,
        timeout: Option<Duration>,
    },
}

/// Applies the segment's declaration, else maps its exit: a declared outcome replaces the exit status;
/// a declared wait parks the Work whatever the exit status.
pub fn settle(declaration: Option<&Declaration>, end: SegmentEnd) -> Settlement {
    match declaration {
        Some(Declaration::Outcome { status, summary, .. }) => Settlement::Finished(Outcome {
            status: *status,
            summary: summary.clone(),
            source: OutcomeSource::Declared,
        }),
        Some(Declaration::Wait {
            types, keys, timeout, ..
        }) => Settlement::Wait {
            types: types.clone(),
            keys: keys.clone(),
            timeout: *timeout,
        },
        None => Settlement::Finished(exit_outcome(end)),
    }
}

fn exit_outcome(end: SegmentEnd) -> Outcome {
    let (status, summary) = match end {
        SegmentEnd::Exited(0) => (OutcomeStatus::Succeeded, "exited with status 0".to_owned()),
        SegmentEnd::Exited(code) => (OutcomeStatus::Failed, format!("exited with status {code}")),
        SegmentEnd::Killed => (OutcomeStatus::Failed, "killed before it exited".to_owned()),
        SegmentEnd::Lost => (
            OutcomeStatus::Failed,
            "ended unobserved; its exit status is unknown".to_owned(),
        ),
        SegmentEnd::Abandoned => (
            OutcomeStatus::Failed,
            "its daemon stopped renewing the lease, and another daemon took it over".to_owned(),
        ),
        SegmentEnd::ExitUnknown => (
            OutcomeStatus::Failed,
            "ended after a daemon restart without declaring an outcome; its exit status is unknown".to_owned(),
        ),
        SegmentEnd::FailedToStart(errno) => (OutcomeStatus::Failed, failed_to_start(errno)),
        SegmentEnd::SecretUnavailable => (
            OutcomeStatus::Failed,
            "a secret it receives could not be resolved; see its log".to_owned(),
        ),
        SegmentEnd::SandboxUnavailable => (
            OutcomeStatus::Failed,
            "sandbox_unavailable: this kernel cannot enforce the binding's sandbox; see its log".to_owned(),
        ),
        SegmentEnd::EndpointUnavailable => (
            OutcomeStatus::Failed,
            "toolbelt endpoint unavailable: its socket could not be placed; its log names the path (a shorter --state directory shortens it)".to_owned(),
        ),
    };
    Outcome {
        status,
        summary: Some(summary),
        source: OutcomeSource::Exit,
    }
}

/// Why a process did not start, in the words an operator acts on; the log has the program's path.
fn failed_to_start(errno: Option<i32>) -> String {
    let why = match errno {
        None => return "the executor could not start it; see its log".to_owned(),
        Some(2) => "the program was not found (ENOENT)".to_owned(),
        Some(13) => "the program may not be run: no execute permission, or the sandbox denies it (EACCES)".to_owned(),
        Some(8) => "the program is not an executable format (ENOEXEC)".to_owned(),
        Some(20) => "a path to the program names something that is not a directory (ENOTDIR)".to_owned(),
        Some(code) => format!("the program could not be started (os error {code})"),
    };
    format!("{why}; see its log for the path")
}

/// The agent session a Work's new attempt continues: the one its latest earlier attempt left,
/// when that attempt ended on a wait (a parked call, or a declared `wait`). `attempts` are the
/// Work's, oldest first; `current` is the new one's id.
pub fn session_to_resume<'a>(attempts: &'a [Execution], current: &str) -> Option<&'a str> {
    // An attempt that never got as far as a session (it failed to start) is passed over, so a
    // retry of a resumption still resumes.
    let previous = attempts
        .iter()
        .rev()
        .filter(|x| x.id != current)
        .find(|x| x.agent_session.is_some() || x.pid.is_some() || x.state == ExecutionState::Waiting)?;
    (previous.state == ExecutionState::Waiting)
        .then_some(previous.agent_session.as_deref())
        .flatten()
}

impl Execution {
    /// Whether a timestamp is inside the lease (expiry is exclusive).
    pub fn lease_live_at(&self, now: Timestamp) -> bool {
        now < self.lease_expires_at
    }

    /// Whether the daemon `instance` may take this attempt over: it is running, leased to another
    /// daemon, and that daemon let the lease lapse (a daemon never takes over its own: it adopts
    /// them when it starts, and renews them while it runs).
    pub fn abandoned_for(&self, instance: &str, now: Timestamp) -> bool {
        self.state == ExecutionState::Running && self.owner != instance && !self.lease_live_at(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(id: &str, state: ExecutionState, session: Option<&str>) -> Execution {
        Execution {
            id: id.into(),
            work_id: "w".into(),
            scope: "s".into(),
            binding: "b".into(),
            epoch: 1,
            owner: "me".into(),
            state,
            cause_event: "e".into(),
            watermark: 0,
            declaration: None,
            outcome: None,
            exit_code: None,
            pid: None,
            generation: 1,
            lease_expires_at: Timestamp(0),
            deadline_at: Timestamp(0),
            started_at: Timestamp(0),
            ended_at: None,
            stopped_at: None,
            agent_session: session.map(str::to_owned),
            agent_usage: None,
        }
    }

    #[test]
    fn only_a_session_that_ended_on_a_wait_is_resumed() {
        use ExecutionState::{Failed, Running, Waiting};
        let now = attempt("x3", Running, None);
        let waited = [
            attempt("x1", Failed, Some("s1")),
            attempt("x2", Waiting, Some("s2")),
            now.clone(),
        ];
        assert_eq!(session_to_resume(&waited, "x3"), Some("s2"));
        let failed = [
            attempt("x1", Waiting, Some("s1")),
            attempt("x2", Failed, Some("s2")),
            now.clone(),
        ];
        assert_eq!(
            session_to_resume(&failed, "x3"),
            None,
            "a retry after a failure starts afresh"
        );
        let unstarted = [
            attempt("x1", Waiting, Some("s1")),
            attempt("x2", Failed, None),
            now.clone(),
        ];
        assert_eq!(
            session_to_resume(&unstarted, "x3"),
            Some("s1"),
            "an attempt that never started is passed over"
        );
        assert_eq!(session_to_resume(&[now], "x3"), None);
        assert_eq!(session_to_resume(&[attempt("x1", Waiting, None)], "x3"), None);
    }

    #[test]
    fn a_process_that_did_not_start_says_why() {
        let summary = |errno| exit_outcome(SegmentEnd::FailedToStart(errno)).summary.unwrap();
        assert!(summary(Some(2)).contains("ENOENT"));
        assert!(summary(Some(13)).contains("EACCES"));
        assert!(summary(Some(99)).contains("os error 99"));
        assert!(summary(None).contains("see its log"));
    }

    #[test]
    fn declared_outcome_replaces_exit_status() {
        let d = Declaration::Outcome {
            status: OutcomeStatus::Succeeded,
            summary: Some("done".into()),
            artifacts: vec![],
        };
        let Settlement::Finished(o) = settle(Some(&d), SegmentEnd::Exited(3)) else {
            panic!()
        };
        assert_eq!(
            (o.status, o.source),
            (OutcomeStatus::Succeeded, OutcomeSource::Declared)
        );
    }

    #[test]
    fn exit_status_maps_when_nothing_declared() {
        let Settlement::Finished(o) = settle(None, SegmentEnd::Exited(0)) else {
            panic!()
        };
        assert_eq!(o.status, OutcomeStatus::Succeeded);
        let Settlement::Finished(o) = settle(None, SegmentEnd::Exited(2)) else {
            panic!()
        };
        assert_eq!(o.status, OutcomeStatus::Failed);
        let Settlement::Finished(o) = settle(None, SegmentEnd::Killed) else {
            panic!()
        };
        assert_eq!((o.status, o.source), (OutcomeStatus::Failed, OutcomeSource::Exit));
    }

    #[test]
    fn declared_wait_parks_even_after_failure_exit() {
        let d = Declaration::Wait {
            types: vec!["demo.go".into()],
            keys: vec![],
            timeout: None,
            artifacts: vec![],
        };
        assert!(matches!(
            settle(Some(&d), SegmentEnd::Exited(1)),
            Settlement::Wait { .. }
        ));
    }

    #[test]
    fn only_another_daemons_running_attempt_with_a_lapsed_lease_is_abandoned() {
        let leased = Execution {
            lease_expires_at: Timestamp(1000),
            ..attempt("x", ExecutionState::Running, None)
        };
        for (x, instance, at, abandoned) in [
            (&leased, "other", 1000, true),
            (&leased, "other", 999, false),
            (&leased, "me", 5000, false),
            (
                &Execution {
                    state: ExecutionState::Waiting,
                    ..leased.clone()
                },
                "other",
                5000,
                false,
            ),
            (
                &Execution {
                    state: ExecutionState::Succeeded,
                    ..leased.clone()
                },
                "other",
                5000,
                false,
            ),
        ] {
            assert_eq!(
                x.abandoned_for(instance, Timestamp(at)),
                abandoned,
                "{instance} at {at}, {:?}",
                x.state
            );
        }
    }
}
