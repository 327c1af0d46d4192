//! Group fsync: many entries of the redo log, one fsync.
//!
//! Before a write is acknowledged, its caller waits until an fsync of the redo log that started
//! after its entry was appended has finished. Callers whose entries were appended while one fsync
//! runs share the next one: the first to find no fsync running leads it, the rest wait for its
//! result. The log is emptied only once the WAL holding all of it is synced, so what the fsync
//! covers stays covered.

use std::fs::File;

use conduit_store::flush::{self, Flusher};
use conduit_store::StoreError;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a writer leaves its fsync to one about to append before it leads one itself.
const LEAVE_AT_MOST: Duration = Duration::from_millis(1);

#[derive(Default)]
struct Progress {
    /// Entries appended, in order.
    committed: u64,
    /// Entries known to be on disk.
    synced: u64,
    /// Whether a caller is running an fsync now.
    syncing: bool,
    /// The last fsync failed: nothing after it can be acknowledged.
    failed: bool,
}

pub struct GroupSync {
    file: File,
    progress: Mutex<Progress>,
    synced: Condvar,
}

impl GroupSync {
    pub fn new(file: File) -> GroupSync {
        GroupSync {
            file,
            progress: Mutex::default(),
            synced: Condvar::new(),
        }
    }

    /// Records an entry appended; call it while still holding the log, so tickets follow its order.
    pub fn committed(&self) -> u64 {
        let mut p = self.lock();
        p.committed += 1;
        p.committed
    }

    /// Entries known to be on disk.
    #[cfg(test)]
    pub fn synced(&self) -> u64 {
        self.lock().synced
    }

    /// The latest entry appended: what a read after a commit may have seen.
    pub fn latest(&self) -> u64 {
        self.lock().committed
    }

    /// Refuses once an fsync has failed: nothing committed since can be acknowledged, so nothing
    /// more is attempted.
    pub fn refuse_if_failed(&self) -> Result<(), StoreError> {
        if self.lock().failed {
            return Err(sync_failed());
        }
        Ok(())
    }

    /// Waits until entry `ticket` is on disk, leading an fsync when none is running; inside
    /// [`conduit_store::flush::deferring`], leaves the wait to the caller.
    pub fn wait_durable(self: &Arc<Self>, ticket: u64) -> Result<(), StoreError> {
        self.wait_durable_unless(ticket, || false)
    }

    /// [`GroupSync::wait_durable`], but while `more_coming` says another writer is about to append,
    /// it leaves the fsync to that writer (for a moment at most), so one fsync covers both.
    pub fn wait_durable_unless(
        self: &Arc<Self>,
        ticket: u64,
        more_coming: impl Fn() -> bool,
    ) -> Result<(), StoreError> {
        flush::wait_or_defer(self, ticket, || self.wait_now(ticket, more_coming))
    }

    /// Blocks until entry `ticket` is on disk (see [`GroupSync::wait_durable_unless`]).
    fn wait_now(&self, ticket: u64, more_coming: impl Fn() -> bool) -> Result<(), StoreError> {
        let leave_until = Instant::now() + LEAVE_AT_MOST;
        let mut p = self.lock();
        loop {
            if p.failed {
                return Err(sync_failed());
            }
            if p.synced >= ticket {
                return Ok(());
            }
            if p.syncing {
                p = self.synced.wait(p).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            let left = leave_until.saturating_duration_since(Instant::now());
            if !left.is_zero() && more_coming() {
                p = self.synced.wait_timeout(p, left).unwrap_or_else(|e| e.into_inner()).0;
                continue;
            }
            p.syncing = true;
            let target = p.committed;
            drop(p);
            let result = self.file.sync_data();
            p = self.lock();
            p.syncing = false;
            match result {
                Ok(()) => p.synced = p.synced.max(target),
                Err(_) => p.failed = true,
            }
            self.synced.notify_all();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Flusher for GroupSync {
    fn wait_on_disk(&self, ticket: u64) -> Result<(), StoreError> {
        self.wait_now(ticket, || false)
    }

    fn is_on_disk(&self, ticket: u64) -> bool {
        let p = self.lock();
        !p.failed && p.synced >= ticket
    }
}

fn sync_failed() -> StoreError {
    StoreError::Wal("an earlier fsync of the redo log failed".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_commits_are_all_acknowledged_once_synced() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("wal")).unwrap();
        let sync = Arc::new(GroupSync::new(file));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let sync = sync.clone();
                std::thread::spawn(move || {
                    let ticket = sync.committed();
                    sync.wait_durable(ticket).unwrap();
                    ticket
                })
            })
            .collect();
        let mut tickets: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        tickets.sort();
        assert_eq!(tickets, (1..=16).collect::<Vec<_>>());
        assert_eq!(sync.lock().synced, 16);
    }

    #[test]
    fn a_caller_that_wrote_nothing_still_waits_for_the_commit_it_may_have_read() {
        let dir = tempfile::tempdir().unwrap();
        let sync = Arc::new(GroupSync::new(File::create(dir.path().join("wal")).unwrap()));
        let first = sync.committed();
        sync.wait_durable(first).unwrap();
        sync.committed(); // committed by another caller, not yet synced
        sync.wait_durable(sync.latest()).unwrap();
        assert_eq!(sync.lock().synced, 2);
    }
}
