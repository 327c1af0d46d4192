//! The conformance suite on a PostgreSQL store, in process and against the real daemon started with
//! `--store` (each case in a database of its own on the server `OPEN_CONDUIT_TEST_POSTGRES` names).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod conformance;

use conduit_store_postgres::testing::TestDatabase;
use conformance::daemon::RealDaemon;
use conformance::in_process::InProcess;

#[test]
fn every_case_holds_on_postgres() {
    if TestDatabase::create().is_none() {
        return;
    }
    conformance::run_all(|| InProcess::on_postgres(TestDatabase::create().unwrap()));
}

#[test]
fn every_case_holds_against_a_daemon_on_postgres() {
    if TestDatabase::create().is_none() {
        return;
    }
    conformance::run_all(|| RealDaemon::on_postgres(TestDatabase::create().unwrap()));
}
