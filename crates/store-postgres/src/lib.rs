//! The shared store: conduit-store's schema on PostgreSQL, so several daemons can share one Work
//! queue, configuration, audit trail and set of operators (issue 18).
//!
//! This release has the connection and the migrations; the `Tx` vocabulary on PostgreSQL comes next
//! (`docs/decisions.md`, "Several daemons on one PostgreSQL store").
//!
//! Architecture invariants: nothing here relies on a process-local lock for correctness (another
//! daemon is always a possible writer); a backend error's text goes only into
//! [`StoreError::Backend`], for the log.
#![forbid(unsafe_code)]

use std::str::FromStr;

use conduit_store::StoreError;
use postgres::{Client, Config, NoTls};

pub mod migrations;

pub type Result<T> = std::result::Result<T, StoreError>;

/// A connection to a PostgreSQL store, its schema migrated to this release's version.
pub struct PostgresStore {
    client: Client,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://…`, `postgresql://…` or PostgreSQL's `key=value` form) and
    /// applies pending migrations.
    pub fn open(url: &str) -> Result<PostgresStore> {
        let mut client = connect(url)?;
        migrations::migrate(&mut client)?;
        Ok(PostgresStore { client })
    }

    /// The schema version the database is at.
    pub fn schema_version(&mut self) -> Result<i64> {
        migrations::version(&mut self.client)
    }
}

/// A client for `url`, without TLS (a Unix socket or loopback).
pub fn connect(url: &str) -> Result<Client> {
    let config = Config::from_str(url).map_err(|_| StoreError::Backend("the PostgreSQL URL does not parse".into()))?;
    config.connect(NoTls).map_err(backend)
}

/// The server's code and message for the log; never its `DETAIL`, which can quote row values.
pub(crate) fn backend(e: postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Backend(format!("postgres {}: {}", db.code().code(), db.message())),
        None => StoreError::Backend(e.to_string()),
    }
}
