//! The test-only allowance: loopback socket addresses a test server listens on, which the guard
//! then treats as public. It permits anything only with the `test-allowance` feature, which only
//! dev-dependencies turn on, and the environment is read only in debug builds as well: Cargo can
//! unify a dev-dependency's feature into a release binary built beside benches or tests
//! (`cargo build --release --all-targets`), so the feature alone is not enough.

use std::net::SocketAddr;

/// The environment variable a test sets: comma-separated `127.0.0.1:PORT` addresses.
pub const ALLOW_VAR: &str = "OPEN_CONDUIT_TEST_FETCH_ALLOW";

#[derive(Debug, Clone, Default)]
pub struct Allowance(Vec<SocketAddr>);

impl Allowance {
    /// The addresses the environment names, loopback ones only; none without the feature.
    pub fn from_env() -> Allowance {
        if !cfg!(all(feature = "test-allowance", debug_assertions)) {
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
