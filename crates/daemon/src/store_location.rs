//! Where the daemon keeps its store (`--store URL`, `OPEN_CONDUIT_STORE`): the embedded SQLite file
//! in its state directory, or a PostgreSQL database several daemons share ("Store" in DESIGN.md).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use conduit_store::Store;
use conduit_store_postgres::PostgresStore;
use conduit_store_sqlite::SqliteStore;

use crate::{DaemonError, StateDir};

/// The store a daemon opens.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum StoreLocation {
    /// `<state>/store.db`: absent, or `sqlite:`.
    #[default]
    Embedded,
    /// `postgres://…` or `postgresql://…`, kept whole for the client (it may hold a password).
    Postgres(String),
}

impl FromStr for StoreLocation {
    type Err = String;

    fn from_str(url: &str) -> Result<StoreLocation, String> {
        if url.is_empty() || url == "sqlite:" {
            Ok(StoreLocation::Embedded)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreLocation::Postgres(url.to_owned()))
        } else {
            Err("a store is `sqlite:` (the embedded default, <state>/store.db) or a postgres:// URL".into())
        }
    }
}

/// Never the URL itself: it may carry a password.
impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Embedded => f.write_str("Embedded"),
            StoreLocation::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

impl StoreLocation {
    /// Whether other daemons may share the store.
    pub fn is_shared(&self) -> bool {
        matches!(self, StoreLocation::Postgres(_))
    }

    /// Opens the store, migrating its schema to this release's.
    pub fn open(&self, state: &StateDir) -> Result<Arc<dyn Store>, DaemonError> {
        Ok(match self {
            StoreLocation::Embedded => Arc::new(SqliteStore::open(&state.store_path())?),
            StoreLocation::Postgres(url) => Arc::new(PostgresStore::open(url)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_url_names_sqlite_or_postgres_and_nothing_else() {
        let cases = [
            ("", Some(StoreLocation::Embedded)),
            ("sqlite:", Some(StoreLocation::Embedded)),
            (
                "postgres://u@localhost/db",
                Some(StoreLocation::Postgres("postgres://u@localhost/db".into())),
            ),
            (
                "postgresql:///db?host=/run/pg",
                Some(StoreLocation::Postgres("postgresql:///db?host=/run/pg".into())),
            ),
            ("mysql://localhost/db", None),
            ("sqlite:/elsewhere.db", None),
            ("/var/lib/store.db", None),
        ];
        for (url, expected) in cases {
            assert_eq!(url.parse::<StoreLocation>().ok(), expected, "{url}");
        }
    }

    #[test]
    fn a_postgres_url_is_never_printed() {
        let location: StoreLocation = "postgres://u:hunter2@localhost/db".parse().unwrap();
        assert!(!format!("{location:?}").contains("hunter2"));
    }
}
