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
//!
//! A call that finds the store idle (nothing queued, no job running, no fsync running) runs on its
//! caller's thread instead: with nothing to share a group or an fsync with, the crossing to the
//! store thread and back was all it gained, two thread wake-ups (a third of a `read_context`'s
//! time). Its answer is held for its flush the same way, handed to the flush thread when it waits
//! for one.

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
    /// Jobs running, on the store thread or on a caller's.
    running: Arc<AtomicUsize>,
    flush: FlushThread,
    /// Whether a call that finds the store idle runs on its caller's thread (off only in the tests
    /// of the store thread's own order).
    in_place: bool,
}

/// The process's store thread, started by the first call; `None` when it could not be started
/// (calls then cross through `spawn_blocking`).
static QUEUE: OnceLock<Option<StoreQueue>> = OnceLock::new();

/// Runs a call's store work `f` (on `toolbelt`'s store) where its store is best reached: the store
/// thread when the store writes one at a time (and defers its flushes, [`flush::deferring`]), a
/// blocking thread otherwise.
pub async fn to_store<T: Send + 'static>(
    toolbelt: &Toolbelt,
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    // Started only for a store it serves: a daemon on PostgreSQL runs no store thread.
    let queue = if toolbelt.store_writes_one_at_a_time() {
        QUEUE.get_or_init(StoreQueue::start).as_ref()
    } else {
        None
    };
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
        let (in_flight, queued, running) = (Arc::default(), Arc::default(), Arc::default());
        let flush = FlushThread {
            to,
            in_flight: Arc::clone(&in_flight),
        };
        let queue = Queue {
            jobs: queue,
            queued: Arc::clone(&queued),
            running: Arc::clone(&running),
        };
        let store_threads = flush.clone();
        let started = spawn("store-flush", move || flush_each(&flushes, &in_flight))
            .and_then(|()| spawn("store-calls", move || serve(&queue, &store_threads)));
        match started {
            Ok(()) => Some(StoreQueue {
                jobs,
                queued,
                running,
                flush,
                in_place: true,
            }),
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
        if self.in_place && self.claim_idle() {
            self.run_in_place(job);
        } else {
            self.send(job).await;
        }
        answered.await.unwrap_or_else(|_| Err(Failure(Refusal::internal())))
    }

    /// Takes the store for a job on the caller's thread when it is idle: nothing queued, no job
    /// running, no fsync running.
    fn claim_idle(&self) -> bool {
        self.queued.load(Ordering::SeqCst) == 0
            && self.flush.is_idle()
            && self
                .running
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// Runs a job the caller took the store for ([`StoreQueue::claim_idle`]); its answer is held
    /// for its flush as the store thread holds one.
    fn run_in_place(&self, job: Job) {
        let mut held = Held::default();
        held.add(job());
        if !held.0.is_empty() {
            self.flush.hand(&mut held);
        }
        // After the hand-over, so a caller in between finds an fsync running, not an idle store.
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    /// Queues a job for the store thread.
    async fn send(&self, job: Job) {
        self.queued.fetch_add(1, Ordering::SeqCst);
        if let Err(mpsc::SendError(job)) = self.jobs.send(job) {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            tracing::error!("the store thread stopped; a call's store work runs on a blocking thread");
            let _ = tokio::task::spawn_blocking(move || Held(vec![job()]).release()).await;
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new().name(name.into()).spawn(f).map(drop)
}

/// The way to the flush thread, and whether that thread has answers to flush.
#[derive(Clone)]
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
        let enough = held.0.len() >= queued.clamp(HAND_OVER_AT_LEAST, HAND_OVER_AT_MOST);
        let due = held.0.len() >= MAX_HELD || (enough && self.is_idle());
        if due {
            self.hand(held);
        }
    }

    /// Whether no fsync runs nor waits to.
    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
    }
}

/// The store thread's end of its queue.
struct Queue {
    jobs: Receiver<Job>,
    /// Jobs sent and not yet taken, counted off here as each is taken.
    queued: Arc<AtomicUsize>,
    /// Jobs running, counted here from when the store thread takes one until it has run it.
    running: Arc<AtomicUsize>,
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

    /// Counts a job taken as running before it stops counting as queued, so a caller never finds
    /// the store idle in between.
    fn took(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
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
        let done = job();
        queue.running.fetch_sub(1, Ordering::SeqCst);
        held.add(done);
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
mod tests;
