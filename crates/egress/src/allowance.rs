//! The test-only allowance: loopback socket addresses a test server listens on, which the guard
//! then treats as public. It exists only in builds with the `test-allowance` feature, which only
//! test builds turn on (through dev-dependencies); a release build has no code that reads it, so no
//! configuration or environment can open the guard there.

use std::net::SocketAddr;

/// The environment variable a test sets: comma-separated `127.0.0.1:PORT` addresses.
pub const ALLOW_VAR: &str = "OPEN_CONDUIT_TEST_FETCH_ALLOW";

#[derive(Debug, Clone, Default)]
pub struct Allowance(Vec<SocketAddr>);

impl Allowance {
    /// The addresses the environment names, loopback ones only; none without the feature.
    pub fn from_env() -> Allowance {
        if !cfg!(feature = "test-allowance") {
            return Allowance::default();
        }
        let listed = std::env::var(ALLOW_VAR).unwrap_or_default();
        Allowance::of(listed.split(',').filter_map(|a| a.trim().parse().ok()))
    }

    /// Exactly these addresses, loopback ones only.
    pub fn of(addresses: impl IntoIterator<Item = SocketAddr>) -> Allowance {
        Allowance(addresses.into_iter().filter(|a| a.ip().is_loopback()).collect())
    }

    pub fn permits(&self, addr: SocketAddr) -> bool {
        cfg!(feature = "test-allowance") && self.0.contains(&addr)
    }
}
