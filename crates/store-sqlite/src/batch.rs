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
use std::sync::{Condvar, Mutex, MutexGuard};

use rusqlite::Connection;

use conduit_store::{Mode, StoreError, Tx};

use crate::durability::GroupSync;
use crate::rows::SqliteTx;
use crate::{sqlite_error, Result};

/// The most members one batch takes before it commits, so a steady stream of writers still gets
/// answers and the log is checkpointed.
const MAX_MEMBERS: usize = 256;

/// What a member waits for: its batch committed (the durability ticket to wait on) or not.
type Outcome = std::result::Result<u64, String>;

pub struct Writer {
    open: Mutex<Open>,
    /// Writers waiting for the connection: while any is, an open batch stays open for them.
    queued: AtomicUsize,
    outcomes: Mutex<Outcomes>,
    resolved: Condvar,
    durability: GroupSync,
}

/// The write connection and the batch open on it.
struct Open {
    conn: Connection,
    batch: Option<Batch>,
}

/// A transaction open on the write connection, shared by its members.
struct Batch {
    number: u64,
    members: usize,
    /// Members whose body succeeded: each waits for the batch's outcome.
    waiters: usize,
    /// Whether a [`Mode::Write`] member changed state: the commit then needs an fsync of its own.
    /// (What [`Mode::Record`] members write only records reads: nobody waits for it to reach disk.)
    changed: bool,
    /// The latest state-changing commit before this batch: what its members may have read.
    prior: u64,
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
    pub fn new(conn: Connection, durability: GroupSync) -> Writer {
        Writer {
            open: Mutex::new(Open { conn, batch: None }),
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
        let Open { conn, batch } = &mut *guard;
        let (number, prior) = self.join(conn, batch)?;
        let (ran, intact) = run_in_savepoint(conn, body);
        // Whether what this member read includes state that earlier members changed.
        let read_batch_changes = batch.as_ref().is_some_and(|b| b.changed);
        if let Some(open) = batch.as_mut() {
            open.members += 1;
            if let Ran::Done { changed } = ran {
                open.waiters += 1;
                open.changed |= changed && mode == Mode::Write;
            }
        }
        let full = batch.as_ref().is_some_and(|b| b.members >= MAX_MEMBERS);
        if !intact || full || self.queued.load(Ordering::SeqCst) == 0 {
            self.settle(conn, batch, intact);
        }
        drop(guard);
        match ran {
            Ran::Done { .. } => {}
            Ran::Failed(e) => return Err(e),
            Ran::Panicked(panic) => resume_unwind(panic),
        }
        let committed = self.outcome(number).map_err(StoreError::Backend)?;
        // A record waits only for what it read; everything else for its own commit too.
        let ticket = if mode == Mode::Record && !read_batch_changes {
            prior
        } else {
            committed
        };
        self.durability
            .wait_durable(ticket)
            .map_err(|e| StoreError::Wal(e.to_string()))
    }

    /// Opens a batch when none is open; answers the open batch's number and its prior commit.
    fn join(&self, conn: &Connection, batch: &mut Option<Batch>) -> Result<(u64, u64)> {
        if let Some(open) = batch.as_ref() {
            return Ok((open.number, open.prior));
        }
        conn.execute_batch("BEGIN IMMEDIATE").map_err(sqlite_error)?;
        let number = {
            let mut outcomes = lock(&self.outcomes);
            outcomes.last_batch += 1;
            outcomes.last_batch
        };
        let prior = self.durability.latest();
        *batch = Some(Batch {
            number,
            members: 0,
            waiters: 0,
            changed: false,
            prior,
        });
        Ok((number, prior))
    }

    /// Commits the open batch (rolls it back when a savepoint could not be closed) and publishes
    /// its outcome to its waiters.
    fn settle(&self, conn: &Connection, batch: &mut Option<Batch>, intact: bool) {
        let Some(open) = batch.take() else { return };
        let committed = if intact {
            conn.execute_batch("COMMIT").map_err(|e| e.to_string())
        } else {
            Err("a savepoint of the batch could not be closed".to_owned())
        };
        let outcome = match committed {
            Ok(()) if open.changed => Ok(self.durability.committed()),
            // A batch that changed nothing may still have read commits not yet on disk.
            Ok(()) => Ok(open.prior),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
        };
        if open.waiters > 0 {
            lock(&self.outcomes)
                .by_batch
                .insert(open.number, (outcome, open.waiters));
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
    let ran = match catch_unwind(AssertUnwindSafe(|| body(&mut SqliteTx { tx: conn }))) {
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
