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
use postgres::config::Host;
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

/// A client for `url`. Until TLS is supported, only a Unix socket or a loopback address is dialled:
/// a password or the store's digests never cross a network in the clear.
pub fn connect(url: &str) -> Result<Client> {
    let config = Config::from_str(url).map_err(|_| StoreError::Backend("the PostgreSQL URL does not parse".into()))?;
    if !is_local(&config) {
        return Err(StoreError::Backend(
            "the PostgreSQL URL names a host that is not this machine; without TLS only a Unix socket or a \
             loopback address is used"
                .into(),
        ));
    }
    config.connect(NoTls).map_err(backend)
}

/// Whether every host and host address `config` may dial is a Unix socket or loopback.
fn is_local(config: &Config) -> bool {
    let host_is_local = |host: &Host| match host {
        Host::Unix(_) => true,
        Host::Tcp(name) => name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()),
    };
    config.get_hosts().iter().all(host_is_local) && config.get_hostaddrs().iter().all(|ip| ip.is_loopback())
}

/// The server's code and message for the log; never its `DETAIL`, which can quote row values.
pub(crate) fn backend(e: postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Backend(format!("postgres {}: {}", db.code().code(), db.message())),
        None => StoreError::Backend(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_socket_or_loopback_is_dialled_without_tls() {
        for (url, local) in [
            ("postgresql:///db?host=/run/pg", true),
            ("postgres://u@localhost/db", true),
            ("postgres://u@127.0.0.1:5432/db", true),
            ("postgres://u@[::1]/db", true),
            ("host=/tmp user=u", true),
            ("postgres://u@db.example/db", false),
            ("postgres://u@10.0.0.5/db", false),
            ("postgres://u@localhost/db?hostaddr=10.0.0.5", false),
            ("postgres://u@localhost,db.example/db", false),
        ] {
            let config = Config::from_str(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(is_local(&config), local, "{url}");
        }
        // Refused before any dial: the test sends nothing to the network.
        assert!(matches!(
            connect("postgres://u@db.example/db"),
            Err(StoreError::Backend(_))
        ));
    }
}
