//! Transaction-level group commit: many callers' write transactions, one SQLite commit.
//!
//! The one write connection keeps a transaction open while writers queue for it. Each caller runs
//! its body inside a savepoint of the open transaction, so its error rolls back only its own work;
//! the caller that finds nobody queued behind it (or fills the batch) commits everyone's at once.
//! Every member waits for the batch's commit, and a failed commit fails them all, none of whom was
//! answered yet. Pages that several members touch (an index's last leaf, the events table's tail)
//! are written to the log once per batch instead of once per call, and one fsync covers them all.

use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rusqlite::Connection;

use conduit_store::{Mode, StoreError, Tx};

use crate::durability::GroupSync;
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
    outcomes: Mutex<Outcomes>,
    resolved: Condvar,
    durability: Arc<GroupSync>,
}

/// The write connection, the batch open on it, and the latest commit that changed state.
struct Open {
    conn: Connection,
    batch: Option<Batch>,
    last_state: u64,
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
    pub fn new(conn: Connection, durability: Arc<GroupSync>) -> Writer {
        Writer {
            open: Mutex::new(Open {
                conn,
                batch: None,
                last_state: 0,
            }),
            queued: AtomicUsize::new(0),
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
        let (ran, intact) = run_in_savepoint(&open.conn, body);
        // What earlier members of the batch did, which this member may have read.
        let (earlier_wrote, earlier_changed_state) = open
            .batch
            .as_ref()
            .map_or((false, false), |b| (b.wrote, b.changed_state));
        if let Some(batch) = open.batch.as_mut() {
            batch.members += 1;
            match ran {
                Ran::Done { changed } => {
                    batch.waiters += 1;
                    batch.wrote |= changed;
                    batch.changed_state |= changed && mode == Mode::Write;
                }
                Ran::Failed(_) => batch.waiters += 1,
                Ran::Panicked(_) => {}
            }
        }
        let full = open.batch.as_ref().is_some_and(|b| b.members >= MAX_MEMBERS);
        if !intact || full || self.queued.load(Ordering::SeqCst) == 0 {
            self.settle(open, intact);
        }
        drop(guard);
        let refused = match ran {
            Ran::Done { .. } => None,
            Ran::Failed(e) => Some(e),
            Ran::Panicked(panic) => resume_unwind(panic),
        };
        // A failed commit fails every member: even a refusal may rest on what the batch lost.
        let committed = self.outcome(number).map_err(StoreError::Backend)?;
        let ticket = match (&refused, mode) {
            (Some(_), _) if !earlier_wrote => prior,
            (None, Mode::Record) if !earlier_changed_state => prior_state,
            _ => committed,
        };
        self.durability.wait_durable(ticket)?;
        refused.map_or(Ok(()), Err)
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
            wrote: false,
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
            open.conn.execute_batch("COMMIT").map_err(|e| e.to_string())
        } else {
            Err("a savepoint of the batch could not be closed".to_owned())
        };
        let outcome = match committed {
            Ok(()) if batch.wrote => Ok(self.durability.committed()),
            // A batch that changed nothing may still have read commits not yet on disk.
            Ok(()) => Ok(batch.prior),
            Err(e) => {
                let _ = open.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        };
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

/// Runs `body` inside a savepoint: released when it succeeds, rolled back when it fails or panics.
/// The second value is false when the savepoint could not be closed: the batch must not commit.
fn run_in_savepoint(conn: &Connection, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> (Ran, bool) {
    if let Err(e) = conn.execute_batch("SAVEPOINT member") {
        return (Ran::Failed(sqlite_error(e)), false);
    }
    let before = conn.total_changes();
    let ran = match catch_unwind(AssertUnwindSafe(|| body(&mut SqlTx::new(&mut SqliteSql(conn))))) {
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
