//! Transaction-level group commit: many callers' write transactions, one SQLite commit.
//!
//! The one write connection keeps a transaction open while writers queue for it. Each caller runs
//! its body inside a savepoint of the open transaction, so its error rolls back only its own work;
//! the caller that finds nobody queued behind it (or fills the batch) commits everyone's at once.
//! Every member waits for the batch's commit, and a failed commit fails them all, none of whom was
//! answered yet. Pages that several members touch (an index's last leaf, the events table's tail)
//! are written to the log once per batch instead of once per call, and one fsync covers them all.
//!
//! A read's records ([`Mode::Record`]) do not wait for the commit at all while the batch holds no
//! state change: their statements go to the redo log ([`crate::redo`]) and the member is answered.
//! The batch then stays open for later members until a state change, a member that must wait, a
//! read ([`Writer::commit_held`]), the store's commit thread or a full batch commits it, so the
//! pages many reads touch are written to the log once.

use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rusqlite::Connection;

use conduit_store::{Mode, StoreError, Tx};

use crate::durability::GroupSync;
use crate::redo::{RedoLog, Statements};
use crate::sql::SqliteSql;
use crate::{sqlite_error, Result};
use conduit_store_sql::SqlTx;

/// The most members one batch takes before it commits: a steady stream of writers still gets
/// answers, and no member waits on more than this many bodies.
const MAX_MEMBERS: usize = 64;

/// What a member waits for: its batch committed (the durability ticket to wait on) or not.
type Outcome = std::result::Result<u64, String>;

pub struct Writer {
    open: Mutex<Open>,
    /// Writers waiting for the connection: while any is, an open batch stays open for them.
    queued: AtomicUsize,
    /// Whether the open batch holds records nobody waits for (answered from the redo log).
    holding: AtomicBool,
    outcomes: Mutex<Outcomes>,
    resolved: Condvar,
    durability: Arc<GroupSync>,
}

/// The write connection, the batch open on it, the latest commit that changed state, and the redo
/// log of the records the batch holds.
struct Open {
    conn: Connection,
    batch: Option<Batch>,
    last_state: u64,
    redo: RedoLog,
    /// A batch holding redo entries failed to commit: the next batch applies them again.
    reapply: bool,
}

/// A transaction open on the write connection, shared by its members.
struct Batch {
    number: u64,
    members: usize,
    /// Members whose body succeeded: each waits for the batch's outcome.
    waiters: usize,
    /// Whether a member changed a row (its commit is then one more for the log's fsync to cover).
    wrote: bool,
    /// Whether a [`Mode::Write`] member changed a row. What [`Mode::Record`] members write records
    /// reads: a record waits for the state it read to be on disk, never for other records.
    changed_state: bool,
    /// The latest commit before this batch, and the latest that changed state.
    prior: u64,
    prior_state: u64,
}

#[derive(Default)]
struct Outcomes {
    last_batch: u64,
    /// Outcomes of settled batches, with how many of their waiters have yet to read each.
    by_batch: HashMap<u64, (Outcome, usize)>,
}

/// How a member's body ended, inside its savepoint.
enum Ran {
    Done { changed: bool },
    Failed(StoreError),
    Panicked(Box<dyn Any + Send>),
}

impl Writer {
    pub fn new(conn: Connection, redo: RedoLog, durability: Arc<GroupSync>) -> Writer {
        Writer {
            open: Mutex::new(Open {
                conn,
                batch: None,
                last_state: 0,
                redo,
                reapply: false,
            }),
            queued: AtomicUsize::new(0),
            holding: AtomicBool::new(false),
            outcomes: Mutex::default(),
            resolved: Condvar::new(),
            durability,
        }
    }

    /// Runs `body` as one member of a batch, then waits as `mode` asks.
    pub fn transact(&self, mode: Mode, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let mut guard = lock(&self.open);
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let open = &mut *guard;
        let (number, prior, prior_state) = self.join(open)?;
        // What earlier members of the batch did, which this member may read.
        let earlier_changed_state = open.batch.as_ref().is_some_and(|b| b.changed_state);
        // A read's records can be answered from the redo log unless it may read a state change
        // that is not on disk yet.
        let mut redo = (mode == Mode::Record && !earlier_changed_state).then(Statements::default);
        let (ran, intact) = run_in_savepoint(&open.conn, redo.as_mut(), body);
        let answered_now = match &ran {
            Ran::Done { changed } => redo.is_some_and(|r| !*changed || self.hold(open, &r)),
            // A refusal that read no state change of the batch rests on nothing it may lose.
            Ran::Failed(_) => !earlier_changed_state,
            Ran::Panicked(_) => true,
        };
        if let Some(batch) = open.batch.as_mut() {
            batch.members += 1;
            batch.waiters += usize::from(!answered_now);
            if let Ran::Done { changed } = ran {
                batch.wrote |= changed;
                batch.changed_state |= changed && mode == Mode::Write;
            }
        }
        let full = open.batch.as_ref().is_some_and(|b| b.members >= MAX_MEMBERS);
        let waited_for = open.batch.as_ref().is_some_and(|b| b.waiters > 0);
        let idle = self.queued.load(Ordering::SeqCst) == 0;
        if !intact || full || (idle && (waited_for || !open.redo.holds_pending())) {
            self.settle(open, intact);
        }
        drop(guard);
        let refused = match ran {
            Ran::Done { .. } => None,
            Ran::Failed(e) => Some(e),
            Ran::Panicked(panic) => resume_unwind(panic),
        };
        // A record waits for what it read to be on disk, never for other records.
        let record = refused.is_none() && mode == Mode::Record && !earlier_changed_state;
        let ticket = if answered_now {
            if record {
                prior_state
            } else {
                prior
            }
        } else {
            // A failed commit fails every member that waits: even a refusal may rest on what the
            // batch lost.
            let committed = self.outcome(number).map_err(StoreError::Backend)?;
            if record {
                prior_state
            } else {
                committed
            }
        };
        self.durability.wait_durable(ticket)?;
        refused.map_or(Ok(()), Err)
    }

    /// Puts a member's records in the redo log; answers false when the log cannot take them (the
    /// member then waits for the commit like any other).
    fn hold(&self, open: &mut Open, statements: &Statements) -> bool {
        let held = !statements.is_empty() && open.redo.append(statements).is_ok();
        if held {
            self.holding.store(true, Ordering::SeqCst);
        }
        held
    }

    /// Commits the records the open batch holds for nobody, so a read on another connection sees
    /// them; the store's commit thread calls it too, so none stays uncommitted for long.
    pub fn commit_held(&self) -> Result<()> {
        if !self.holding.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut guard = lock(&self.open);
        if guard.batch.is_none() && guard.reapply {
            // A failed commit lost them: a batch of their own holds them again.
            self.join(&mut guard)?;
        }
        self.settle(&mut guard, true);
        if guard.reapply {
            return Err(StoreError::Backend("the store's commit of held records failed".into()));
        }
        Ok(())
    }

    /// Opens a batch when none is open; answers the open batch's number and its prior commits.
    fn join(&self, open: &mut Open) -> Result<(u64, u64, u64)> {
        if let Some(batch) = open.batch.as_ref() {
            return Ok((batch.number, batch.prior, batch.prior_state));
        }
        self.durability.refuse_if_failed()?;
        if !open.conn.is_autocommit() {
            // A rollback that failed left a transaction open: end it before the next batch.
            open.conn.execute_batch("ROLLBACK").map_err(sqlite_error)?;
        }
        open.conn.execute_batch("BEGIN IMMEDIATE").map_err(sqlite_error)?;
        if open.reapply {
            // The records a failed commit lost were answered: this batch holds them again.
            if let Err(e) = open.redo.reapply(&open.conn) {
                let _ = open.conn.execute_batch("ROLLBACK");
                return Err(e);
            }
            open.reapply = false;
        }
        let number = {
            let mut outcomes = lock(&self.outcomes);
            outcomes.last_batch += 1;
            outcomes.last_batch
        };
        let (prior, prior_state) = (self.durability.latest(), open.last_state);
        open.batch = Some(Batch {
            number,
            members: 0,
            waiters: 0,
            wrote: open.redo.holds_pending(),
            changed_state: false,
            prior,
            prior_state,
        });
        Ok((number, prior, prior_state))
    }

    /// Commits the open batch (rolls it back when a savepoint could not be closed) and publishes
    /// its outcome, the commit's durability ticket, to its waiters.
    fn settle(&self, open: &mut Open, intact: bool) {
        let Some(batch) = open.batch.take() else { return };
        let committed = if intact {
            commit(open)
        } else {
            Err("a savepoint of the batch could not be closed".to_owned())
        };
        let outcome = match committed {
            Ok(()) if batch.wrote => Ok(self.durability.committed()),
            // A batch that changed nothing may still have read commits not yet on disk.
            Ok(()) => Ok(batch.prior),
            Err(e) => {
                let _ = open.conn.execute_batch("ROLLBACK");
                open.reapply = open.redo.holds_pending();
                Err(e)
            }
        };
        if outcome.is_ok() {
            self.holding.store(false, Ordering::SeqCst);
            if open.redo.committed() {
                self.empty_redo_log(open, &outcome);
            }
        }
        if let (Ok(ticket), true) = (&outcome, batch.changed_state) {
            open.last_state = *ticket;
        }
        if batch.waiters > 0 {
            lock(&self.outcomes)
                .by_batch
                .insert(batch.number, (outcome, batch.waiters));
            self.resolved.notify_all();
        }
    }

    /// Empties a long redo log once the commit that marked all of it applied is on disk.
    fn empty_redo_log(&self, open: &mut Open, outcome: &Outcome) {
        if let Ok(ticket) = outcome {
            if self.durability.wait_durable(*ticket).is_ok() {
                open.redo.empty();
            }
        }
    }

    /// Waits for `batch`'s outcome.
    fn outcome(&self, batch: u64) -> Outcome {
        let mut outcomes = lock(&self.outcomes);
        loop {
            if let Some((outcome, unread)) = outcomes.by_batch.get_mut(&batch) {
                let outcome = outcome.clone();
                *unread -= 1;
                if *unread == 0 {
                    outcomes.by_batch.remove(&batch);
                }
                return outcome;
            }
            outcomes = self.resolved.wait(outcomes).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Writer {
    /// Commits what the open batch holds: a store closed cleanly leaves nothing to redo.
    fn drop(&mut self) {
        let mut guard = lock(&self.open);
        self.settle(&mut guard, true);
    }
}

/// Commits the open batch, marking the redo entries it holds as applied in the same commit.
fn commit(open: &Open) -> std::result::Result<(), String> {
    if open.redo.holds_pending() {
        open.redo.mark_applied(&open.conn).map_err(|e| e.to_string())?;
    }
    open.conn.execute_batch("COMMIT").map_err(|e| e.to_string())
}

/// Runs `body` inside a savepoint: released when it succeeds, rolled back when it fails or panics.
/// With `redo`, the statements that wrote are kept there. The second value is false when the
/// savepoint could not be closed: the batch must not commit.
fn run_in_savepoint(
    conn: &Connection,
    redo: Option<&mut Statements>,
    body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>,
) -> (Ran, bool) {
    if let Err(e) = conn.execute_batch("SAVEPOINT member") {
        return (Ran::Failed(sqlite_error(e)), false);
    }
    let before = conn.total_changes();
    let mut sql = match redo {
        Some(redo) => SqliteSql::recording(conn, redo),
        None => SqliteSql::new(conn),
    };
    let ran = match catch_unwind(AssertUnwindSafe(|| body(&mut SqlTx::new(&mut sql)))) {
        Ok(Ok(())) => Ran::Done {
            changed: conn.total_changes() > before,
        },
        Ok(Err(e)) => Ran::Failed(e),
        Err(panic) => Ran::Panicked(panic),
    };
    let end = match ran {
        Ran::Done { .. } => "RELEASE member",
        _ => "ROLLBACK TO member; RELEASE member",
    };
    match conn.execute_batch(end) {
        Ok(()) => (ran, true),
        Err(e) => match ran {
            Ran::Done { .. } => (Ran::Failed(sqlite_error(e)), false),
            other => (other, false),
        },
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a panic elsewhere; the batch state it guards stays consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
