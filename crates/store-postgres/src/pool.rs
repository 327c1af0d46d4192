//! The store's connections: opened on demand up to [`MAX_OPEN`], kept while idle, each with its
//! prepared statements. A connection that failed is dropped, not reused.

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::target::Target;

use crate::worker::Conn;
use crate::Result;

/// How many connections one daemon holds at most: its concurrent transactions beyond this wait.
pub const MAX_OPEN: usize = 16;

struct Slots {
    idle: Vec<Conn>,
    open: usize,
}

pub struct Pool {
    target: Target,
    slots: Mutex<Slots>,
    freed: Condvar,
}

impl Pool {
    pub fn new(target: Target, first: Conn) -> Pool {
        Pool {
            target,
            slots: Mutex::new(Slots {
                idle: vec![first],
                open: 1,
            }),
            freed: Condvar::new(),
        }
    }

    /// Runs `f` on a connection of the pool, dialling one when none is idle and there is room.
    pub fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut lease = Lease {
            pool: self,
            conn: Some(self.take()?),
        };
        match lease.conn.as_mut() {
            Some(conn) => f(conn),
            None => unreachable!("a lease holds its connection until it is dropped"),
        }
    }

    fn take(&self) -> Result<Conn> {
        let mut slots = self.lock();
        loop {
            if let Some(conn) = slots.idle.pop() {
                return Ok(conn);
            }
            if slots.open < MAX_OPEN {
                slots.open += 1;
                drop(slots);
                return Conn::open(&self.target).inspect_err(|_| self.forget());
            }
            slots = self.freed.wait(slots).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn put_back(&self, conn: Conn) {
        self.lock().idle.push(conn);
        self.freed.notify_one();
    }

    /// A connection that is gone frees its slot.
    fn forget(&self) {
        self.lock().open -= 1;
        self.freed.notify_one();
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A poisoned lock means a panic elsewhere; the counts it guards stay consistent.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection taken from the pool, returned when dropped: unless the server closed it or a panic
/// unwound through its transaction, when it is closed and its slot freed.
struct Lease<'p> {
    pool: &'p Pool,
    conn: Option<Conn>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        match self.conn.take() {
            Some(conn) if !conn.broken && !std::thread::panicking() => self.pool.put_back(conn),
            _ => self.pool.forget(),
        }
    }
}
