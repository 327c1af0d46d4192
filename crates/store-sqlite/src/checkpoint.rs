//! WAL checkpoints off the call path.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its threshold, so one call in a
//! few hundred paid for copying the log into the database and two fsyncs (the toolbelt's p99). A
//! thread of the store's own runs passive checkpoints instead, on a connection of its own: they
//! never block the writer or a reader. The writer keeps an automatic checkpoint at a far higher
//! threshold, only so the log stays bounded if this thread falls behind.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::periodic::Periodic;
use crate::{configure, sqlite_error, Result};

/// How often the log is checkpointed.
const EVERY: Duration = Duration::from_millis(250);
/// Pages in the log past which the writer checkpoints by itself (SQLite's default is 1,000).
pub const WRITER_FALLBACK_PAGES: i64 = 20_000;

/// Checkpoints the store's log every [`EVERY`] until dropped.
pub fn start(path: &Path) -> Result<Periodic> {
    // Never creates the file: the store made it owner-only.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(sqlite_error)?;
    configure(&conn)?;
    Periodic::start("store-checkpt", EVERY, move || {
        // A checkpoint that cannot finish now (a reader on an older snapshot) finishes on a later
        // round; its error changes nothing the store answers.
        let _ = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)");
    })
}
