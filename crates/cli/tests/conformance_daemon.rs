//! The conformance suite against the real daemon, through its sockets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod conformance;

use conformance::daemon::RealDaemon;

#[test]
fn every_case_holds_against_the_daemon() {
    conformance::run_all(RealDaemon::new);
}
