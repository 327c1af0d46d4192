//! What both benches measure with: process and device counters from `/proc` and `/sys`, and the
//! small parsing and unit helpers around them, and the table both print.

// Each bench is its own crate and uses only part of this module.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::CONTENT_TYPE;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};

/// The limits the daemon serves its sockets with by default.
pub fn bench_limits() -> conduit_server::ConnectionLimits {
    conduit_server::ConnectionLimits::management(&conduit_config::Limits::default())
}

/// A multi-threaded runtime of `workers` threads, every thread of it named `bench-{name}`.
pub fn multi_thread(name: &str, workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(format!("bench-{name}"))
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A call count from the environment (`BENCH_READS=2000`), when set and positive.
pub fn env_count(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0)
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The type and device of the filesystem holding `path`, from the longest matching mount point.
pub fn mount_of(path: &Path) -> Option<(String, String)> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [device, point, kind, ..] if path.starts_with(point) => {
                Some((point.len(), (kind.to_owned(), device.to_owned())))
            }
            _ => None,
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, mount)| mount)
}

/// Process-wide counters, read around a case's measured calls.
#[derive(Clone, Copy)]
pub struct Counters {
    /// CPU time of every thread of this process, user and system.
    pub cpu: Option<Duration>,
    /// Of that, the kernel's (system) time.
    pub sys: Option<Duration>,
    /// Bytes this process has passed to `write` and its kin (`wchar` of `/proc/self/io`).
    pub written: Option<u64>,
    /// Of those, the bytes the store's checkpoint thread copied from its log into the database file.
    pub checkpointed: Option<u64>,
    /// Of those, the bytes the clients' sockets carried, requests and answers (each written once,
    /// by a client or a server). The rest is what the store wrote: its WAL frames and its redo
    /// log's entries (and a direct case's own writes, such as `fsync append`'s).
    pub sockets: Option<u64>,
    /// Flush requests completed by the temp dir's block device.
    pub flushes: Option<u64>,
    /// CPU time of the toolbelt's store thread (`store-calls`), which runs every call's store work
    /// one after another on SQLite: the rate's bound once it is always busy (in the toolbelt
    /// bench's durable floor, its one call thread, `floor-calls`).
    pub store_thread: Option<Duration>,
}

impl Counters {
    pub fn read() -> Counters {
        let times = process_times();
        Counters {
            cpu: times.map(|(cpu, _)| cpu),
            sys: times.map(|(_, sys)| sys),
            // The threads' counts first, so they never exceed the process's, read after them.
            checkpointed: threads_written(|comm| comm == "store-checkpt"),
            sockets: Some(SOCKET_BYTES.load(Ordering::Relaxed)),
            written: process_written(),
            flushes: device_flushes(),
            store_thread: threads_cpu(|comm| matches!(comm, "store-calls" | "floor-calls")),
        }
    }
}

/// CPU time of the live threads `pick` chooses by name, in nanoseconds (`/proc/.../schedstat`'s
/// first field); none alive is zero.
fn threads_cpu(pick: impl Fn(&str) -> bool) -> Option<Duration> {
    let mut total = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if pick(comm.trim_end()) {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            total += Duration::from_nanos(stat.split_whitespace().next()?.parse().ok()?);
        }
    }
    Some(total)
}

/// `utime + stime` and `stime` from one read of `/proc/self/stat`, in clock ticks of 10 ms
/// (`USER_HZ` is 100 on Linux); exited threads' times count too.
fn process_times() -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses: state is the first, utime the 12th.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let user = fields.next()?.parse::<u64>().ok()?;
    let system = fields.next()?.parse::<u64>().ok()?;
    let ticks = |n: u64| Duration::from_millis(n * 10);
    Some((ticks(user + system), ticks(system)))
}

fn process_written() -> Option<u64> {
    wchar(Path::new("/proc/self/io"))
}

/// `wchar` of the threads `pick` chooses by name (Linux keeps 15 bytes of it): the store's
/// checkpoint thread (`store-checkpt`), which copies the log into the database file (the writer's
/// fallback checkpoint, past 20,000 pages, is the only other). It counts live threads only, so a
/// bench keeps one store throughout.
fn threads_written(pick: impl Fn(&str) -> bool) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if pick(comm.trim_end()) {
            total += wchar(&task.path().join("io"))?;
        }
    }
    Some(total)
}

fn wchar(io: &Path) -> Option<u64> {
    let io = std::fs::read_to_string(io).ok()?;
    io.lines().find_map(|l| l.strip_prefix("wchar:"))?.trim().parse().ok()
}

/// Flush requests completed by the block device under the temp dir (field 16 of its `stat`), when
/// known. Device-wide: other processes' flushes count too.
fn device_flushes() -> Option<u64> {
    static STAT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let stat = STAT.get_or_init(|| {
        let (_, device) = mount_of(&std::env::temp_dir())?;
        Some(
            Path::new("/sys/class/block")
                .join(Path::new(&device).file_name()?)
                .join("stat"),
        )
    });
    let stat = std::fs::read_to_string(stat.as_ref()?).ok()?;
    stat.split_whitespace().nth(15)?.parse().ok()
}

/// The nearest-rank percentile `p` (0..=1) of `sorted` latencies, in microseconds.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    micros(sorted[rank - 1])
}

/// One case's sorted latencies, when its measured calls started and ended, and the counters then.
pub struct Stats {
    pub case: &'static str,
    pub latencies: Vec<Duration>,
    pub started: Instant,
    pub ended: Instant,
    pub before: Counters,
    pub after: Counters,
}

impl Stats {
    /// The clients of one concurrent case as one: every latency, from the first start to the last end.
    pub fn merge(each: Vec<Stats>) -> Stats {
        let case = each[0].case;
        let started = each.iter().map(|s| s.started).min().expect("a client");
        let ended = each.iter().map(|s| s.ended).max().expect("a client");
        // Every client reads the counters after the common start and before its first call.
        let before = Counters {
            cpu: least(each.iter().map(|s| s.before.cpu)),
            sys: least(each.iter().map(|s| s.before.sys)),
            written: least(each.iter().map(|s| s.before.written)),
            checkpointed: least(each.iter().map(|s| s.before.checkpointed)),
            sockets: least(each.iter().map(|s| s.before.sockets)),
            flushes: least(each.iter().map(|s| s.before.flushes)),
            store_thread: least(each.iter().map(|s| s.before.store_thread)),
        };
        let after = Counters {
            cpu: least(each.iter().map(|s| s.after.cpu.map(Reverse))).map(|c| c.0),
            sys: least(each.iter().map(|s| s.after.sys.map(Reverse))).map(|c| c.0),
            written: least(each.iter().map(|s| s.after.written.map(Reverse))).map(|w| w.0),
            checkpointed: least(each.iter().map(|s| s.after.checkpointed.map(Reverse))).map(|w| w.0),
            sockets: least(each.iter().map(|s| s.after.sockets.map(Reverse))).map(|w| w.0),
            flushes: least(each.iter().map(|s| s.after.flushes.map(Reverse))).map(|f| f.0),
            store_thread: least(each.iter().map(|s| s.after.store_thread.map(Reverse))).map(|t| t.0),
        };
        let mut latencies: Vec<Duration> = each.into_iter().flat_map(|s| s.latencies).collect();
        latencies.sort_unstable();
        Stats {
            case,
            latencies,
            started,
            ended,
            before,
            after,
        }
    }

    /// The nearest-rank percentile `p` (0..=1), in microseconds.
    pub fn percentile(&self, p: f64) -> f64 {
        percentile(&self.latencies, p)
    }

    pub fn mean(&self) -> f64 {
        micros(self.latencies.iter().sum::<Duration>()) / self.latencies.len() as f64
    }

    pub fn wall(&self) -> Duration {
        self.ended - self.started
    }

    pub fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall().as_secs_f64()
    }

    /// Process CPU time (every thread, user and system) per measured call, in microseconds.
    pub fn cpu_per_call(&self) -> String {
        let cpu = self.before.cpu.zip(self.after.cpu);
        cpu.map_or_else(
            || "-".into(),
            |(b, a)| format!("{:.0}", micros(a - b) / self.latencies.len() as f64),
        )
    }

    /// The store thread's CPU time per measured call, in microseconds.
    pub fn store_thread_per_call(&self) -> String {
        let spent = self.before.store_thread.zip(self.after.store_thread);
        spent.map_or_else(
            || "-".into(),
            |(b, a)| format!("{:.0}", micros(a.saturating_sub(b)) / self.latencies.len() as f64),
        )
    }

    /// The kernel's share of that CPU time, in percent: system calls, context switches, wakeups.
    pub fn system_share(&self) -> String {
        let spent = |c: &Counters| c.cpu.zip(c.sys);
        match spent(&self.before).zip(spent(&self.after)) {
            Some(((cpu0, sys0), (cpu1, sys1))) if cpu1 > cpu0 => {
                let sys = sys1.saturating_sub(sys0).as_secs_f64();
                format!("{:.0}", 100.0 * sys / (cpu1 - cpu0).as_secs_f64())
            }
            _ => "-".into(),
        }
    }

    /// Bytes the store wrote per measured call but by the checkpoint, in KiB: its WAL frames and its
    /// redo log's entries.
    pub fn stored_per_call(&self) -> String {
        let stored = |c: &Counters| Some(c.written?.saturating_sub(c.checkpointed? + c.sockets?));
        self.kib_per_call(stored(&self.before), stored(&self.after))
    }

    /// Bytes written to the sockets per measured call, in KiB: requests and answers.
    pub fn sent_per_call(&self) -> String {
        self.kib_per_call(self.before.sockets, self.after.sockets)
    }

    /// Bytes the checkpoint copied into the database file per measured call, in KiB.
    pub fn checkpointed_per_call(&self) -> String {
        self.kib_per_call(self.before.checkpointed, self.after.checkpointed)
    }

    fn kib_per_call(&self, before: Option<u64>, after: Option<u64>) -> String {
        before.zip(after).map_or_else(
            || "-".into(),
            |(b, a)| {
                format!(
                    "{:.1}",
                    a.saturating_sub(b) as f64 / 1024.0 / self.latencies.len() as f64
                )
            },
        )
    }

    /// Device flush requests per measured call.
    pub fn flushes_per_call(&self) -> String {
        let flushes = self.before.flushes.zip(self.after.flushes);
        flushes.map_or_else(
            || "-".into(),
            |(b, a)| format!("{:.2}", (a - b) as f64 / self.latencies.len() as f64),
        )
    }
}

/// The smallest of `values`, or `None` when one of them is unknown.
pub fn least<T: Ord>(values: impl Iterator<Item = Option<T>>) -> Option<T> {
    values.collect::<Option<Vec<T>>>()?.into_iter().min()
}

/// What the counter columns of both benches' tables mean, for the block device under the temp dir.
pub fn columns_legend(device: &str) -> String {
    format!(
        "cpu/op: this process's CPU time (all threads, user + system) per call, us; sys%: the kernel's \
         share of it (system calls, context switches and wakeups, the block device's requests); \
         store/op: the CPU time of the toolbelt's store thread (`store-calls`) per call, us; \
         store KiB: KiB the store wrote per call (/proc/self/io wchar but the store's checkpoint thread's \
         and the sockets'): the WAL's frames and the redo log's entries (a direct case's: its own writes); \
         sock KiB: KiB the clients' sockets carried per call, requests and answers; db KiB: \
         KiB the checkpoint thread copied from the WAL into the database file per call; flush/op: flush requests completed by \
         {device} per call, device-wide (other processes' count too)"
    )
}

/// The table of cases run one call at a time; the first row is the floor the ratios divide by.
pub fn print_table(rows: &[Stats]) {
    let floor = &rows[0];
    let (floor_p50, floor_p99) = (floor.percentile(0.50), floor.percentile(0.99));
    println!(
        "{:<16}{:>6}{:>10}{:>10}{:>10}{:>9}{:>11}{:>11}{:>8}{:>6}{:>9}{:>10}{:>9}{:>8}{:>9}",
        "case",
        "calls",
        "p50(us)",
        "p99(us)",
        "mean(us)",
        "ops/s",
        "p50/floor",
        "p99/floor",
        "cpu/op",
        "sys%",
        "store/op",
        "store KiB",
        "sock KiB",
        "db KiB",
        "flush/op"
    );
    for s in rows {
        let (p50, p99) = (s.percentile(0.50), s.percentile(0.99));
        println!(
            "{:<16}{:>6}{:>10.1}{:>10.1}{:>10.1}{:>9.0}{:>11.2}{:>11.2}{:>8}{:>6}{:>9}{:>10}{:>9}{:>8}{:>9}",
            s.case,
            s.latencies.len(),
            p50,
            p99,
            s.mean(),
            s.per_second(),
            p50 / floor_p50,
            p99 / floor_p99,
            s.cpu_per_call(),
            s.system_share(),
            s.store_thread_per_call(),
            s.stored_per_call(),
            s.sent_per_call(),
            s.checkpointed_per_call(),
            s.flushes_per_call()
        );
    }
}

/// The HTTP body every bench request carries.
pub type Body = Full<Bytes>;

/// One persistent HTTP/1.1 connection to a Unix socket.
pub struct Client {
    sender: SendRequest<Body>,
}

/// Bytes every bench client has moved over its socket, both ways: requests and answers.
static SOCKET_BYTES: AtomicU64 = AtomicU64::new(0);

/// A client's socket, counting what passes through it into [`SOCKET_BYTES`]. Counted here, at the
/// client, because server threads cannot be told apart by name (a worker that blocks in place, as
/// the `echo in place` floor does, hands its core to another thread) and `rchar` does not count
/// `recv`.
struct Counted(UnixStream);

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.0).poll_read(cx, buf);
        SOCKET_BYTES.fetch_add((buf.filled().len() - before) as u64, Ordering::Relaxed);
        read
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.0).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            SOCKET_BYTES.fetch_add(n as u64, Ordering::Relaxed);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Client {
    pub async fn connect(path: &Path) -> Client {
        let stream = UnixStream::connect(path).await.expect("the socket accepts");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(Counted(stream)))
            .await
            .expect("an HTTP/1.1 handshake");
        tokio::spawn(connection);
        Client { sender }
    }

    /// Sends one request and reads its whole answer.
    pub async fn send(&mut self, request: Request<Body>) -> (StatusCode, Bytes) {
        self.sender.ready().await.expect("the connection is open");
        let response = self.sender.send_request(request).await.expect("an answer");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the whole answer")
            .to_bytes();
        (status, body)
    }

    /// Sends one request, whose answer must be 200.
    pub async fn send_ok(&mut self, request: Request<Body>) {
        let (status, body) = self.send(request).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "the answer was {}",
            String::from_utf8_lossy(&body)
        );
    }
}

/// A bare hyper HTTP/1.1 server that reads each request and answers `answer`, after `hops` round
/// trips to a blocking thread: the floor of a case that answers those very bytes.
pub async fn serve_answer(listener: UnixListener, answer: Bytes, hops: usize) {
    while let Ok((stream, _)) = listener.accept().await {
        let answer = answer.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let answer = answer.clone();
            async move {
                request.into_body().collect().await?;
                for _ in 0..hops {
                    tokio::task::spawn_blocking(|| std::hint::black_box(0))
                        .await
                        .expect("a blocking thread");
                }
                Ok::<_, hyper::Error>(json_response(answer))
            }
        });
        tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
    }
}

/// A 200 answer of JSON `body`.
pub fn json_response(body: Bytes) -> Response<Body> {
    Response::builder()
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .expect("a valid response")
}
