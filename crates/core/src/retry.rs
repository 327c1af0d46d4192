//! A binding's failure policy: which finished segments are tried again, and when.

use crate::execution::{Declaration, SegmentEnd};
use crate::time::{Duration, Timestamp};

/// The longest wait between two attempts, however many failed before (unless `backoff` itself is
/// longer).
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// How many attempts a Work gets in a row, and how long the first retry waits. Each further retry
/// waits twice as long as the one before, up to [`MAX_BACKOFF`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff: Duration,
}

impl Default for RetryPolicy {
    /// One attempt: a failure is final.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1,
            backoff: Duration(0),
        }
    }
}

/// Whether a segment's failure is the kind a retry may cure: it declared nothing, and it ended
/// unobserved, could not start, or exited non-zero (a crash by a signal included). A declaration is
/// the agent's own word; a kill (deadline, lease, operator), an adopted process's end (it may have
/// finished) and a configuration problem (secret, sandbox, toolbelt endpoint) are not retried.
pub fn is_retryable(declaration: Option<&Declaration>, end: SegmentEnd) -> bool {
    let failed = match end {
        SegmentEnd::Lost | SegmentEnd::Abandoned | SegmentEnd::FailedToStart(_) => true,
        SegmentEnd::Exited(code) => code != 0,
        SegmentEnd::Killed
        | SegmentEnd::ExitUnknown
        | SegmentEnd::SecretUnavailable
        | SegmentEnd::SandboxUnavailable
        | SegmentEnd::EndpointUnavailable => false,
    };
    declaration.is_none() && failed
}

/// How many attempts in a row a Work gets when they end abandoned by their daemon, whatever its
/// binding allows: a daemon's death does not fail the Work it ran, but a Work that takes down every
/// daemon that runs it is not tried for ever.
pub const ABANDONED_ATTEMPTS: u32 = 3;

impl RetryPolicy {
    /// The policy for a segment that ended `end`: the binding's, except that an attempt abandoned
    /// by its daemon gets at least [`ABANDONED_ATTEMPTS`].
    pub fn for_end(self, end: SegmentEnd) -> RetryPolicy {
        match end {
            SegmentEnd::Abandoned => RetryPolicy {
                max_attempts: self.max_attempts.max(ABANDONED_ATTEMPTS),
                ..self
            },
            _ => self,
        }
    }

    /// When the next attempt may start after `failed` attempts in a row have failed retryably (this
    /// one included), or `None` when none is left: `backoff`, doubled for each earlier failure.
    pub fn next_attempt_at(&self, failed: u32, now: Timestamp) -> Option<Timestamp> {
        if failed == 0 || failed >= self.max_attempts {
            return None;
        }
        let doublings = (failed - 1).min(32);
        let wait = self.backoff.0.saturating_mul(1i64 << doublings);
        Some(now.plus(Duration(wait.min(MAX_BACKOFF.0.max(self.backoff.0)))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_undeclared_lost_unstarted_or_failed_exits_are_retried() {
        let declared = Declaration::Outcome {
            status: crate::OutcomeStatus::Failed,
            summary: None,
            artifacts: Vec::new(),
        };
        for (declaration, end, retried) in [
            (None, SegmentEnd::Lost, true),
            (None, SegmentEnd::Abandoned, true),
            (None, SegmentEnd::FailedToStart(Some(2)), true),
            (None, SegmentEnd::FailedToStart(None), true),
            (None, SegmentEnd::Exited(1), true),
            (None, SegmentEnd::Exited(-1), true),
            (None, SegmentEnd::Exited(0), false),
            (None, SegmentEnd::Killed, false),
            (None, SegmentEnd::ExitUnknown, false),
            (None, SegmentEnd::SecretUnavailable, false),
            (None, SegmentEnd::SandboxUnavailable, false),
            (Some(&declared), SegmentEnd::Exited(1), false),
            (Some(&declared), SegmentEnd::Lost, false),
            (Some(&declared), SegmentEnd::Abandoned, false),
        ] {
            assert_eq!(is_retryable(declaration, end), retried, "{end:?} {declaration:?}");
        }
    }

    #[test]
    fn attempts_are_counted_and_backoff_doubles_up_to_its_cap() {
        let policy = RetryPolicy {
            max_attempts: 4,
            backoff: Duration::from_secs(10),
        };
        let at = |failed| policy.next_attempt_at(failed, Timestamp(0)).map(|t| t.0);
        assert_eq!(
            [at(1), at(2), at(3), at(4), at(9)],
            [Some(10_000), Some(20_000), Some(40_000), None, None]
        );
        assert_eq!(RetryPolicy::default().next_attempt_at(1, Timestamp(0)), None);
        let many = RetryPolicy {
            max_attempts: 100,
            backoff: Duration::from_secs(10),
        };
        assert_eq!(many.next_attempt_at(99, Timestamp(0)), Some(Timestamp(MAX_BACKOFF.0)));
        let long = RetryPolicy {
            max_attempts: 3,
            backoff: Duration::from_secs(7200),
        };
        assert_eq!(long.next_attempt_at(2, Timestamp(0)), Some(Timestamp(7_200_000)));
    }

    #[test]
    fn an_abandoned_attempt_is_retried_at_least_twice_whatever_the_binding_allows() {
        let once = RetryPolicy::default();
        let abandoned = once.for_end(SegmentEnd::Abandoned);
        assert_eq!(abandoned.max_attempts, ABANDONED_ATTEMPTS);
        assert!(abandoned.next_attempt_at(2, Timestamp(0)).is_some());
        assert_eq!(abandoned.next_attempt_at(3, Timestamp(0)), None, "bounded");
        assert_eq!(
            once.for_end(SegmentEnd::Lost),
            once,
            "control: a lost attempt keeps the binding's policy"
        );
        let more = RetryPolicy {
            max_attempts: 5,
            backoff: Duration::from_secs(1),
        };
        assert_eq!(
            more.for_end(SegmentEnd::Abandoned),
            more,
            "a binding allowing more keeps its own"
        );
    }
}
