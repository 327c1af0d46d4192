//! The durable floor of the concurrent `emit` case: the daemon's pipeline with nothing of the
//! daemon's own in it.
//!
//! A bare hyper server, as the echoes are, hands each request's body to one thread (`floor-calls`)
//! that runs an `emit`'s rows on SQLite (the rows floor, committed 1,024 calls at a time) and
//! writes an entry as long as an `emit`'s redo entry to a log; a second thread (`floor-flush`)
//! fsyncs the log for the answers held, and only then are they sent. Groups are handed over by the
//! store queue's rule (as large as the queue behind them, 4 to 32, while no fsync runs; at 128
//! held, at once). The log is zeroed a page at a time and synced first, and the rows' connection
//! never checkpoints, as the daemon's redo log and checkpoint thread keep that work off its store
//! thread. What it leaves out: authority, records built in Rust, the redo entry's encoding,
//! the savepoints of members after a failure, the checkpoints, the WAL's sync before the log empties. It is the floor the daemon's
//! rate at 32 executions is measured against: the gap is what the daemon adds.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_TYPE;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;
use tokio::sync::oneshot;

use crate::Body;

/// About what one `emit`'s redo entry writes (the store's `store KiB` less its WAL frames).
const ENTRY: usize = 3_700;
/// The log's size, written over from its start, as the redo log is.
const LOG: usize = 4 * 1024 * 1024;
/// The store queue's bounds of a group handed to an idle flush (`store_queue.rs`).
const HAND_OVER: (usize, usize) = (4, 32);
/// The most answers it holds before handing them over, whether or not an fsync runs.
const MOST_HELD: usize = 128;

/// A request's body, and where its answer goes once its entry is on disk.
type Job = (Bytes, oneshot::Sender<Bytes>);

/// The floor's way to its call thread: the jobs, and how many are queued.
#[derive(Clone)]
struct Calls {
    jobs: Sender<Job>,
    queued: Arc<AtomicUsize>,
}

/// Starts the floor's two threads, `rows` made on the first (its statements stay there), and serves
/// `listener` until the runtime ends.
pub async fn serve<R: FnMut()>(listener: UnixListener, rows: impl FnOnce() -> R + Send + 'static, log: File) {
    zero(&log);
    let (jobs, queue) = mpsc::channel();
    let (groups, to_flush) = mpsc::channel();
    let (queued, in_flight) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let log = Arc::new(log);
    let (flushed, counted) = (log.clone(), in_flight.clone());
    std::thread::Builder::new()
        .name("floor-flush".into())
        .spawn(move || flush_each(&to_flush, &flushed, &counted))
        .expect("the floor's flush thread");
    let thread = CallThread {
        queue,
        queued: queued.clone(),
        log,
        groups,
        in_flight,
    };
    std::thread::Builder::new()
        .name("floor-calls".into())
        .spawn(move || thread.run(&mut rows()))
        .expect("the floor's call thread");
    let calls = Calls { jobs, queued };
    while let Ok((stream, _)) = listener.accept().await {
        let calls = calls.clone();
        let durable = service_fn(move |request| answer_durably(request, calls.clone()));
        tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), durable));
    }
}

async fn answer_durably(request: Request<Incoming>, calls: Calls) -> Result<Response<Body>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    let (reply, answer) = oneshot::channel();
    calls.queued.fetch_add(1, Ordering::SeqCst);
    calls.jobs.send((body, reply)).expect("the floor's call thread");
    let body = answer.await.expect("the floor's answer");
    Ok(Response::builder()
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .expect("a valid response"))
}

/// The log's zeros, a page at a time, synced: as the redo log is made.
fn zero(log: &File) {
    let page = [0; 4096];
    for at in (0..LOG).step_by(page.len()) {
        log.write_all_at(&page, at as u64).expect("the floor's log zeros");
    }
    log.sync_all().expect("the floor's log synced");
}

/// The floor's call thread and what it hands its answers to.
struct CallThread {
    queue: Receiver<Job>,
    queued: Arc<AtomicUsize>,
    log: Arc<File>,
    groups: Sender<Vec<Job>>,
    in_flight: Arc<AtomicUsize>,
}

impl CallThread {
    /// Runs each call's rows and writes its entry, holding its answer; hands the held answers to
    /// the flush thread when the queue empties, at [`MOST_HELD`], or, while no fsync runs, once
    /// they are as many as are queued.
    fn run(&self, rows: &mut impl FnMut()) {
        let entry = [b'x'; ENTRY];
        let (mut at, mut held) = (0, Vec::new());
        loop {
            // Nothing queued: what is held goes to the flush thread before this one waits.
            let next = self.queue.try_recv().or_else(|_| {
                self.hand(&mut held);
                self.queue.recv()
            });
            let Ok(job) = next else { return };
            self.queued.fetch_sub(1, Ordering::SeqCst);
            rows();
            self.log.write_all_at(&entry, at as u64).expect("the floor's log entry");
            at = if at + 2 * ENTRY > LOG { 0 } else { at + ENTRY };
            held.push(job);
            let due = self.queued.load(Ordering::SeqCst).clamp(HAND_OVER.0, HAND_OVER.1);
            let idle = self.in_flight.load(Ordering::SeqCst) == 0;
            if held.len() >= MOST_HELD || (held.len() >= due && idle) {
                self.hand(&mut held);
            }
        }
    }

    fn hand(&self, held: &mut Vec<Job>) {
        if held.is_empty() {
            return;
        }
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let _ = self.groups.send(std::mem::take(held));
    }
}

/// Fsyncs the log once for every group handed over meanwhile, then sends their answers.
fn flush_each(groups: &Receiver<Vec<Job>>, log: &File, in_flight: &AtomicUsize) {
    while let Ok(mut held) = groups.recv() {
        let mut count = 1;
        while let Ok(more) = groups.try_recv() {
            held.extend(more);
            count += 1;
        }
        log.sync_data().expect("the floor's fsync");
        in_flight.fetch_sub(count, Ordering::SeqCst);
        for (body, reply) in held {
            let _ = reply.send(body);
        }
    }
}
