//! The shared store: conduit-store's `Tx` vocabulary on PostgreSQL, so several daemons can share
//! one Work queue, configuration, audit trail and set of operators (issue 18).
//!
//! The statements are `conduit-store-sql`'s, the same ones SQLite runs. Writers take one advisory
//! transaction lock, so the writes of every daemon on the database are serialized as SQLite's one
//! writer serializes them (each then reads everything committed before it); reads run in a
//! read-only repeatable-read snapshot and take no lock.
//!
//! Architecture invariants: nothing here relies on a process-local lock for correctness (another
//! daemon is always a possible writer); a backend error's text goes only into
//! [`StoreError::Backend`], for the log.
#![forbid(unsafe_code)]

use std::str::FromStr;

use conduit_store::{Mode, Store, StoreError, Tx};
use conduit_store_sql::SqlTx;
use postgres::config::Host;
use postgres::{Client, Config, NoTls};

pub mod migrations;
mod pool;
mod sql;
#[cfg(feature = "testing")]
pub mod testing;
mod worker;

pub type Result<T> = std::result::Result<T, StoreError>;

/// The advisory lock key every writer takes for its transaction (`'oc-write'` as bytes).
const WRITE_LOCK: i64 = 0x6f63_2d77_7269_7465;

/// A PostgreSQL store, its schema migrated to this release's version.
pub struct PostgresStore {
    pool: pool::Pool,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://…`, `postgresql://…` or PostgreSQL's `key=value` form) and
    /// applies pending migrations.
    pub fn open(url: &str) -> Result<PostgresStore> {
        let config = parse(url)?;
        let mut first = worker::Conn::open(&config)?;
        first.on(|worker| migrations::migrate(&mut worker.client))?;
        Ok(PostgresStore {
            pool: pool::Pool::new(config, first),
        })
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> Result<i64> {
        self.pool
            .with(|conn| conn.on(|worker| migrations::version(&mut worker.client)))
    }
}

impl Store for PostgresStore {
    fn transact(&self, mode: Mode, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let _inside = conduit_store::InTransaction::enter()?;
        self.pool.with(|conn| run(conn, mode, body))
    }
}

/// One transaction of `mode` on `conn`: committed when `body` succeeds, rolled back otherwise.
fn run(conn: &mut worker::Conn, mode: Mode, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
    let begin = match mode {
        Mode::Read => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_owned(),
        // Every writer takes the lock first, so each sees every write committed before it.
        // Read committed whatever the server's default: each statement then sees what the lock's
        // previous holder committed, where a snapshot taken before the lock was granted would not.
        Mode::Write => format!("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK})"),
        // A read's record is committed before the answer but need not wait for the flush
        // ("Durability" in DESIGN.md): the server keeps it through the daemon's crash.
        Mode::Record => format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK}); \
             SET LOCAL synchronous_commit = off"
        ),
    };
    if let Err(e) = batch(conn, begin) {
        return Err(abandon(conn, e));
    }
    let mut sql = sql::PgSql::new(conn);
    let ran = body(&mut SqlTx::new(&mut sql));
    // A statement the server refused aborted the transaction, whatever the body made of it: its
    // COMMIT would roll back and answer success.
    let refused = || StoreError::Backend("a statement failed inside the transaction, which was rolled back".into());
    let ran = ran.and_then(|()| if sql.refused { Err(refused()) } else { Ok(()) });
    match ran {
        Err(e) => Err(abandon(conn, e)),
        // Ending a read transaction; rolling back is as good as committing and says so.
        Ok(()) if mode == Mode::Read => batch(conn, "ROLLBACK"),
        Ok(()) => batch(conn, "COMMIT"),
    }
}

/// Rolls back after `e`, answering it; a connection that cannot roll back is not used again.
fn abandon(conn: &mut worker::Conn, e: StoreError) -> StoreError {
    if batch(conn, "ROLLBACK").is_err() {
        conn.broken = true;
    }
    e
}

fn batch(conn: &mut worker::Conn, statements: impl Into<String>) -> Result<()> {
    let statements = statements.into();
    conn.on(move |worker| worker.client.batch_execute(&statements).map_err(backend))
}

/// A client for `url`, for migrations and tests.
pub fn connect(url: &str) -> Result<Client> {
    dial(&parse(url)?)
}

fn parse(url: &str) -> Result<Config> {
    Config::from_str(url).map_err(|_| StoreError::Backend("the PostgreSQL URL does not parse".into()))
}

/// A client for `config`. Until TLS is supported, only a Unix socket or a loopback address is
/// dialled: a password or the store's digests never cross a network in the clear.
fn dial(config: &Config) -> Result<Client> {
    if !is_local(config) {
        return Err(StoreError::Backend(
            "the PostgreSQL URL names a host that is not this machine; without TLS only a Unix socket or a \
             loopback address (127.0.0.1 or [::1]) is used"
                .into(),
        ));
    }
    config.connect(NoTls).map_err(backend)
}

/// Whether every host and host address `config` may dial is a Unix socket or loopback.
fn is_local(config: &Config) -> bool {
    let host_is_local = |host: &Host| match host {
        Host::Unix(_) => true,
        // An address, not a name: a resolver could send even `localhost` elsewhere.
        Host::Tcp(name) => name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()),
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
            ("postgres://u@localhost/db", false),
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
