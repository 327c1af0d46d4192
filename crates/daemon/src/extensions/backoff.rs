//! A service's request to be left alone (`Retry-After`, a rate limit's reset), remembered so that
//! until it passes calls are refused at once, without a request.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use conduit_toolbelt::registry::OperationError;

/// The longest a service may ask to be left alone for: past it, calls are tried again anyway.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// Until when, and the refusal's code (`github_rate_limited`, `github_unavailable`, ...).
#[derive(Clone, Default)]
pub struct Backoff(Arc<Mutex<Option<(Instant, String)>>>);

impl Backoff {
    /// Refused, with the seconds left and the code that started it, while the service asked to be
    /// left alone.
    pub fn check(&self, service: &str) -> Result<(), OperationError> {
        let until = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match until.map(|(u, code)| (u.saturating_duration_since(Instant::now()), code)) {
            Some((left, code)) if !left.is_zero() => Err(OperationError {
                retry_after: Some(left.as_secs().max(1)),
                ..OperationError::new(
                    &code,
                    format!("{service} asked to be left alone for a while; try again after `retry_after` seconds"),
                )
            }),
            _ => Ok(()),
        }
    }

    /// Remembers a refusal's `retry_after` (at most an hour), keeping the later of two.
    pub fn note(&self, refusal: &OperationError) {
        let Some(seconds) = refusal.retry_after else {
            return;
        };
        let until = Instant::now() + Duration::from_secs(seconds).min(MAX_WAIT);
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if held.as_ref().is_none_or(|(earlier, _)| *earlier < until) {
            *held = Some((until, refusal.code.clone()));
        }
    }
}
