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

use conduit_store::{Mode, Store, StoreError, Tx};
use conduit_store_sql::SqlTx;
use postgres::Client;

pub mod migrations;
mod pool;
mod sql;
mod target;
#[cfg(feature = "testing")]
pub mod testing;
mod worker;

pub use target::Access;
use target::Target;

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
        PostgresStore::open_with(url, &Access::default())
    }

    /// [`PostgresStore::open`] with a password and a certificate authority given beside the URL.
    pub fn open_with(url: &str, access: &Access) -> Result<PostgresStore> {
        let target = Target::of(url, access)?;
        let mut first = worker::Conn::open(&target)?;
        first.on(|worker| migrations::migrate(&mut worker.client))?;
        Ok(PostgresStore {
            pool: pool::Pool::new(target, first),
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
        Mode::Read | Mode::ReadState => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_owned(),
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
    let ran = SqlTx::run(&mut sql, body);
    // A statement the server refused aborted the transaction, whatever the body made of it: its
    // COMMIT would roll back and answer success.
    let refused = || StoreError::Backend("a statement failed inside the transaction, which was rolled back".into());
    let ran = ran.and_then(|()| if sql.refused { Err(refused()) } else { Ok(()) });
    match ran {
        Err(e) => Err(abandon(conn, e)),
        // Ending a read transaction; rolling back is as good as committing and says so.
        Ok(()) if matches!(mode, Mode::Read | Mode::ReadState) => batch(conn, "ROLLBACK"),
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
    Target::of(url, &Access::default())?.dial()
}

/// The server's code and message for the log; never its `DETAIL`, which can quote row values.
pub(crate) fn backend(e: postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Backend(format!("postgres {}: {}", db.code().code(), db.message())),
        None => StoreError::Backend(e.to_string()),
    }
}
