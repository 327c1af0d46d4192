//! The write connection, with the statements it ran each prepared once and kept beside it.
//!
//! rusqlite's statement cache (`prepare_cached`) takes a statement out of an LRU list and puts it
//! back on every run: a new copy of its text for a key and three hashes of that text. On the store
//! thread that was about 1,400 instructions a statement, 9 to 10 statements a toolbelt call
//! (callgrind, `--bench toolbelt`). Here a statement is found by one hash of its text and stays
//! where it is; its arguments are let go after each run, as rusqlite's cache does, so no statement
//! holds a call's texts (an event's data, a configuration) until its next run.
//!
//! A rusqlite `Statement` borrows its `Connection`, so the two live in one value
//! ([`WriterConnection`], a `self_cell`). What `SqliteSql` and the savepoints run is kept (the
//! transaction's own `BEGIN` and `COMMIT`, and the redo log's statements, run as before); should a
//! daemon's writer ever run more than [`MOST_KEPT`] different texts, the rest go through rusqlite's
//! cache.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Deref;

use rusqlite::{Connection, PrepFlags, Statement};

use crate::{sqlite_error, Result};

/// The most statements kept: the writer runs a few dozen different texts (a list's filters make
/// a few more); past this, texts built on the fly cannot grow the map without bound.
const MOST_KEPT: usize = 256;

/// Runs a statement of the write connection's. A trait so that callers need not name
/// [`Prepared`]'s lifetime, which is the connection's inside the cell.
pub trait KeptStatements {
    /// Runs `f` on the prepared statement for `sql`.
    fn with(&self, sql: &str, f: &mut dyn FnMut(&mut Statement<'_>) -> Result<()>) -> Result<()>;
}

/// The statements prepared on one connection, by their text.
pub struct Prepared<'c> {
    conn: &'c Connection,
    kept: RefCell<HashMap<Box<str>, Statement<'c>, foldhash::fast::RandomState>>,
}

impl KeptStatements for Prepared<'_> {
    fn with(&self, sql: &str, f: &mut dyn FnMut(&mut Statement<'_>) -> Result<()>) -> Result<()> {
        // Held while `f` runs: `f` reads a statement's rows before another statement runs (a
        // nested `with` would panic, not share the map).
        let mut kept = self.kept.borrow_mut();
        if let Some(statement) = kept.get_mut(sql) {
            return run_and_let_go(statement, f);
        }
        if kept.len() >= MOST_KEPT {
            drop(kept);
            let mut cached = self.conn.prepare_cached(sql).map_err(sqlite_error)?;
            return f(&mut cached);
        }
        // Kept for good: off SQLite's lookaside memory, which the steps' own allocations need
        // (prepared without the hint, the statements took it and each step cost 8% more).
        let statement = self
            .conn
            .prepare_with_flags(sql, PrepFlags::SQLITE_PREPARE_PERSISTENT)
            .map_err(sqlite_error)?;
        run_and_let_go(kept.entry(sql.into()).or_insert(statement), f)
    }
}

/// Runs `f` on `statement`, then lets go of the arguments it bound, even should `f` panic.
fn run_and_let_go(statement: &mut Statement<'_>, f: &mut dyn FnMut(&mut Statement<'_>) -> Result<()>) -> Result<()> {
    let bound = LetGo(statement);
    f(bound.0)
}

/// Clears a statement's arguments when dropped.
struct LetGo<'s, 'c>(&'s mut Statement<'c>);

impl Drop for LetGo<'_, '_> {
    fn drop(&mut self) {
        self.0.clear_bindings();
    }
}

self_cell::self_cell!(
    /// The write connection and the statements prepared on it.
    pub struct WriterConnection {
        owner: Connection,
        #[not_covariant]
        dependent: Prepared,
    }
);

// SAFETY: a `WriterConnection` moves its connection and every statement prepared on it together:
// the statements borrow no other connection, and nothing outside holds one of them. A statement is
// not `Send` because it borrows a `Connection` (not `Sync`) and holds a raw `sqlite3_stmt`
// pointer; one value that owns both is used by one thread at a time (the writer's mutex). The
// connection is opened `SQLITE_OPEN_NO_MUTEX` (`lib.rs`), SQLite's multi-thread mode, in which a
// connection and its statements may be used from any thread, one at a time. rusqlite makes the
// same argument for its `Connection`, whose statement cache holds the same raw statements
// (`unsafe impl Send for StatementCache`).
#[allow(
    unsafe_code,
    reason = "a statement borrows its connection; the two move between threads together"
)]
unsafe impl Send for WriterConnection {}

impl WriterConnection {
    /// `conn`, keeping the statements run on it from now on.
    pub fn keeping_statements(conn: Connection) -> WriterConnection {
        WriterConnection::new(conn, |conn| Prepared {
            conn,
            kept: RefCell::default(),
        })
    }

    /// Runs `f` with the connection and its kept statements.
    pub fn with_statements<R>(&self, f: impl FnOnce(&Connection, &dyn KeptStatements) -> R) -> R {
        self.with_dependent(|conn, prepared| f(conn, prepared))
    }
}

impl Deref for WriterConnection {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.borrow_owner()
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::StatementStatus;

    use super::*;

    fn writer() -> WriterConnection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER)").unwrap();
        WriterConnection::keeping_statements(conn)
    }

    fn insert(writer: &WriterConnection, n: i64) {
        writer.with_statements(|_, statements| {
            statements
                .with("INSERT INTO t (n) VALUES (?1)", &mut |s| {
                    s.execute([n]).map(drop).map_err(sqlite_error)
                })
                .unwrap();
        });
    }

    /// A statement is prepared once and run again from where it is kept, on whichever thread holds
    /// the connection.
    #[test]
    fn a_statement_is_prepared_once_and_kept_across_threads() {
        let writer = writer();
        insert(&writer, 1);
        let writer = std::thread::spawn(move || {
            insert(&writer, 2);
            writer
        })
        .join()
        .unwrap();
        let runs = writer.with_dependent(|_, prepared| {
            let kept = prepared.kept.borrow();
            assert_eq!(kept.len(), 1);
            kept.values().map(|s| s.get_status(StatementStatus::Run)).sum::<i32>()
        });
        assert_eq!(runs, 2, "one statement ran both inserts");
        let count: i64 = writer.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(count, 2);
    }

    /// A kept statement holds no argument of its last run: a call's texts are not kept with it.
    #[test]
    fn a_kept_statement_lets_go_of_its_arguments() {
        let writer = writer();
        writer.with_statements(|_, statements| {
            statements
                .with("SELECT ?1", &mut |s| {
                    s.query_row(["a call's text"], |r| r.get::<_, String>(0))
                        .map(drop)
                        .map_err(sqlite_error)
                })
                .unwrap();
        });
        // A run that panicked after binding lets go too.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            writer.with_statements(|_, statements| {
                let _ = statements.with("SELECT ?1", &mut |s| {
                    s.raw_bind_parameter(1, "a panicking call's text")
                        .map_err(sqlite_error)?;
                    panic!("the call's body panicked");
                });
            });
        }));
        assert!(panicked.is_err());
        let bound = writer.with_dependent(|_, prepared| {
            let mut kept = prepared.kept.borrow_mut();
            // Run as bound now, with no argument given.
            let mut rows = kept.get_mut("SELECT ?1").unwrap().raw_query();
            rows.next().unwrap().unwrap().get::<_, Option<String>>(0).unwrap()
        });
        assert_eq!(bound, None);
    }

    /// Past [`MOST_KEPT`] texts, a statement still runs, through rusqlite's cache, and the map
    /// stops growing.
    #[test]
    fn texts_past_the_most_kept_run_without_being_kept() {
        let writer = writer();
        for n in 0..MOST_KEPT as i64 + 10 {
            writer.with_statements(|_, statements| {
                let sql = format!("INSERT INTO t (n) VALUES ({n})");
                statements
                    .with(&sql, &mut |s| s.execute([]).map(drop).map_err(sqlite_error))
                    .unwrap();
            });
        }
        let kept = writer.with_dependent(|_, prepared| prepared.kept.borrow().len());
        assert_eq!(kept, MOST_KEPT);
        let count: i64 = writer.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(count, MOST_KEPT as i64 + 10);
    }
}
