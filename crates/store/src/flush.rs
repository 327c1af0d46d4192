//! Waiting for a transaction's flush, now or on behalf of a caller that answers later.
//!
//! A store that acknowledges a transaction only once its log is on disk ([`Flusher`]) waits for
//! that flush before the transaction returns. A thread that runs many callers' store work one
//! after another (the server's store thread) cannot park on every flush: inside [`deferring`],
//! such a wait is kept in an [`Unflushed`] instead, and the thread waits once for everything it
//! ran before it hands any of their answers out. Nothing leaves [`deferring`] but the value and
//! what it must wait for, so an answer cannot be given before its flush by mistake: the caller
//! holds the value only next to the [`Unflushed`] it waits on.

use std::cell::RefCell;
use std::sync::Arc;

use crate::StoreError;

/// A store's log, whose acknowledgements wait for everything up to a ticket to be on disk.
pub trait Flusher: Send + Sync {
    /// Blocks until everything through `ticket` is on disk.
    fn wait_on_disk(&self, ticket: u64) -> Result<(), StoreError>;

    /// Whether everything through `ticket` is on disk already; false once a flush failed. Never
    /// blocks on a flush.
    fn is_on_disk(&self, ticket: u64) -> bool;
}

/// The flushes a caller still waits for before it answers: the latest ticket of each store.
#[must_use = "an answer given before its flush may be lost: wait for it"]
#[derive(Clone, Default)]
pub struct Unflushed(Vec<(Arc<dyn Flusher>, u64)>);

thread_local! {
    /// Inside [`deferring`]: the flushes this thread's transactions left to wait for.
    static DEFERRED: RefCell<Option<Unflushed>> = const { RefCell::new(None) };
}

/// Runs `f`, keeping every flush its transactions would wait for in the [`Unflushed`] returned
/// with its value instead of waiting. Whoever holds the value waits for that [`Unflushed`] before
/// it answers with it or acts on it. Nested, it returns its own waits, and the enclosing call keeps
/// them too.
pub fn deferring<T>(f: impl FnOnce() -> T) -> (T, Unflushed) {
    let mut scope = Scope(Some(DEFERRED.with(|d| d.borrow_mut().replace(Unflushed::default()))));
    let value = f();
    (value, scope.end())
}

/// A [`deferring`] call's scope: what an enclosing one had kept, put back when it ends, however it
/// ends (a panic too), with this one's waits added.
struct Scope(Option<Option<Unflushed>>);

impl Scope {
    fn end(&mut self) -> Unflushed {
        let Some(mut enclosing) = self.0.take() else {
            return Unflushed::default();
        };
        let own = DEFERRED.with(|d| d.borrow_mut().take()).unwrap_or_default();
        if let Some(enclosing) = &mut enclosing {
            enclosing.absorb(own.clone());
        }
        DEFERRED.with(|d| *d.borrow_mut() = enclosing);
        own
    }
}

impl Drop for Scope {
    /// After a panic: the waits go to the enclosing call, if any; the panic answers no one.
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// Whether this thread is inside [`deferring`]: its transactions leave their flushes to it.
pub fn is_deferring() -> bool {
    DEFERRED.with(|d| d.borrow().is_some())
}

/// Waits for `ticket` on `flusher` with `wait_now`, or, inside [`deferring`], keeps it for the
/// caller to wait for. A deferred `Ok` is the transaction's last step: nothing after it in the
/// transaction may take its changes to be on disk.
pub fn wait_or_defer<F: Flusher + 'static>(
    flusher: &Arc<F>,
    ticket: u64,
    wait_now: impl FnOnce() -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let deferred = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(unflushed) => {
            unflushed.add(flusher.clone(), ticket);
            true
        }
        None => false,
    });
    if deferred {
        Ok(())
    } else {
        wait_now()
    }
}

impl Unflushed {
    /// Whether everything it waits for is on disk already.
    pub fn on_disk(&self) -> bool {
        self.0.iter().all(|(flusher, ticket)| flusher.is_on_disk(*ticket))
    }

    /// Adds what `other` waits for.
    pub fn absorb(&mut self, other: Unflushed) {
        for (flusher, ticket) in other.0 {
            self.add(flusher, ticket);
        }
    }

    /// Waits for every flush, the latest ticket of each store (tickets are ordered: a flush through
    /// the latest covers every earlier one).
    pub fn wait(self) -> Result<(), StoreError> {
        self.0
            .into_iter()
            .try_for_each(|(flusher, ticket)| flusher.wait_on_disk(ticket))
    }

    fn add(&mut self, flusher: Arc<dyn Flusher>, ticket: u64) {
        match self.0.iter_mut().find(|(f, _)| same(f, &flusher)) {
            Some((_, latest)) => *latest = (*latest).max(ticket),
            None => self.0.push((flusher, ticket)),
        }
    }
}

/// Whether two flushers are one store's (their data, not their vtables, compared).
fn same(a: &Arc<dyn Flusher>, b: &Arc<dyn Flusher>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records the tickets it was asked to flush through.
    #[derive(Default)]
    struct Log(Mutex<Vec<u64>>);

    impl Flusher for Log {
        fn wait_on_disk(&self, ticket: u64) -> Result<(), StoreError> {
            self.0.lock().unwrap().push(ticket);
            Ok(())
        }

        fn is_on_disk(&self, ticket: u64) -> bool {
            self.0.lock().unwrap().iter().any(|t| *t >= ticket)
        }
    }

    fn flushed(log: &Log) -> Vec<u64> {
        log.0.lock().unwrap().clone()
    }

    #[test]
    fn outside_deferring_a_wait_happens_now() {
        let log = Arc::new(Log::default());
        let mut waited = false;
        wait_or_defer(&log, 3, || {
            waited = true;
            Ok(())
        })
        .unwrap();
        assert!(waited);
    }

    #[test]
    fn inside_deferring_waits_are_kept_and_merged_per_store() {
        let (a, b) = (Arc::new(Log::default()), Arc::new(Log::default()));
        let never = || -> Result<(), StoreError> { panic!("waited inside deferring") };
        let ((), unflushed) = deferring(|| {
            wait_or_defer(&a, 3, never).unwrap();
            wait_or_defer(&b, 1, never).unwrap();
            wait_or_defer(&a, 7, never).unwrap();
            wait_or_defer(&a, 5, never).unwrap();
        });
        assert!(flushed(&a).is_empty(), "nothing flushed before the caller waits");
        unflushed.wait().unwrap();
        assert_eq!((flushed(&a), flushed(&b)), (vec![7], vec![1]));
    }

    #[test]
    fn deferring_ends_with_its_call_even_when_it_panics() {
        let log = Arc::new(Log::default());
        let panicked = std::panic::catch_unwind(|| {
            deferring(|| {
                wait_or_defer(&log, 1, || Ok(())).unwrap();
                panic!("the body panics");
            })
        });
        assert!(panicked.is_err());
        let mut waited = false;
        wait_or_defer(&log, 2, || {
            waited = true;
            Ok(())
        })
        .unwrap();
        assert!(waited, "the thread waits again once deferring ended");
    }

    #[test]
    fn a_nested_deferring_returns_its_own_waits_and_the_enclosing_one_keeps_them_too() {
        let log = Arc::new(Log::default());
        let (inner, outer) = deferring(|| {
            wait_or_defer(&log, 2, || Ok(())).unwrap();
            let ((), inner) = deferring(|| wait_or_defer(&log, 4, || Ok(())).unwrap());
            assert!(is_deferring(), "the enclosing call still defers");
            inner
        });
        assert!(!is_deferring());
        inner.wait().unwrap();
        outer.wait().unwrap();
        assert_eq!(flushed(&log), vec![4, 4], "each waits through the inner's ticket");
    }

    #[test]
    fn a_nested_deferring_that_panics_gives_its_waits_to_the_enclosing_one() {
        let log = Arc::new(Log::default());
        let ((), outer) = deferring(|| {
            let panicked = std::panic::catch_unwind(|| {
                deferring(|| {
                    wait_or_defer(&log, 6, || Ok(())).unwrap();
                    panic!("the inner body panics");
                })
            });
            assert!(panicked.is_err());
        });
        outer.wait().unwrap();
        assert_eq!(flushed(&log), vec![6]);
    }

    #[test]
    fn what_was_flushed_before_is_on_disk_and_what_was_not_is_not() {
        let log = Arc::new(Log::default());
        let ((), nothing) = deferring(|| ());
        assert!(nothing.on_disk(), "nothing to wait for");
        let ((), earlier) = deferring(|| wait_or_defer(&log, 3, || Ok(())).unwrap());
        let ((), later) = deferring(|| wait_or_defer(&log, 4, || Ok(())).unwrap());
        assert!(!earlier.on_disk());
        earlier.wait().unwrap();
        assert!(!later.on_disk(), "a later ticket is not covered");
        let ((), covered) = deferring(|| wait_or_defer(&log, 2, || Ok(())).unwrap());
        assert!(covered.on_disk());
    }

    #[test]
    fn absorbing_keeps_the_latest_ticket() {
        let log = Arc::new(Log::default());
        let ((), mut first) = deferring(|| wait_or_defer(&log, 9, || Ok(())).unwrap());
        let ((), second) = deferring(|| wait_or_defer(&log, 2, || Ok(())).unwrap());
        first.absorb(second);
        first.wait().unwrap();
        assert_eq!(flushed(&log), vec![9]);
    }
}
