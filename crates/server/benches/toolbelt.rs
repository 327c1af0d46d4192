//! Toolbelt call latency against a bare hyper floor, over real Unix sockets, in one process.
//!
//! Run with `cargo bench -p conduit-server --bench toolbelt`; `BENCH_CALLS=N` sets every case's
//! measured call count (defaults: 2000 for the floor and `read_context`, 500 for `emit`).
//!
//! Every case goes through one measuring loop on one persistent HTTP/1.1 connection, sequentially:
//! - `floor echo`: a bare hyper server that echoes the body, sent the very request `read_context` is;
//! - `read_context` and `emit`: a real execution socket (`execution_router` + `serve`) backed by a
//!   SQLite store, with Work created, claimed and given a token the way the daemon's `claim` does.
//!
//! Every answer must be 200, so a broken setup cannot produce numbers. Nothing here asserts timing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use conduit_config::{default_config_json, parse, CurrentConfig, Snapshot};
use conduit_core::{Execution, Source};
use conduit_scheduler::{claim_next, create_work, renew_lease, HostError, NewWork, LEASE};
use conduit_server::{bind_owner_only, execution_router, now, serve, ExecutionSocket};
use conduit_store::{SqliteStore, Store};
use conduit_toolbelt::{token, Toolbelt};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

/// Unmeasured calls before each case, to warm the connection, caches and the SQLite page cache.
const WARMUP: usize = 200;
const OWNER: &str = "bench";
const READ_CONTEXT: &[u8] = br#"{"operation":"read_context","input":{}}"#;

type Body = Full<Bytes>;

/// The servers run on a multi-threaded runtime, as in the daemon; the client runs on its own thread
/// (this one, with a current-thread runtime), as an agent's `os` process would, so every case pays
/// the same cross-thread hop and the client never competes for a server worker.
fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let servers = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let echo_socket = dir.path().join("echo.sock");
    let (bed, echo_server) = servers.block_on(async {
        let echo = bind_owner_only(&echo_socket).expect("bind echo.sock");
        (Bed::start(dir.path()), tokio::spawn(serve_echo(echo)))
    });
    let rows = client.block_on(run_cases(&echo_socket, &bed.socket, &bed.token));
    // Before the store closes: closing its last connection checkpoints and removes the WAL file.
    print_machine(dir.path());
    drop(client); // closes the client connections, so the graceful shutdown below can finish
    echo_server.abort();
    servers.block_on(bed.stop());
    print_table(&rows);
}

/// The three cases, in order, each on its own persistent connection.
async fn run_cases(echo_socket: &Path, toolbelt_socket: &Path, token: &str) -> [Stats; 3] {
    let (fast, slow) = call_counts();
    let mut echo = Client::connect(echo_socket).await;
    let mut toolbelt = Client::connect(toolbelt_socket).await;
    let read = Bytes::from_static(READ_CONTEXT);
    let floor = measure(&mut echo, "floor echo", fast, |_| call(token, read.clone())).await;
    let read_context = measure(&mut toolbelt, "read_context", fast, |_| call(token, read.clone())).await;
    let emit = measure(&mut toolbelt, "emit", slow, |i| call(token, emit_body(i))).await;
    [floor, read_context, emit]
}

/// Measured calls per case: `(floor and read_context, emit)`.
fn call_counts() -> (usize, usize) {
    match std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
    {
        Some(n) => (n, n),
        None => (2000, 500),
    }
}

/// The request every case sends: a toolbelt call with the execution's bearer token.
fn call(token: &str, body: Bytes) -> Request<Body> {
    Request::post("/v1/toolbelt/call")
        .header(HOST, "localhost")
        .header(CONTENT_TYPE, "application/json")
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(body))
        .expect("a valid request")
}

fn emit_body(i: usize) -> Bytes {
    json!({"operation": "emit", "input": {"type": "demo.bench", "data": {"i": i}}})
        .to_string()
        .into()
}

/// Sends `WARMUP` unmeasured calls, then `calls` timed ones; call `i` is `request(i)`.
async fn measure(
    client: &mut Client,
    case: &'static str,
    calls: usize,
    mut request: impl FnMut(usize) -> Request<Body>,
) -> Stats {
    for i in 0..WARMUP {
        client.send(request(i)).await;
    }
    let mut latencies = Vec::with_capacity(calls);
    let started = Instant::now();
    for i in WARMUP..WARMUP + calls {
        let request = request(i);
        let sent = Instant::now();
        client.send(request).await;
        latencies.push(sent.elapsed());
    }
    let wall = started.elapsed();
    latencies.sort_unstable();
    Stats { case, latencies, wall }
}

/// One persistent HTTP/1.1 connection to a Unix socket.
struct Client {
    sender: SendRequest<Body>,
}

impl Client {
    async fn connect(path: &Path) -> Client {
        let stream = UnixStream::connect(path).await.expect("the socket accepts");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("an HTTP/1.1 handshake");
        tokio::spawn(connection);
        Client { sender }
    }

    /// Sends one request and reads its whole answer, which must be 200.
    async fn send(&mut self, request: Request<Body>) {
        self.sender.ready().await.expect("the connection is open");
        let response = self.sender.send_request(request).await.expect("an answer");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the whole answer")
            .to_bytes();
        assert_eq!(
            status,
            StatusCode::OK,
            "the answer was {}",
            String::from_utf8_lossy(&body)
        );
    }
}

/// The floor: a bare hyper HTTP/1.1 server that answers each request with its own body.
async fn serve_echo(listener: UnixListener) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service_fn(echo)));
    }
}

async fn echo(request: Request<Incoming>) -> Result<Response<Body>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    Ok(Response::builder()
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .expect("a valid response"))
}

/// A claimed attempt whose toolbelt socket is served and whose lease is renewed, as in the daemon.
struct Bed {
    token: String,
    socket: PathBuf,
    stop: oneshot::Sender<()>,
    server: JoinHandle<()>,
    lease: JoinHandle<()>,
}

impl Bed {
    fn start(dir: &Path) -> Bed {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("store.db")).expect("the store opens"));
        let snapshot = parse(default_config_json().as_bytes()).expect("the default config parses");
        let config = CurrentConfig::new(snapshot.at_generation(1));
        let (execution, token) = claim(&*store, &config.get()).expect("create, claim and issue a token");
        let socket = dir.join("toolbelt.sock");
        let router = execution_router(ExecutionSocket {
            toolbelt: Toolbelt::new(
                store.clone(),
                config,
                Arc::new(conduit_server::SystemClock),
                Arc::default(),
            ),
            execution_id: execution.id.clone().into(),
            kick: Arc::new(Notify::new()),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let listener = bind_owner_only(&socket).expect("bind toolbelt.sock");
        let server = tokio::spawn(serve(listener, router, async move {
            let _ = stopped.await;
        }));
        let lease = tokio::spawn(keep_lease(store, execution));
        Bed {
            token,
            socket,
            stop,
            server,
            lease,
        }
    }

    async fn stop(self) {
        self.lease.abort();
        let _ = self.stop.send(());
        let _ = self.server.await;
    }
}

/// Creates `setup`/`shell` Work, claims it and issues its token, in one transaction.
fn claim(store: &dyn Store, config: &Snapshot) -> Result<(Execution, String), HostError> {
    store.write(|tx| {
        let at = now();
        let work = NewWork {
            scope: "setup".into(),
            binding: "shell".into(),
            input: json!({}),
            keys: vec![],
            parent_work: None,
            source: Source::Manual,
            actor: Some("operator:local".into()),
            id_seed: None,
        };
        create_work(tx, config, work, None, at)?;
        let claim = claim_next(tx, config, OWNER, at)?.expect("the Work just created is ready");
        let ops = config.granted_operations(&claim.work.scope, &claim.work.binding);
        let token = token::issue(tx, &claim.execution, &claim.work, ops, None, at)?;
        Ok((claim.execution, token))
    })
}

/// Renews the lease at a third of its length, as the daemon's attempt supervision does, so a long
/// run (a large `BENCH_CALLS`) keeps its authority.
async fn keep_lease(store: Arc<dyn Store>, execution: Execution) {
    let mut every = tokio::time::interval(Duration::from_millis((LEASE.0 / 3) as u64));
    every.tick().await;
    loop {
        every.tick().await;
        let (store, id, epoch) = (store.clone(), execution.id.clone(), execution.epoch);
        let renewed =
            tokio::task::spawn_blocking(move || store.write(|tx| renew_lease(tx, &id, epoch, OWNER, now()))).await;
        assert!(matches!(renewed, Ok(Ok(true))), "the bench's lease was lost");
    }
}

/// One case's sorted latencies and the wall time of its measured calls.
struct Stats {
    case: &'static str,
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Stats {
    /// The nearest-rank percentile `p` (0..=1), in microseconds.
    fn percentile(&self, p: f64) -> f64 {
        let rank = ((p * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        micros(self.latencies[rank - 1])
    }

    fn mean(&self) -> f64 {
        micros(self.latencies.iter().sum::<Duration>()) / self.latencies.len() as f64
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The table; the first row is the floor the ratios divide by.
fn print_table(rows: &[Stats]) {
    let floor = &rows[0];
    let (floor_p50, floor_p99) = (floor.percentile(0.50), floor.percentile(0.99));
    println!(
        "{:<14}{:>6}{:>10}{:>10}{:>10}{:>9}{:>11}{:>11}",
        "case", "calls", "p50(us)", "p99(us)", "mean(us)", "ops/s", "p50/floor", "p99/floor"
    );
    for s in rows {
        let (p50, p99) = (s.percentile(0.50), s.percentile(0.99));
        println!(
            "{:<14}{:>6}{:>10.1}{:>10.1}{:>10.1}{:>9.0}{:>11.2}{:>11.2}",
            s.case,
            s.latencies.len(),
            p50,
            p99,
            s.mean(),
            s.per_second(),
            p50 / floor_p50,
            p99 / floor_p99
        );
    }
}

fn print_machine(dir: &Path) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let wal = if dir.join("store.db-wal").exists() {
        "store.db-wal present"
    } else {
        "NO store.db-wal file"
    };
    println!(
        "machine: nproc={cpus}; temp dir on {}; store: SQLite journal_mode=WAL ({wal}), synchronous=FULL, one connection",
        filesystem(dir)
    );
}

/// The type and device of the filesystem holding `path`, from the longest matching mount point.
fn filesystem(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [device, point, kind, ..] if path.starts_with(point) => Some((point.len(), format!("{kind} ({device})"))),
            _ => None,
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "an unknown filesystem".into(), |(_, fs)| fs)
}
