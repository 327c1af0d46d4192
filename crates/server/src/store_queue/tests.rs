use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use conduit_store::flush::{wait_or_defer, Flusher};
use conduit_store::StoreError;

use super::*;

/// A store's flush that blocks until the test opens it, then succeeds or fails.
struct Gated {
    open: Mutex<bool>,
    opened: Condvar,
    flushed: AtomicBool,
    fails: bool,
}

impl Gated {
    fn new(fails: bool) -> Arc<Gated> {
        Arc::new(Gated {
            open: Mutex::new(false),
            opened: Condvar::new(),
            flushed: AtomicBool::new(false),
            fails,
        })
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Flusher for Gated {
    fn is_on_disk(&self, _ticket: u64) -> bool {
        self.flushed.load(Ordering::SeqCst) && !self.fails
    }

    fn wait_on_disk(&self, _ticket: u64) -> Result<(), StoreError> {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        self.flushed.store(true, Ordering::SeqCst);
        if self.fails {
            return Err(StoreError::Wal("the test's flush failed".into()));
        }
        Ok(())
    }
}

/// A job that writes (its flush deferred to `store`) and answers `value`.
fn writes(store: &Arc<Gated>, value: u32) -> impl FnOnce() -> Result<u32, Failure> + Send + 'static {
    let store = store.clone();
    move || {
        wait_or_defer(&store, 1, || panic!("a job waited for its flush where it runs"))?;
        Ok(value)
    }
}

/// A queue whose every job runs on the store thread, for the tests of that thread's order.
fn queue() -> StoreQueue {
    StoreQueue {
        in_place: false,
        ..idle_first()
    }
}

/// A queue as the daemon starts it: a call that finds the store idle runs on its caller's thread.
fn idle_first() -> StoreQueue {
    StoreQueue::start().expect("the store thread starts")
}

/// A write run on `queue` is answered only once its store's flush is opened; answers the store.
async fn answered_only_after_its_flush(queue: StoreQueue, value: u32) -> Arc<Gated> {
    let store = Gated::new(false);
    let job = writes(&store, value);
    let mut answer = tokio::spawn(async move { queue.run(job).await });
    let early = tokio::time::timeout(Duration::from_millis(200), &mut answer).await;
    assert!(early.is_err(), "answered before its flush");
    store.open();
    assert_eq!(answer.await.unwrap().ok(), Some(value));
    store
}

#[tokio::test]
async fn an_answer_is_handed_out_only_after_its_flush() {
    let store = answered_only_after_its_flush(queue(), 7).await;
    assert!(store.flushed.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_failed_flush_answers_its_refusal_instead_of_the_value() {
    let (thread, store) = (queue(), Gated::new(true));
    store.open();
    let answered = thread.run(writes(&store, 7)).await;
    assert!(answered.is_err(), "the value of a write that is not on disk");
    let control = Gated::new(false);
    control.open();
    assert_eq!(thread.run(writes(&control, 7)).await.ok(), Some(7), "the control");
}

/// Calls held for one fsync on two stores, one of which fails: only its own call is refused.
#[tokio::test]
async fn one_stores_failed_flush_refuses_only_its_own_calls() {
    let thread = std::sync::Arc::new(queue());
    let (first, failing, sound) = (Gated::new(false), Gated::new(true), Gated::new(false));
    failing.open();
    sound.open();
    let run = |store: &Arc<Gated>, value| {
        let (thread, job) = (thread.clone(), writes(store, value));
        tokio::spawn(async move { thread.run(job).await })
    };
    // The flush thread waits on the first store while the other two calls are held behind it.
    let first_answer = run(&first, 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (refused, answered) = (run(&failing, 2), run(&sound, 3));
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.open();
    assert_eq!(first_answer.await.unwrap().ok(), Some(1));
    assert!(refused.await.unwrap().is_err());
    assert_eq!(
        answered.await.unwrap().ok(),
        Some(3),
        "another store's failure is not this call's"
    );
}

/// A call whose flush is on disk already (a read of state flushed before) is answered while
/// an earlier call's fsync still runs.
#[tokio::test]
async fn a_call_already_on_disk_does_not_wait_behind_a_running_flush() {
    let queue = std::sync::Arc::new(queue());
    let (slow, settled) = (Gated::new(false), Gated::new(false));
    settled.flushed.store(true, Ordering::SeqCst);
    let (held, job) = (queue.clone(), writes(&slow, 1));
    let slow_answer = tokio::spawn(async move { held.run(job).await });
    // The flush thread waits on the slow store's fsync.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answered = tokio::time::timeout(Duration::from_secs(30), queue.run(writes(&settled, 2))).await;
    assert_eq!(
        answered.ok().and_then(Result::ok),
        Some(2),
        "answered behind the running flush"
    );
    assert!(!slow_answer.is_finished());
    slow.open();
    assert_eq!(slow_answer.await.unwrap().ok(), Some(1));
}

/// A queue's jobs, started on tasks of their own in the order they are queued.
struct Jobs(std::sync::Arc<StoreQueue>);

type Answer = tokio::task::JoinHandle<Result<u32, Failure>>;

impl Jobs {
    fn run(&self, job: impl FnOnce() -> Result<u32, Failure> + Send + 'static) -> Answer {
        let queue = self.0.clone();
        tokio::spawn(async move { queue.run(job).await })
    }

    /// A job that holds the store thread from when it starts until it is released.
    fn blocking(&self) -> Blocking {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (start, started) = oneshot::channel();
        let answer = self.run(move || {
            let _ = start.send(());
            let _ = released.recv();
            Ok(0)
        });
        Blocking {
            release,
            started,
            answer,
        }
    }

    /// Waits until `n` jobs are queued behind the one running.
    async fn queued(&self, n: usize) {
        let queued = || self.0.queued.load(Ordering::SeqCst);
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while queued() != n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert!(waited.await.is_ok(), "{n} jobs queued, found {}", queued());
    }

    /// `size` jobs writing to `store`, answering `first` on.
    fn group(&self, store: &Arc<Gated>, first: u32, size: usize) -> Vec<Answer> {
        (first..first + size as u32)
            .map(|v| self.run(writes(store, v)))
            .collect()
    }
}

/// A job holding the store thread, its answer, and what tells when it started.
struct Blocking {
    release: std::sync::mpsc::Sender<()>,
    started: oneshot::Receiver<()>,
    answer: Answer,
}

impl Blocking {
    fn release(&self) {
        self.release.send(()).unwrap();
    }

    /// Waits until the job runs: every job queued before it has run.
    async fn started(&mut self) {
        let started = tokio::time::timeout(Duration::from_secs(10), &mut self.started).await;
        assert!(matches!(started, Ok(Ok(()))), "the blocking job started");
    }

    async fn answered(self) {
        assert_eq!(self.answer.await.unwrap().ok(), Some(0));
    }
}

async fn answered_in_order(group: Vec<Answer>, first: u32) {
    for (answer, value) in group.into_iter().zip(first..) {
        let answered = tokio::time::timeout(Duration::from_secs(10), answer).await;
        assert_eq!(answered.ok().and_then(|a| a.unwrap().ok()), Some(value), "answered");
    }
}

/// While calls keep coming, the answers held go to an idle flush thread once there are
/// [`HAND_OVER_AT_LEAST`] of them and no fewer than the calls queued behind them: here they
/// are answered while the one job queued after them still runs.
#[tokio::test]
async fn held_answers_go_to_an_idle_flush_thread_without_waiting_for_the_queue_to_empty() {
    let jobs = Jobs(std::sync::Arc::new(queue()));
    let store = Gated::new(false);
    store.open();
    // The first job holds the thread until every other job is queued behind it.
    let gate = jobs.blocking();
    let group = jobs.group(&store, 1, HAND_OVER_AT_LEAST);
    let last = jobs.blocking();
    jobs.queued(HAND_OVER_AT_LEAST + 1).await;
    gate.release();
    answered_in_order(group, 1).await;
    assert!(!last.answer.is_finished(), "while the next job runs");
    last.release();
    last.answered().await;
    gate.answered().await;
}

/// A group grows with the queue behind it: of `2n + 1` calls queued together (n =
/// [`HAND_OVER_AT_LEAST`]) the first `n + 1` go, the first moment as many are held as are
/// queued (the job that blocks after them counted), and the rest wait for the next group.
#[tokio::test]
async fn a_longer_queue_makes_a_larger_group() {
    first_group_of(2 * HAND_OVER_AT_LEAST + 1, HAND_OVER_AT_LEAST + 1).await;
}

/// Fewer answers than [`HAND_OVER_AT_LEAST`] wait behind a job that runs long (for the queue
/// to empty), though the queue behind them is shorter still.
#[tokio::test]
async fn a_group_smaller_than_its_least_waits_for_the_queue_to_empty() {
    first_group_of(HAND_OVER_AT_LEAST - 1, 0).await;
}

/// However long the queue, a group goes once it holds [`HAND_OVER_AT_MOST`] answers.
#[tokio::test]
async fn a_group_goes_at_its_most_however_long_the_queue() {
    first_group_of(2 * HAND_OVER_AT_MOST + 1, HAND_OVER_AT_MOST).await;
}

/// Queues `calls` writes behind a job that holds the thread and a job that blocks after them;
/// checks that the first `expected` go as one group and the rest stay held while the last job runs
/// (behind the first group's fsync, or, with none, as fewer than the least), then go once it is
/// done.
async fn first_group_of(calls: usize, expected: usize) {
    let jobs = Jobs(std::sync::Arc::new(queue()));
    let slow = Gated::new(false);
    let gate = jobs.blocking();
    let mut group = jobs.group(&slow, 1, calls);
    let mut last = jobs.blocking();
    jobs.queued(calls + 1).await;
    gate.release();
    last.started().await;
    slow.open();
    let rest = group.split_off(expected);
    answered_in_order(group, 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(rest.iter().all(|a| !a.is_finished()), "only the first group went");
    last.release();
    answered_in_order(rest, expected as u32 + 1).await;
    for blocking in [gate, last] {
        blocking.answered().await;
    }
}

/// While a group's fsync runs, the next group is held; once that group is answered, the flush
/// thread counts as idle again and the next group goes to it while a later job still runs.
#[tokio::test]
async fn the_next_group_waits_for_the_running_fsync_then_goes_while_jobs_still_run() {
    let jobs = Jobs(std::sync::Arc::new(queue()));
    let (slow, fast) = (Gated::new(false), Gated::new(false));
    fast.open();
    let gate = jobs.blocking();
    // The first group goes whole: as many as the calls queued behind it (the second group and
    // the two jobs that block).
    let first = jobs.group(&slow, 1, HAND_OVER_AT_LEAST + 2);
    let second = jobs.group(&fast, 101, HAND_OVER_AT_LEAST);
    let mut next = jobs.blocking();
    let last = jobs.blocking();
    jobs.queued(2 * HAND_OVER_AT_LEAST + 4).await;
    gate.release();
    next.started().await;
    assert!(
        second.iter().all(|a| !a.is_finished()),
        "held while the first group's fsync runs"
    );
    slow.open();
    answered_in_order(first, 1).await;
    next.release();
    answered_in_order(second, 101).await;
    assert!(!last.answer.is_finished(), "while the last job runs");
    last.release();
    for blocking in [gate, next, last] {
        blocking.answered().await;
    }
}

#[tokio::test]
async fn a_job_that_panics_answers_internal_and_the_thread_goes_on() {
    let thread = queue();
    let panicked = thread
        .run(|| -> Result<u32, Failure> { panic!("the job panics") })
        .await;
    assert_eq!(panicked.err().map(|f| f.0.code), Some(Refusal::internal().code));
    let store = Gated::new(false);
    store.open();
    assert_eq!(thread.run(writes(&store, 3)).await.ok(), Some(3));
}

/// With its thread gone, a call still runs, and is still answered only after its flush.
#[tokio::test]
async fn without_its_thread_a_call_runs_on_a_blocking_thread_and_waits_for_its_flush() {
    let (jobs, gone) = mpsc::channel();
    drop(gone);
    let queue = StoreQueue { jobs, ..queue() };
    answered_only_after_its_flush(queue, 5).await;
}

/// The thread a job ran on.
fn thread_of() -> impl FnOnce() -> Result<std::thread::ThreadId, Failure> + Send + 'static {
    || Ok(std::thread::current().id())
}

/// A call that finds the store idle runs on its caller's thread; one that finds an fsync running
/// goes to the store thread, where it may share the next one. A write run in place is still
/// answered only after its flush.
#[tokio::test]
async fn a_call_to_an_idle_store_runs_on_its_callers_thread() {
    let queue = std::sync::Arc::new(idle_first());
    let caller = std::thread::current().id();
    assert_eq!(queue.run(thread_of()).await.ok(), Some(caller), "run in place");
    let slow = Gated::new(false);
    let (held, job) = (queue.clone(), writes(&slow, 1));
    let mut slow_answer = tokio::spawn(async move { held.run(job).await });
    let early = tokio::time::timeout(Duration::from_millis(200), &mut slow_answer).await;
    assert!(early.is_err(), "a write run in place waits for its flush");
    let beside_the_fsync = queue.run(thread_of()).await.ok();
    assert!(
        beside_the_fsync.is_some_and(|thread| thread != caller),
        "while an fsync runs, on the store thread"
    );
    slow.open();
    assert_eq!(slow_answer.await.unwrap().ok(), Some(1));
    assert_eq!(queue.run(thread_of()).await.ok(), Some(caller), "idle again");
}
