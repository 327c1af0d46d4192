//! A service's request to be left alone (`Retry-After`, a rate limit's reset), remembered so that
//! until it passes calls are refused at once, without a request.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use conduit_toolbelt::registry::OperationError;

#[derive(Clone, Default)]
pub struct Backoff(Arc<Mutex<Option<Instant>>>);

impl Backoff {
    /// `Err(code)` with the seconds left while the service asked to be left alone.
    pub fn check(&self, code: &str, service: &str) -> Result<(), OperationError> {
        let until = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match until.map(|u| u.saturating_duration_since(Instant::now())) {
            Some(left) if !left.is_zero() => Err(OperationError {
                retry_after: Some(left.as_secs().max(1)),
                ..OperationError::new(
                    code,
                    format!("{service} asked to be left alone for a while; try again after `retry_after` seconds"),
                )
            }),
            _ => Ok(()),
        }
    }

    /// Remembers a refusal's `retry_after`, if it has one.
    pub fn note(&self, refusal: &OperationError) {
        if let Some(seconds) = refusal.retry_after {
            *self.0.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(Instant::now() + Duration::from_secs(seconds));
        }
    }
}
