//! Where the daemon keeps its store (`--store URL`, `OPEN_CONDUIT_STORE`): the embedded SQLite file
//! in its state directory, or a PostgreSQL database several daemons share ("Store" in DESIGN.md).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use conduit_store::Store;
use conduit_store_postgres::{Access, PostgresStore};
use conduit_store_sqlite::SqliteStore;

use crate::secrets::Resolver;
use crate::{DaemonError, StateDir};

/// The store a daemon opens.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum StoreLocation {
    /// `<state>/store.db`: absent, or `sqlite:`.
    #[default]
    Embedded,
    /// `postgres://…` or `postgresql://…`.
    Postgres(PostgresLocation),
}

/// A PostgreSQL store: its URL, kept whole for the client (it may hold a password), and what is
/// given beside it.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresLocation {
    url: String,
    /// A secret reference to the password (`keyring:`, `file:`, `env:`, `cmd:`), resolved at open.
    password: Option<String>,
    /// A PEM file of the certificate authority the server's certificate must chain to.
    ca: Option<PathBuf>,
}

impl FromStr for StoreLocation {
    type Err = String;

    fn from_str(url: &str) -> Result<StoreLocation, String> {
        if url.is_empty() || url == "sqlite:" {
            Ok(StoreLocation::Embedded)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreLocation::Postgres(PostgresLocation {
                url: url.to_owned(),
                password: None,
                ca: None,
            }))
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

    /// The same store, its password's secret reference and its certificate authority given (for a
    /// PostgreSQL store only).
    pub fn with_access(self, password: Option<String>, ca: Option<PathBuf>) -> Result<StoreLocation, String> {
        match self {
            StoreLocation::Postgres(location) => Ok(StoreLocation::Postgres(PostgresLocation {
                password,
                ca,
                ..location
            })),
            StoreLocation::Embedded if password.is_none() && ca.is_none() => Ok(self),
            StoreLocation::Embedded => Err("a password and a certificate authority are for a postgres:// store".into()),
        }
    }

    /// Opens the store, migrating its schema to this release's; a PostgreSQL store's password is
    /// resolved now, with `resolver`.
    pub fn open(&self, state: &StateDir, resolver: &Resolver) -> Result<Arc<dyn Store>, DaemonError> {
        Ok(match self {
            StoreLocation::Embedded => Arc::new(SqliteStore::open(&state.store_path())?),
            StoreLocation::Postgres(location) => {
                Arc::new(PostgresStore::open_with(&location.url, &location.access(resolver)?)?)
            }
        })
    }
}

impl PostgresLocation {
    fn access(&self, resolver: &Resolver) -> Result<Access, DaemonError> {
        let password = match &self.password {
            Some(reference) => Some(resolver.resolve(reference).map_err(DaemonError::StorePassword)?),
            None => None,
        };
        let ca_pem = match &self.ca {
            Some(file) => Some(
                std::fs::read(file).map_err(|e| DaemonError::io("read the store's certificate authority", file, e))?,
            ),
            None => None,
        };
        Ok(Access {
            password: password.map(|secret| secret.expose().to_owned()),
            ca_pem,
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
            ("postgres://u@localhost/db", Some(postgres("postgres://u@localhost/db"))),
            (
                "postgresql:///db?host=/run/pg",
                Some(postgres("postgresql:///db?host=/run/pg")),
            ),
            ("mysql://localhost/db", None),
            ("sqlite:/elsewhere.db", None),
            ("/var/lib/store.db", None),
        ];
        for (url, expected) in cases {
            assert_eq!(url.parse::<StoreLocation>().ok(), expected, "{url}");
        }
    }

    fn postgres(url: &str) -> StoreLocation {
        StoreLocation::Postgres(PostgresLocation {
            url: url.into(),
            password: None,
            ca: None,
        })
    }

    #[test]
    fn only_a_postgres_store_takes_a_password_and_an_authority() {
        let given = || (Some("env:PGPASSWORD".to_owned()), Some(PathBuf::from("/ca.pem")));
        let (password, ca) = given();
        assert!(postgres("postgres://u@127.0.0.1/db").with_access(password, ca).is_ok());
        let (password, ca) = given();
        assert!(StoreLocation::Embedded.with_access(password, ca).is_err());
        assert_eq!(
            StoreLocation::Embedded.with_access(None, None),
            Ok(StoreLocation::Embedded)
        );
    }

    #[test]
    fn a_postgres_url_is_never_printed() {
        let location: StoreLocation = "postgres://u:hunter2@localhost/db".parse().unwrap();
        assert!(!format!("{location:?}").contains("hunter2"));
    }
}
