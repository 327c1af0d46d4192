//! Transaction-level group commit through the redo log: many callers' write transactions, one
//! SQLite commit, answered as soon as their statements are safe in the log.
//!
//! The one write connection keeps a transaction open across callers. Each caller runs its body
//! straight in it; the statements that wrote are then appended to the redo log ([`crate::redo`]) as
//! one entry, in the order they ran. A body that fails having changed nothing leaves the
//! transaction as it was. One that fails after writing takes the transaction with it: it is rolled
//! back and the entries it held are applied again in the next, so the failure loses only its own
//! work. The members after such a failure run inside savepoints, which roll back only their own
//! work, for [`GUARDED_AFTER_A_FAILURE`] members, so a caller whose calls keep failing cannot make
//! the writer apply the others' entries again and again. (A savepoint on every member copied each
//! page it touched to its journal first: 8% of the store thread's CPU a call at 32 executions.) A caller
//! is answered once the log is on disk as far as it needs (one fsync covers every entry before it,
//! [`crate::durability`]): a state change ([`Mode::Write`]) through its own entry; anything else (a
//! read's records, [`Mode::Record`]; a refusal; a body that changed nothing; a read of state,
//! [`Writer::read_state`]) through the last state change it may have read, never waiting for
//! records, which like a read's own records need not outlast a power loss ("Durability" in
//! DESIGN.md).
//!
//! The transaction commits later: when a read on another connection asks ([`Writer::commit_held`]),
//! on the store's commit thread's round, or once its members number [`MAX_MEMBERS`] or their
//! statements pass [`MAX_HELD_BYTES`] (a transaction applying again what a failed commit lost
//! counts only its own members, so a store whose commits fail does not retry on every call). Its commit
//! marks the log applied through its last entry; pages many callers touch (an index's last leaf,
//! the events table's tail) are written to the WAL once per commit instead of once per call. A
//! commit that fails is rolled back and its entries are applied again in the next transaction.

use std::any::Any;
use std::fs::File;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;

use conduit_store::flush;
use conduit_store::{Mode, StoreError, Tx};

use crate::durability::GroupSync;
use crate::leases::KeptLeases;
use crate::prepared::{KeptStatements, WriterConnection};
use crate::redo::{RedoLog, Statements};
use crate::sql::SqliteSql;
use crate::{sqlite_error, Result};
use conduit_store_sql::SqlTx;

/// The most members one transaction takes before it commits, so a steady stream of writers still
/// reaches the database file and the redo log stays short. A commit writes each page its members
/// touched once, and many executions touch many places of the per-Work and per-execution indexes:
/// at 32 executions a commit of 256 wrote 10 KiB a call, one of up to 1,024 (with the commit
/// thread's round of 200 ms) 6 KiB.
const MAX_MEMBERS: usize = 1024;
/// The most bytes of statements a transaction holds (in memory too, to apply them again should its
/// commit fail) before it commits: about 1,000 toolbelt calls' (3 to 5 KiB each), fewer large ones.
const MAX_HELD_BYTES: usize = 4 * 1024 * 1024;
/// Members run inside savepoints after one failed having written: sixteen full transactions' worth,
/// so applying a transaction's entries again costs at most a sixteenth more work even when one
/// call in every such stretch fails.
const GUARDED_AFTER_A_FAILURE: usize = 16 * MAX_MEMBERS;

pub struct Writer {
    open: Mutex<Open>,
    /// Writers waiting for the connection: a writer whose entry one of them will follow leaves
    /// the fsync to it.
    queued: AtomicUsize,
    /// Whether the open transaction holds entries (the fast path of [`Writer::commit_held`] and
    /// [`Writer::commit_round`]).
    holding: AtomicBool,
    commits: AtomicU64,
    rollbacks: AtomicU64,
    /// Fsyncs of the redo log, shared; a ticket is an entry appended in this process.
    durability: Arc<GroupSync>,
    /// The WAL, synced before the redo log is emptied.
    wal: File,
}

/// The write connection, its open transaction, and the redo log of what that transaction holds.
struct Open {
    conn: WriterConnection,
    /// Members of the open transaction; `None` when none is open.
    members: Option<usize>,
    /// The bytes of the statements those members logged, which memory holds until the commit.
    held_bytes: usize,
    redo: RedoLog,
    /// The latest entry that changed state: what everything but a state change waits for (a
    /// read's records, a refusal, a write that changed nothing, a read of state).
    last_state: u64,
    /// A commit holding entries failed, or a member failed after writing: the next transaction
    /// applies them again.
    reapply: bool,
    /// Members still to run inside savepoints since the last one that failed after writing.
    guarded: usize,
    /// Leases read on the connection since any row they are made of changed.
    leases: KeptLeases,
    /// What the next member's statements are recorded in, kept for its room.
    statements: Statements,
}

/// How a member's body ended.
enum Ran {
    Done { changed: bool },
    Failed(StoreError),
    Panicked(Box<dyn Any + Send>),
}

impl Writer {
    pub fn new(conn: Connection, redo: RedoLog, durability: Arc<GroupSync>, wal: File) -> Result<Writer> {
        Ok(Writer {
            open: Mutex::new(Open {
                leases: KeptLeases::watching(&conn)?,
                conn: WriterConnection::keeping_statements(conn),
                members: None,
                held_bytes: 0,
                redo,
                last_state: 0,
                reapply: false,
                guarded: 0,
                statements: Statements::default(),
            }),
            queued: AtomicUsize::new(0),
            holding: AtomicBool::new(false),
            commits: AtomicU64::new(0),
            rollbacks: AtomicU64::new(0),
            durability,
            wal,
        })
    }

    /// SQLite commits made so far.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    /// Transactions rolled back whole so far, for whatever reason (their entries applied again in
    /// the next).
    pub fn rollbacks(&self) -> u64 {
        self.rollbacks.load(Ordering::SeqCst)
    }

    /// Runs `body` as one member of the open transaction, then waits as `mode` asks.
    pub fn transact(&self, mode: Mode, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        // A writer that leaves its flush to its caller leads no fsync another could share.
        let leads_its_fsync = !flush::is_deferring();
        if leads_its_fsync {
            self.queued.fetch_add(1, Ordering::SeqCst);
        }
        let mut guard = lock(&self.open);
        if leads_its_fsync {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
        let open = &mut *guard;
        let opened = open.members.is_none();
        self.begin(open)?;
        // The latest state change: what this member may read that must outlast a power loss.
        let state_through = open.last_state;
        let mut statements = std::mem::take(&mut open.statements);
        let leases = &mut open.leases;
        let guarded = open.guarded > 0;
        open.guarded = open.guarded.saturating_sub(1);
        let member = open.conn.with_statements(|conn, kept| {
            let sql = SqliteSql::recording(conn, kept, &mut statements, leases);
            if guarded {
                run_in_savepoint(conn, kept, sql, body)
            } else {
                run_in_place(conn, sql, body)
            }
        });
        let (mut ran, mut intact) = (member.ran, member.intact);
        if guarded && !matches!(ran, Ran::Done { .. }) {
            // Rolled back to its savepoint: what it changed is gone without the hook's knowing (a
            // transaction that cannot go on, a member in place that wrote, is settled below,
            // which forgets them too; one that wrote nothing undid nothing).
            open.leases.forget();
        }
        if member.failed_after_writing {
            open.guarded = GUARDED_AFTER_A_FAILURE;
        }
        let mut own_entry = None;
        if let Ran::Done { changed: true } = ran {
            match self.log(open, &statements) {
                Ok(ticket) => own_entry = Some(ticket),
                // Done but not logged: the transaction goes, and the others' entries with it are
                // applied again; this member changed nothing.
                Err(e) => (ran, intact) = (Ran::Failed(e), false),
            }
        }
        statements.clear();
        open.statements = statements;
        if let (Some(ticket), Mode::Write) = (own_entry, mode) {
            open.last_state = ticket;
        }
        let members = open.members.map_or(1, |m| m + 1);
        open.members = Some(members);
        if !intact || members >= MAX_MEMBERS || open.held_bytes > MAX_HELD_BYTES {
            self.settle(open, intact);
        } else {
            self.end_if_idle(open, opened);
        }
        drop(guard);
        let ticket = match (ran, mode) {
            (Ran::Panicked(panic), _) => resume_unwind(panic),
            (Ran::Failed(e), _) => {
                // A refusal may rest on any state change it read.
                self.durability.wait_durable(state_through)?;
                return Err(e);
            }
            (Ran::Done { .. }, Mode::Record) => state_through,
            (Ran::Done { .. }, _) => own_entry.unwrap_or(state_through),
        };
        let more_coming = || self.queued.load(Ordering::SeqCst) > 0;
        self.durability.wait_durable_unless(ticket, more_coming)
    }

    /// Runs a read inside the open transaction, so it sees every change held there without
    /// committing them ([`Mode::ReadState`]); answered (its result or its error) once the latest
    /// state change is on disk. A statement that writes is refused before it runs; should a change
    /// get past that, it goes with the open transaction, whose entries are applied again.
    pub fn read_state(&self, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let mut guard = lock(&self.open);
        let open = &mut *guard;
        let opened = open.members.is_none();
        self.begin(open)?;
        let before = open.conn.total_changes();
        let leases = &mut open.leases;
        let mut ran = open.conn.with_statements(|conn, kept| {
            let mut sql = SqliteSql::reading(conn, kept, leases);
            catch_unwind(AssertUnwindSafe(|| SqlTx::run(&mut sql, body)))
        });
        // Statements that write are refused before they run; this catches what slipped past.
        let rolled_back = open.conn.is_autocommit();
        if rolled_back || open.conn.total_changes() != before {
            self.settle(open, false);
            if let Ok(Ok(())) = ran {
                let wrote = StoreError::Backend("a read of state wrote to the store".into());
                ran = Ok(Err(if rolled_back { StoreError::RolledBack } else { wrote }));
            }
        } else {
            self.end_if_idle(open, opened);
        }
        let state_through = open.last_state;
        drop(guard);
        let read = match ran {
            Err(panic) => resume_unwind(panic),
            Ok(read) => read,
        };
        // A refusal may rest on a state change it read, too.
        self.durability.wait_durable(state_through)?;
        read
    }

    /// Ends a transaction this caller opened when it holds nothing (the caller wrote nothing), so
    /// an idle store holds no write lock between callers.
    fn end_if_idle(&self, open: &mut Open, opened: bool) {
        if opened && !self.holding.load(Ordering::SeqCst) {
            self.settle(open, true);
        }
    }

    /// Appends a member's statements to the redo log; answers the entry's durability ticket.
    fn log(&self, open: &mut Open, statements: &Statements) -> Result<u64> {
        if statements.is_empty() {
            return Err(StoreError::Backend("a change the redo log did not see".into()));
        }
        open.held_bytes += statements.len();
        open.redo
            .append(statements)
            .map_err(|e| StoreError::Wal(format!("append to the redo log: {e}")))?;
        self.holding.store(true, Ordering::SeqCst);
        Ok(self.durability.committed())
    }

    /// Commits what the open transaction holds, so a read on another connection sees every
    /// answered change; the store's commit thread's round calls it too, so nothing stays
    /// uncommitted long.
    pub fn commit_held(&self) -> Result<()> {
        if !self.holding.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut guard = lock(&self.open);
        // After a failed commit, a transaction of their own holds the entries again.
        self.begin(&mut guard)?;
        self.settle(&mut guard, true);
        if guard.reapply {
            return Err(StoreError::Backend("the store could not commit what it holds".into()));
        }
        Ok(())
    }

    /// The store's commit thread's round: commits what the open transaction holds; when nothing is
    /// held, the room taken for recording and logging statements goes back. (Read between a
    /// member's commit and the next member's entry, `holding` lets one busy round give the room
    /// back too: the next transaction takes it again.)
    pub fn commit_round(&self) -> Result<()> {
        if self.holding.load(Ordering::SeqCst) {
            return self.commit_held();
        }
        let mut open = lock(&self.open);
        open.statements = Statements::default();
        open.redo.rest();
        Ok(())
    }

    /// Opens a transaction when none is open, holding again what a failed commit lost.
    fn begin(&self, open: &mut Open) -> Result<()> {
        if open.members.is_some() {
            return Ok(());
        }
        self.durability.refuse_if_failed()?;
        if !open.conn.is_autocommit() {
            // A rollback that failed left a transaction open: end it first.
            open.conn.execute_batch("ROLLBACK").map_err(sqlite_error)?;
        }
        open.conn.execute_batch("BEGIN IMMEDIATE").map_err(sqlite_error)?;
        if open.reapply {
            if let Err(e) = open.redo.reapply(&open.conn) {
                let _ = open.conn.execute_batch("ROLLBACK");
                return Err(e);
            }
            open.reapply = false;
        }
        open.members = Some(0);
        open.held_bytes = 0;
        Ok(())
    }

    /// Commits the open transaction (rolls it back when it may not commit: a member failed after
    /// writing in it, a savepoint could not be closed, a member's entry was not logged), marking
    /// the redo log applied through its last entry; the log is emptied once long and synced.
    fn settle(&self, open: &mut Open, intact: bool) {
        if open.members.take().is_none() {
            return;
        }
        // Kept leases live as long as their transaction, committed or rolled back (a rollback does
        // not call the hook): an idle store holds none, and the next transaction reads afresh
        // what another connection may have written in between.
        open.leases.forget();
        let committed = if intact { commit(open) } else { Err(()) };
        // A COMMIT that reported an error but was made (its mark says so) is not redone.
        let made = committed.is_ok() || (intact && open.conn.is_autocommit() && open.redo.all_marked(&open.conn));
        if !made {
            let _ = open.conn.execute_batch("ROLLBACK");
            open.reapply = open.redo.holds_pending();
            self.rollbacks.fetch_add(1, Ordering::SeqCst);
            return;
        }
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.holding.store(false, Ordering::SeqCst);
        if open.redo.committed() {
            self.empty_log(open);
        }
    }

    /// Empties the redo log, once the WAL holding all it says is on disk.
    fn empty_log(&self, open: &mut Open) {
        if self.wal.sync_data().is_ok() {
            open.redo.empty();
        }
    }
}

impl Drop for Writer {
    /// Commits what the open transaction holds: a store closed cleanly leaves no log to redo.
    fn drop(&mut self) {
        let mut guard = lock(&self.open);
        self.settle(&mut guard, true);
        self.empty_log(&mut guard);
    }
}

/// Commits the open transaction, marking the redo entries it holds as applied in the same commit.
fn commit(open: &Open) -> std::result::Result<(), ()> {
    if open.redo.holds_pending() {
        open.redo.mark_applied(&open.conn).map_err(drop)?;
    }
    open.conn.execute_batch("COMMIT").map_err(drop)
}

/// A member's run: how its body ended; whether the transaction may go on (false when its changes
/// could not be taken back alone); whether it failed after writing.
struct Member {
    ran: Ran,
    intact: bool,
    failed_after_writing: bool,
}

/// Runs `body` straight in the open transaction, its statements that wrote kept in `sql`'s record.
/// A body that fails after writing leaves its changes among the others': the transaction must not
/// commit.
fn run_in_place(conn: &Connection, sql: SqliteSql<'_>, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Member {
    let (ran, failed_after_writing) = run_body(conn, sql, body);
    ended(conn, ran, !failed_after_writing, failed_after_writing)
}

/// Runs `body` inside a savepoint, its statements that wrote kept in `sql`'s record: released when
/// it succeeds, rolled back when it fails or panics. The member is not intact when the savepoint
/// could not be closed.
fn run_in_savepoint(
    conn: &Connection,
    kept: &dyn KeptStatements,
    sql: SqliteSql<'_>,
    body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>,
) -> Member {
    if let Err(e) = run_kept(kept, &["SAVEPOINT member"]) {
        return ended(conn, Ran::Failed(e), false, false);
    }
    let (ran, failed_after_writing) = run_body(conn, sql, body);
    let end: &[&str] = match ran {
        Ran::Done { .. } => &["RELEASE member"],
        _ => &["ROLLBACK TO member", "RELEASE member"],
    };
    if conn.is_autocommit() {
        return ended(conn, ran, false, failed_after_writing);
    }
    match (run_kept(kept, end), ran) {
        (Ok(()), ran) => ended(conn, ran, true, failed_after_writing),
        (Err(e), Ran::Done { .. }) => ended(conn, Ran::Failed(e), false, false),
        (Err(_), other) => ended(conn, other, false, failed_after_writing),
    }
}

/// Runs `body` on `sql`; answers how it ended and whether it failed after writing (a row changed,
/// or a statement that writes ran, even one that changed nothing).
fn run_body(conn: &Connection, mut sql: SqliteSql<'_>, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> (Ran, bool) {
    let before = conn.total_changes();
    let ran = catch_unwind(AssertUnwindSafe(|| SqlTx::run(&mut sql, body)));
    let changed = conn.total_changes() > before;
    let wrote = changed || sql.recorded_any();
    match ran {
        Ok(Ok(())) => (Ran::Done { changed }, false),
        Ok(Err(e)) => (Ran::Failed(e), wrote),
        Err(panic) => (Ran::Panicked(panic), wrote),
    }
}

/// The member as it ended; when SQLite rolled the whole transaction back under the body (a full
/// disk, say), a body that succeeded failed, and the transaction cannot go on.
fn ended(conn: &Connection, ran: Ran, intact: bool, failed_after_writing: bool) -> Member {
    if !conn.is_autocommit() {
        return Member {
            ran,
            intact,
            failed_after_writing,
        };
    }
    let ran = match ran {
        Ran::Done { .. } => Ran::Failed(StoreError::RolledBack),
        other => other,
    };
    Member {
        ran,
        intact: false,
        failed_after_writing,
    }
}

/// Runs each statement from those the connection keeps prepared: a guarded member's savepoint is opened
/// and closed on every call, and parsing it each time cost about 4% of an `emit`'s CPU.
fn run_kept(kept: &dyn KeptStatements, statements: &[&str]) -> Result<()> {
    for sql in statements {
        kept.with(sql, &mut |s| s.execute([]).map(drop).map_err(sqlite_error))?;
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a panic elsewhere; the state it guards stays consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
