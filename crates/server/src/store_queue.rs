//! The queue of toolbelt calls to one store thread, where their store writes one at a time
//! (SQLite).
//!
//! Through `spawn_blocking`, every call in flight holds a blocking thread of its own: at 32
//! executions, up to 32 of them park on the store's writer lock, then on its flush, and idle ones
//! park again in the pool. Here one thread runs the calls' store work one after another, never
//! parking while more is queued; a second thread waits for their flushes, one fsync for the
//! answers held when nothing more was queued (or, while calls keep coming and no fsync runs, once
//! it holds as many as are queued, [`FlushThread::hand_if_due`]), while the first runs the next
//! calls. An answer is handed out only after its flush ([`conduit_store::flush`]): the threads hold
//! it until then.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};

use conduit_core::Refusal;
use conduit_store::flush::{self, Unflushed};
use conduit_toolbelt::Toolbelt;
use tokio::sync::oneshot;

use crate::envelope::Failure;

/// The most answers the store thread holds before it hands them to the flush thread, should calls
/// keep coming without a pause: so a steady stream still gets its answers, a group at a time.
const MAX_HELD: usize = 128;

/// The fewest answers the store thread hands to an idle flush thread without waiting for its queue
/// to empty. Handed over only when the queue emptied, 32 executions' calls moved as one convoy,
/// about 24 to an fsync, while the store thread sat idle half the time (docs/performance.md, ninth
/// pass); the best group was about half the calls in flight, so a group goes once it is as large
/// as the queue behind it, and at least this large (docs/performance.md, tenth pass).
const HAND_OVER_AT_LEAST: usize = 4;

/// The most answers a group holds for the queue behind it: a flood of calls (an execution's 32
/// connections, say) lengthens the queue, and so the wait of every answer held for its group, by
/// no more than this many calls' store work.
const HAND_OVER_AT_MOST: usize = 32;

/// A call's store work, run on the thread.
type Job = Box<dyn FnOnce() -> Done + Send>;

/// Hands a job's answer out once its flush is on disk, or the flush's refusal instead of it.
type Reply = Box<dyn FnOnce(Result<(), Refusal>) + Send>;

/// A job's answer and the flushes it waits for.
struct Done {
    unflushed: Unflushed,
    reply: Reply,
}

/// The store thread's queue; its jobs are answered once their flushes are on disk.
struct StoreQueue {
    jobs: Sender<Job>,
    /// Jobs sent and not yet taken by the store thread.
    queued: Arc<AtomicUsize>,
}

/// The process's store thread, started by the first call; `None` when it could not be started
/// (calls then cross through `spawn_blocking`).
static QUEUE: OnceLock<Option<StoreQueue>> = OnceLock::new();

/// Runs a call's store work `f` against `toolbelt` where its store is best reached: the store
/// thread when the store writes one at a time (and defers its flushes, [`flush::deferring`]), a
/// blocking thread otherwise.
pub async fn to_store<T: Send + 'static>(
    toolbelt: &Toolbelt,
    f: impl FnOnce(&Toolbelt) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    // Started only for a store it serves: a daemon on PostgreSQL runs no store thread.
    let queue = if toolbelt.store_writes_one_at_a_time() {
        QUEUE.get_or_init(StoreQueue::start).as_ref()
    } else {
        None
    };
    let toolbelt = toolbelt.clone();
    let f = move || f(&toolbelt);
    match queue {
        Some(queue) => queue.run(f).await,
        None => crate::envelope::blocking(f).await,
    }
}

impl StoreQueue {
    /// Starts the flush thread, then the store thread that hands it what it holds.
    fn start() -> Option<StoreQueue> {
        let (to, flushes) = mpsc::channel();
        let (jobs, queue) = mpsc::channel();
        let (in_flight, queued) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let flush = FlushThread {
            to,
            in_flight: in_flight.clone(),
        };
        let queue = Queue {
            jobs: queue,
            queued: queued.clone(),
        };
        let started = spawn("store-flush", move || flush_each(&flushes, &in_flight))
            .and_then(|()| spawn("store-calls", move || serve(&queue, &flush)));
        match started {
            Ok(()) => Some(StoreQueue { jobs, queued }),
            Err(e) => {
                tracing::error!(error = %e, "could not start the store thread; calls cross to blocking threads");
                None
            }
        }
    }

    /// Runs `f` on the thread; answers once every flush its transactions waited for is on disk.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Failure> {
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move || {
            let (out, unflushed) = flush::deferring(|| catch_unwind(AssertUnwindSafe(f)));
            let out = out.unwrap_or_else(|_| Err(Failure(Refusal::internal())));
            Done {
                unflushed,
                reply: Box::new(move |flushed| {
                    // A caller that went away no longer waits for its answer.
                    let _ = answer.send(flushed.map_err(Failure).and(out));
                }),
            }
        });
        self.queued.fetch_add(1, Ordering::SeqCst);
        if let Err(mpsc::SendError(job)) = self.jobs.send(job) {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            tracing::error!("the store thread stopped; a call's store work runs on a blocking thread");
            let _ = tokio::task::spawn_blocking(move || Held(vec![job()]).release()).await;
        }
        answered.await.unwrap_or_else(|_| Err(Failure(Refusal::internal())))
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new().name(name.into()).spawn(f).map(drop)
}

/// The store thread's way to the flush thread, and whether that thread has answers to flush.
struct FlushThread {
    to: Sender<Held>,
    /// Groups of answers handed over whose fsync is not done: counted before each is sent (so the
    /// count never reads zero while one waits), counted off by the flush thread after its fsync.
    in_flight: Arc<AtomicUsize>,
}

impl FlushThread {
    fn hand(&self, held: &mut Held) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        held.hand_to(&self.to);
    }

    /// Hands `held` over when it is worth an fsync of its own: [`MAX_HELD`] answers, or, with no
    /// fsync running, as many as the `queued` calls behind them (within [`HAND_OVER_AT_LEAST`] and
    /// [`HAND_OVER_AT_MOST`]), so that about two groups take turns whatever the calls in flight.
    fn hand_if_due(&self, held: &mut Held, queued: usize) {
        let idle = || self.in_flight.load(Ordering::SeqCst) == 0;
        let enough = held.0.len() >= queued.clamp(HAND_OVER_AT_LEAST, HAND_OVER_AT_MOST);
        let due = held.0.len() >= MAX_HELD || (enough && idle());
        if due {
            self.hand(held);
        }
    }
}

/// The store thread's end of its queue.
struct Queue {
    jobs: Receiver<Job>,
    /// Jobs sent and not yet taken, counted off here as each is taken.
    queued: Arc<AtomicUsize>,
}

impl Queue {
    /// The next job, waiting for one; `None` once every sender is gone.
    fn next(&self) -> Option<Job> {
        self.jobs.recv().ok().inspect(|_| self.took())
    }

    /// The next job when one is queued.
    fn next_queued(&self) -> Result<Job, TryRecvError> {
        self.jobs.try_recv().inspect(|_| self.took())
    }

    fn took(&self) {
        self.queued.fetch_sub(1, Ordering::SeqCst);
    }

    fn len(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }
}

/// Runs jobs as they come. Once nothing more is queued (or enough answers are held,
/// [`FlushThread::hand_if_due`]), it hands the answers it holds to the flush thread and goes on
/// with the next jobs while their fsync runs.
fn serve(queue: &Queue, flush: &FlushThread) {
    let _stopped = LogIfPanicking("the store thread stopped; calls cross to blocking threads");
    let mut held = Held::default();
    loop {
        let next = if held.0.is_empty() {
            queue.next()
        } else {
            match queue.next_queued() {
                Ok(job) => Some(job),
                Err(TryRecvError::Empty) => {
                    flush.hand(&mut held);
                    continue;
                }
                Err(TryRecvError::Disconnected) => None,
            }
        };
        let Some(job) = next else {
            flush.hand(&mut held);
            return;
        };
        held.add(job());
        flush.hand_if_due(&mut held, queue.len());
    }
}

/// Answers what the store thread hands over, every group handed over during one fsync after the
/// next, and counts each group off once its fsync is done (before its answers go out).
fn flush_each(flushes: &Receiver<Held>, in_flight: &AtomicUsize) {
    let _stopped = LogIfPanicking("the store's flush thread stopped; the store thread flushes itself");
    while let Ok(mut held) = flushes.recv() {
        let mut groups = 1;
        while let Ok(more) = flushes.try_recv() {
            held.0.extend(more.0);
            groups += 1;
        }
        held.flush();
        in_flight.fetch_sub(groups, Ordering::SeqCst);
        held.answer();
    }
}

/// Logs that a thread stopped, should it unwind.
struct LogIfPanicking(&'static str);

impl Drop for LogIfPanicking {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!("{}", self.0);
        }
    }
}

/// Answers waiting for their flushes.
#[derive(Default)]
struct Held(Vec<Done>);

impl Held {
    /// Holds `done` until its flush; one whose flush is already on disk (a read of state flushed
    /// before) is answered now.
    fn add(&mut self, done: Done) {
        if done.unflushed.on_disk() {
            (done.reply)(Ok(()));
        } else {
            self.0.push(done);
        }
    }

    fn hand_to(&mut self, flush: &Sender<Held>) {
        if let Err(mpsc::SendError(held)) = flush.send(std::mem::take(self)) {
            // No flush thread: wait here.
            held.release();
        }
    }

    /// Flushes, then answers.
    fn release(self) {
        self.flush();
        self.answer();
    }

    /// Flushes each store once, through the latest ticket any held answer waits for.
    fn flush(&self) {
        let mut all = Unflushed::default();
        for done in &self.0 {
            all.absorb(done.unflushed.clone());
        }
        // A failure is each answer's own to report, in `answer`.
        let _ = all.wait();
    }

    /// Hands each answer out, or its own store's failure instead (a store that failed fails only
    /// its own calls).
    fn answer(self) {
        for done in self.0 {
            let flushed = done.unflushed.wait().map_err(|e| Failure::from(e).0);
            (done.reply)(flushed);
        }
    }
}

#[cfg(test)]
mod tests {
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
            wait_or_defer(&store, 1, || panic!("a job on the store thread waited for its flush"))?;
            Ok(value)
        }
    }

    fn queue() -> StoreQueue {
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
    /// checks that the first `expected` go as one group (their fsync holds the flush thread, so
    /// the rest stay held while the last job runs), and the rest once it is done.
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
        let (jobs, queue) = mpsc::channel();
        drop(queue);
        let queued = Arc::default();
        answered_only_after_its_flush(StoreQueue { jobs, queued }, 5).await;
    }
}
