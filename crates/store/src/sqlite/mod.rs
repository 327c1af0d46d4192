//! The embedded SQLite store.

mod migrations;
mod rows;

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::tx::{Result, Store, Tx};
use crate::StoreError;

/// A SQLite file in WAL mode with durable commits. One connection serves every transaction, so there
/// is exactly one writer; async callers reach it through `spawn_blocking`.
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` and applies pending migrations.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags)?;
        // WAL with synchronous=FULL fsyncs the log at every commit: an acknowledged write survives a crash.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        migrations::migrate(&mut conn)?;
        Ok(SqliteStore { conn: Mutex::new(conn) })
    }
}

impl Store for SqliteStore {
    fn transact(&self, write: bool, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        // A poisoned lock means a panic mid-transaction; the transaction was rolled back on drop.
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let behavior = if write {
            TransactionBehavior::Immediate
        } else {
            TransactionBehavior::Deferred
        };
        let tx = conn.transaction_with_behavior(behavior)?;
        let mut handle = rows::SqliteTx { tx: &tx };
        match body(&mut handle) {
            Ok(()) => tx.commit().map_err(StoreError::from),
            Err(e) => Err(e),
        }
    }
}
