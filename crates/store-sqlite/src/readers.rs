//! Read transactions, on connections of their own.
//!
//! The write connection keeps a batch open between commits ([`crate::batch`]), so a read there
//! would see changes nobody has been answered about yet. Reads run on separate connections instead:
//! each sees the last commit (WAL readers never block the writer, nor it them), and they run in
//! parallel with the batch being written.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags};

use conduit_store::Tx;

use crate::sql::SqliteSql;
use crate::{configure, sqlite_error, Result};
use conduit_store_sql::SqlTx;

/// Idle read connections kept for reuse; more are opened when more reads run at once.
const KEEP_IDLE: usize = 8;

pub struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub fn new(path: &Path) -> Readers {
        Readers {
            path: path.to_owned(),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `body` in one read transaction: every statement sees the same commit.
    pub fn transact(&self, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let mut conn = match self.take() {
            Some(conn) => conn,
            None => self.open()?,
        };
        let result = read_in(&mut conn, body);
        self.put_back(conn);
        result
    }

    fn open(&self) -> Result<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(sqlite_error)?;
        configure(&conn)?;
        conn.pragma_update(None, "query_only", true).map_err(sqlite_error)?;
        conn.pragma_update(None, "temp_store", "MEMORY").map_err(sqlite_error)?;
        Ok(conn)
    }

    fn take(&self) -> Option<Connection> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn put_back(&self, conn: Connection) {
        if !conn.is_autocommit() {
            // A read transaction that could not be ended: the connection goes, not back to the pool.
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < KEEP_IDLE {
            idle.push(conn);
        }
    }
}

fn read_in(conn: &mut Connection, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
    let tx = conn.transaction().map_err(sqlite_error)?;
    SqlTx::run(&mut SqliteSql::new(&tx), body)?;
    // Ending a read transaction; rolling back is as good as committing and says so.
    tx.rollback().map_err(sqlite_error)
}
