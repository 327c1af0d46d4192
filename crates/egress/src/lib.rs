//! Egress: `safeFetch`, the SSRF-guarded HTTP client behind the `http.fetch` operation and
//! packages' `http.safeFetch` (RFC 0076 §B).
//!
//! - [`address`] and [`request`] are the rules, pure: which addresses are public, which URLs,
//!   methods and headers a fetch may use.
//! - [`fetch`] is the I/O: resolve, vet every address, connect to the vetted one and check the
//!   peer, follow redirects by hand re-checking each hop, cap the body and the time.
//!
//! Architecture invariant: nothing connects before the hop's every resolved address is vetted, and
//! a refusal names the class of the address (`loopback`, `private`, ...), never the address.
#![forbid(unsafe_code)]

pub mod address;
pub mod allowance;
pub mod fetch;
pub mod request;

pub use address::Blocked;
pub use fetch::{FetchRequest, FetchResponse, Limits, Resolve, SafeFetch};

/// Why a fetch did not happen or did not finish. Messages are safe: no address, no header value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// `ssrf_blocked`: an address, a name or a protocol switch the guard refuses.
    Blocked(Blocked),
    /// `invalid_input`: the request itself is not one the host sends.
    Invalid(&'static str),
    /// `fetch_failed`: resolution, connection, TLS, HTTP, a cap or the timeout.
    Failed(&'static str),
}

impl FetchError {
    fn invalid(why: &'static str) -> FetchError {
        FetchError::Invalid(why)
    }

    pub fn code(&self) -> &'static str {
        match self {
            FetchError::Blocked(_) => "ssrf_blocked",
            FetchError::Invalid(_) => "invalid_input",
            FetchError::Failed(_) => "fetch_failed",
        }
    }

    pub fn message(&self) -> String {
        match self {
            FetchError::Blocked(Blocked::Upgrade) => "a protocol switch (upgrade) is never fetched".into(),
            FetchError::Blocked(class) => format!("the destination is not public ({})", class.as_str()),
            FetchError::Invalid(why) | FetchError::Failed(why) => (*why).to_owned(),
        }
    }
}
