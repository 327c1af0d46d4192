//! The embedded store: [`conduit_store::Tx`] on one SQLite file (WAL, `synchronous=NORMAL` with a
//! shared fsync before every acknowledged commit, one writer). Only the daemon and tests link it.

#![forbid(unsafe_code)]

mod durability;
mod migrations;
mod rows;

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use conduit_store::{Store, StoreError, Tx};

type Result<T> = std::result::Result<T, StoreError>;

/// SQLite's own error, kept as text for the daemon's log.
fn sqlite_error(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// A SQLite file in WAL mode with durable commits. One connection serves every transaction, so there
/// is exactly one writer; async callers reach it through `spawn_blocking`. A write is acknowledged
/// only once it is on disk, with concurrent commits sharing one fsync ([`durability`]).
pub struct SqliteStore {
    conn: Mutex<Connection>,
    durability: durability::GroupSync,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` and applies pending migrations.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        create_owner_only(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags).map_err(sqlite_error)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sqlite_error)?;
        // Commits do not fsync; `transact` waits for a (shared) fsync of the WAL before it returns.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sqlite_error)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sqlite_error)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sqlite_error)?;
        // Every statement the store runs stays prepared.
        conn.set_prepared_statement_cache_capacity(128);
        migrations::migrate(&mut conn)?;
        let wal_path = format!("{}-wal", path.display());
        let wal = OpenOptions::new()
            .read(true)
            .open(&wal_path)
            .map_err(|e| StoreError::Wal(e.to_string()))?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            durability: durability::GroupSync::new(wal),
        })
    }
}

/// Creates the database file owner-only (0600) when it does not exist yet: SQLite gives the `-wal`
/// and `-shm` files it creates the database file's mode, so all three stay private.
fn create_owner_only(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map(drop)
        .map_err(|e| StoreError::Backend(format!("create {}: {e}", path.display())))
}

thread_local! {
    /// Whether this thread is inside a transaction: a nested one would wait on the connection this
    /// thread already holds, forever.
    static IN_TRANSACTION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the thread as inside a transaction until dropped.
struct InTransaction;

impl InTransaction {
    fn enter() -> Result<InTransaction> {
        if IN_TRANSACTION.with(|t| t.replace(true)) {
            return Err(StoreError::Reentrant);
        }
        Ok(InTransaction)
    }
}

impl Drop for InTransaction {
    fn drop(&mut self) {
        IN_TRANSACTION.with(|t| t.set(false));
    }
}

impl Store for SqliteStore {
    fn transact(&self, write: bool, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let inside = InTransaction::enter()?;
        // A poisoned lock means a panic mid-transaction; the transaction was rolled back on drop.
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let behavior = if write {
            TransactionBehavior::Immediate
        } else {
            TransactionBehavior::Deferred
        };
        let changes_before = conn.total_changes();
        let tx = conn.transaction_with_behavior(behavior).map_err(sqlite_error)?;
        let mut handle = rows::SqliteTx { tx: &tx };
        body(&mut handle)?;
        tx.commit().map_err(sqlite_error)?;
        if !write {
            return Ok(());
        }
        // A write transaction that changed no row (a replayed answer, say) needs no fsync of its own,
        // but what it read must be on disk before it is acknowledged: it waits for the latest commit.
        let ticket = if conn.total_changes() == changes_before {
            self.durability.latest()
        } else {
            self.durability.committed()
        };
        drop(conn);
        drop(inside);
        self.durability
            .wait_durable(ticket)
            .map_err(|e| StoreError::Wal(e.to_string()))
    }
}
