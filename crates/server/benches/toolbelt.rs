//! Toolbelt call latency and throughput against their physical floors, over real Unix sockets, in one
//! process.
//!
//! Run with `cargo bench -p conduit-server --bench toolbelt`. `BENCH_CALLS=N` sets the measured call
//! count of every sequential case (defaults: 2000 for the echo floor, `read_context` and the token
//! cases, `echo, answer` and the rows floors; 500 for `emit` and the fsync floors); `BENCH_CLIENT_CALLS=N` sets the measured calls of each
//! client in the concurrent `emit` cases (default 300).
//!
//! Every case goes through one measuring loop, [`measure`]. Sequential cases, one call after another:
//! - `floor echo`: a bare hyper server that echoes the body, sent the very request `read_context` is;
//! - `echo + hop`: the same, the body handed to a blocking thread (`spawn_blocking`) and back before
//!   the answer, the crossing every store call makes (DESIGN.md: the store is reached through
//!   `spawn_blocking` or a thread of its own, never on the runtime);
//! - `echo in place`: the same, the body run through `tokio::task::block_in_place` (on the worker,
//!   its other tasks handed to another thread first), the crossing measured and not kept
//!   (docs/decisions.md: it cost the daemon's memory goals);
//! - `echo, answer`: a bare hyper server answering the read's request with the very bytes
//!   `read_context` answers, so a read less it is the read's own work ([`print_made_of`]);
//! - `read_context` and `emit`: a real execution socket (`execution_router` + `serve`) backed by a
//!   SQLite store, with Work created, claimed and given a token the way the daemon's `claim` does;
//! - `fsync append` and `fsync rewrite`: 100 bytes written to a file in the same temp dir, then
//!   `sync_data`, the cost of one durable commit per call without group commit;
//! - `token check` and `token digest`: the bearer check in process (SHA-256 and the digest lookup in
//!   a read transaction), and the hashing alone;
//! - `rows floor` and `read rows floor`: the SQLite statements an `emit`'s and a `read_context`'s
//!   rules run, prepared once on a bare connection ([`rows`]): the floor of the store thread's CPU
//!   per call (`store/op`).
//!
//! With `BENCH_STORED_EVENTS=N` (say 10000000; it takes minutes and a few GiB of disk), the store is
//! then filled with N more events and `emit` runs again (`emit, filled`), to compare with `emit`.
//!
//! Then `emit` from 1, 8 and 32 executions at once: each its own claimed Work, token and socket, and
//! its own client task with its own connection, all starting together. Its floor: the same requests
//! from 32 connections at once to each echo (bare, with the hop, in place), the most calls a second
//! this machine answers over these sockets with nothing behind them. And its durable floor
//! ([`durable`]): the same requests to an echo whose bodies cross to one thread that runs an
//! emit's rows (the rows floor) and writes a log entry, answered after a shared fsync: the daemon's
//! pipeline with nothing of the daemon's own.
//!
//! Every answer must be 200, so a broken setup cannot produce numbers. Nothing here asserts timing.

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod durable;
mod rows;

use common::{
    bench_limits, columns_legend, env_count, json_response, mount_of, multi_thread, print_table, serve_answer, Body,
    Client, Counters, Stats,
};
use std::fs::File;
use std::future::Future;
use std::hint::black_box;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use conduit_config::{default_config_json, parse, CurrentConfig, Snapshot};
use conduit_core::Execution;
use conduit_scheduler::{claim_next, create_work, renew_lease, HostError, Lessee, NewWork, DEFAULT_LEASE};
use conduit_server::{bind_owner_only, execution_router, now, serve, ExecutionSocket};
use conduit_store::Store;
use conduit_store_postgres::testing::TestDatabase;
use conduit_store_postgres::PostgresStore;
use conduit_store_sqlite::SqliteStore;
use conduit_toolbelt::{checks, token, Presented, Toolbelt};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::UnixListener;
use tokio::runtime::Runtime;
use tokio::sync::{oneshot, Barrier, Notify};
use tokio::task::JoinHandle;

/// Unmeasured calls before each sequential case, to warm the connection, caches and the SQLite page
/// cache.
const WARMUP: usize = 200;
/// Unmeasured calls of each client of a concurrent case, before all of them start together.
const CLIENT_WARMUP: usize = 20;
/// How many executions emit at once, case by case; the first is the baseline of the speedup.
const EXECUTIONS: [usize; 3] = [1, 8, 32];
/// The default configuration's chain limit (600 events a minute) would refuse the bench's emits.
const CAUSAL_PER_MINUTE: u32 = 1_000_000;
const OWNER: &str = "bench";
const READ_CONTEXT: &[u8] = br#"{"operation":"read_context","input":{}}"#;

/// The servers run on a multi-threaded runtime, as in the daemon. The sequential client runs on this
/// thread with a current-thread runtime, as an agent's `os` process would, so every case pays the
/// same cross-thread hop and the client never competes for a server worker. The concurrent clients
/// run on a multi-threaded runtime of their own, so they really send at the same time.
fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (servers, clients) = (multi_thread("server", cpus), multi_thread("client", cpus));
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).expect("the store opens"));
    let config = bench_config();
    let echo_sockets =
        [Hop::None, Hop::Blocking, Hop::InPlace].map(|hop| (hop, dir.path().join(format!("echo-{hop:?}.sock"))));
    let durable_socket = dir.path().join("durable.sock");
    let (beds, echo_servers, durable_server) = servers.block_on(async {
        let echoes = echo_sockets.clone().map(|(hop, socket)| {
            let listener = bind_owner_only(&socket).expect("bind an echo socket");
            tokio::spawn(serve_echo(listener, hop))
        });
        let durable = start_durable_floor(dir.path(), &durable_socket);
        let beds = ["reader", "emitter"].map(|name| Bed::start(&store, false, &config, dir.path(), name));
        (beds, echoes, durable)
    });
    let [(_, echo_socket), (_, hop_socket), (_, in_place_socket)] = &echo_sockets;
    let answer_socket = dir.path().join("echo-answer.sock");
    let answer = client.block_on(read_answer(&beds[0]));
    let answer_server = {
        let _runtime = servers.enter();
        let listener = bind_owner_only(&answer_socket).expect("bind the answer's echo socket");
        servers.spawn(serve_answer(listener, answer.clone(), 0))
    };
    let rows = client.block_on(run_cases(
        dir.path(),
        [echo_socket, hop_socket, in_place_socket, &answer_socket],
        &beds,
        &*store,
    ));
    let on_sqlite = (std::slice::from_ref(&store), false);
    let together = EXECUTIONS.map(|n| emit_together(&servers, &clients, on_sqlite, &config, dir.path(), n));
    // The floor of the concurrent case: the echoes, as many connections at once.
    let most = EXECUTIONS[EXECUTIONS.len() - 1];
    let echoes_at_once = [echo_socket, hop_socket, in_place_socket]
        .map(|socket| emits_at_once(&clients, vec![(socket.clone(), beds[0].token.clone()); most]));
    let durable_at_once = emits_at_once(&clients, vec![(durable_socket, beds[0].token.clone()); most]);
    // With a test server (`OPEN_CONDUIT_TEST_POSTGRES`): the same emits on PostgreSQL, through one
    // store, then through two on one database, as two daemons would share it.
    let on_postgres = TestDatabase::create().map(|db| {
        let open =
            || -> Arc<dyn Store> { Arc::new(PostgresStore::open(&db.url()).expect("the PostgreSQL store opens")) };
        let (one, two) = ([open()], [open(), open()]);
        let runs = [&one[..], &two[..]].map(|stores| {
            // Sockets of their own, beside the SQLite cases' ones.
            let beds = dir.path().join(format!("postgres-{}", stores.len()));
            std::fs::create_dir(&beds).expect("a directory for the PostgreSQL beds");
            EXECUTIONS.map(|n| emit_together(&servers, &clients, (stores, true), &config, &beds, n))
        });
        (db, runs)
    });
    // Before the store closes: closing its last connection checkpoints and removes the WAL file.
    print_machine(dir.path());
    drop(client); // closes the client connections, so the graceful shutdown below can finish
    drop(clients);
    for echo in echo_servers {
        echo.abort();
    }
    answer_server.abort();
    durable_server.abort();
    servers.block_on(async {
        for bed in beds {
            bed.stop().await;
        }
    });
    print_table(&rows);
    print_made_of(&rows, answer.len());
    print_together(&together, &rows, &echoes_at_once);
    print_durable_floor(&together, &durable_at_once);
    if let Some((_db, [one, two])) = &on_postgres {
        println!("\non PostgreSQL (a server on a Unix socket on this machine; the KiB columns count only this process's writes):");
        print_together(one, &rows, &echoes_at_once);
        println!("\non PostgreSQL, the executions split between two stores on one database, as two daemons:");
        print_together(two, &rows, &echoes_at_once);
    }
}

/// The default configuration, with a chain rate limit the bench cannot reach.
fn bench_config() -> CurrentConfig {
    let mut config: serde_json::Value =
        serde_json::from_str(default_config_json()).expect("the default config is JSON");
    config["limits"]["causal_per_minute"] = json!(CAUSAL_PER_MINUTE);
    let snapshot = parse(config.to_string().as_bytes()).expect("the bench config parses");
    CurrentConfig::new(snapshot.at_generation(1))
}

/// The sequential cases, in order, each on its own persistent connection or called in process.
/// `emit` has an execution of its own: every toolbelt call adds records to its execution's causal
/// chain, and an emit's rate check counts the chain's last minute, so `read_context` calls made
/// before it on the same execution would slow it.
async fn run_cases(
    dir: &Path,
    [echo_socket, hop_socket, in_place_socket, answer_socket]: [&Path; 4],
    [reader, emitter]: &[Bed; 2],
    store: &dyn Store,
) -> Vec<Stats> {
    let (fast, slow) = call_counts();
    let token = reader.token.as_str();
    let block = [b'x'; 100];
    let mut appended = File::create(dir.join("fsync-append")).expect("a file to append to");
    let mut append = Direct(|| {
        appended.write_all(&block).expect("an append");
        appended.sync_data().expect("an fsync");
    });
    let rewritten = File::create(dir.join("fsync-rewrite")).expect("a file to rewrite");
    let mut rewrite = Direct(|| {
        rewritten.write_all_at(&block, 0).expect("a rewrite");
        rewritten.sync_data().expect("an fsync");
    });
    let mut check = Direct(|| {
        let live =
            store.read(|tx| checks::live_token(tx, &reader.execution_id, &Presented::new(black_box(token)), now()));
        black_box(live.expect("the token is live"));
    });
    let mut digest = Direct(|| {
        black_box(token::digest(black_box(token)));
    });
    let (mut emit_rows, mut read_rows) = (
        rows::Rows::open(dir, "floor.db"),
        rows::Rows::open(dir, "read-floor.db"),
    );
    let mut floor = Direct(|| emit_rows.emit());
    let mut read_floor = Direct(|| read_rows.read());
    // Each HTTP case connects just before it runs: a daemon closes a connection left idle.
    let emit = || Http::connect(&emitter.socket, |i| call(&emitter.token, emit_body(i)));
    let reads = [
        (echo_socket, "floor echo"),
        (hop_socket, "echo + hop"),
        (in_place_socket, "echo in place"),
        (answer_socket, "echo, answer"),
        (&reader.socket, "read_context"),
    ];
    let mut rows = Vec::new();
    for (socket, case) in reads {
        rows.push(measure(&mut reading(socket, token).await, case, WARMUP, fast, None).await);
    }
    rows.extend([
        measure(&mut emit().await, "emit", WARMUP, slow, None).await,
        measure(&mut append, "fsync append", WARMUP, slow, None).await,
        measure(&mut rewrite, "fsync rewrite", WARMUP, slow, None).await,
        measure(&mut check, "token check", WARMUP, fast, None).await,
        measure(&mut digest, "token digest", WARMUP, fast, None).await,
        measure(&mut floor, "rows floor", WARMUP, fast, None).await,
        measure(&mut read_floor, "read rows floor", WARMUP, fast, None).await,
    ]);
    if let Some(stored) = env_count("BENCH_STORED_EVENTS") {
        fill_events(&dir.join("store.db"), stored);
        rows.push(measure(&mut emit().await, "emit, filled", WARMUP, slow, None).await);
    }
    rows
}

/// Adds `count` events to the store behind its back (1,000 Works' worth, each with its key), so the
/// `emit` case can run again over a large store. Short transactions of 50,000 each, so the beds'
/// lease renewals get the write lock in between; progress every million on stderr.
fn fill_events(store: &Path, count: usize) {
    let conn = rusqlite::Connection::open(store).expect("the store opens beside the bench");
    conn.busy_timeout(Duration::from_secs(30)).expect("a busy timeout");
    let mut added = 0;
    while added < count {
        let chunk = (count - added).min(50_000);
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
             INSERT INTO events (id, type, source, scope, work_id, correlation_key, root_id, depth, data, accepted_at)
             SELECT 'fill-' || i, 'demo.filled', 'core.manual', 'setup', 'fill-work-' || (i % 1000),
                    'fill-key-' || (i % 1000), 'fill-' || i, 0, '{\"i\":' || i || '}', 1 FROM n",
            rusqlite::params![added as i64, (added + chunk - 1) as i64],
        )
        .expect("the fill");
        added += chunk;
        if added % 1_000_000 == 0 || added == count {
            eprintln!("filled {added} of {count} events");
        }
    }
}

/// `emit` from `n` executions at once: `n` claimed Work, each with its own token, served socket and
/// renewed lease; `n` client tasks on the client runtime, each on its own connection, measured from
/// a common start after their warmup.
fn emit_together(
    servers: &Runtime,
    clients: &Runtime,
    (stores, shared): (&[Arc<dyn Store>], bool),
    config: &CurrentConfig,
    dir: &Path,
    n: usize,
) -> Stats {
    // Execution i is served by store i mod their count: each store as one daemon's.
    let beds: Vec<Bed> = servers.block_on(async {
        (0..n)
            .map(|i| {
                Bed::start(
                    &stores[i % stores.len()],
                    shared,
                    config,
                    dir,
                    &format!("x{n}-{i}-of-{}", stores.len()),
                )
            })
            .collect()
    });
    let targets = beds.iter().map(|bed| (bed.socket.clone(), bed.token.clone())).collect();
    let stats = emits_at_once(clients, targets);
    servers.block_on(async {
        for bed in beds {
            bed.stop().await;
        }
    });
    stats
}

/// Each target `(socket, token)` sent [`client_calls`] emits on a connection of its own, all
/// starting together.
fn emits_at_once(clients: &Runtime, targets: Vec<(PathBuf, String)>) -> Stats {
    let calls = client_calls();
    clients.block_on(async {
        let start = Arc::new(Barrier::new(targets.len()));
        let tasks: Vec<JoinHandle<Stats>> = targets
            .into_iter()
            .map(|(socket, token)| {
                let start = start.clone();
                tokio::spawn(async move {
                    let mut emit = Http::connect(&socket, move |i| call(&token, emit_body(i))).await;
                    measure(&mut emit, "emit", CLIENT_WARMUP, calls, Some(&start)).await
                })
            })
            .collect();
        let mut each = Vec::with_capacity(tasks.len());
        for task in tasks {
            each.push(task.await.expect("a client task"));
        }
        Stats::merge(each)
    })
}

/// Measured calls per sequential case: `(floor, read_context and token cases; emit and fsync)`.
fn call_counts() -> (usize, usize) {
    env_count("BENCH_CALLS").map_or((2000, 500), |n| (n, n))
}

/// Measured calls of each client in a concurrent case.
fn client_calls() -> usize {
    env_count("BENCH_CLIENT_CALLS").unwrap_or(300)
}

/// A connection to `socket` that sends `read_context` with `token`.
async fn reading<'a>(socket: &Path, token: &'a str) -> Http<impl FnMut(usize) -> Request<Body> + 'a> {
    Http::connect(socket, move |_| call(token, Bytes::from_static(READ_CONTEXT))).await
}

/// The request every HTTP case sends: a toolbelt call with the execution's bearer token.
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

/// What a case measures: `prepare(i)` readies call `i` outside the timing, `call` makes it.
trait Probe {
    type Call;
    fn prepare(&mut self, i: usize) -> Self::Call;
    fn call(&mut self, call: Self::Call) -> impl Future<Output = ()> + Send;
}

/// Sends `warmup` unmeasured calls, waits for `start` (the other clients of a concurrent case), then
/// makes `calls` timed ones.
async fn measure(
    probe: &mut impl Probe,
    case: &'static str,
    warmup: usize,
    calls: usize,
    start: Option<&Barrier>,
) -> Stats {
    for i in 0..warmup {
        let call = probe.prepare(i);
        probe.call(call).await;
    }
    if let Some(start) = start {
        start.wait().await;
    }
    let mut latencies = Vec::with_capacity(calls);
    let before = Counters::read();
    let started = Instant::now();
    for i in warmup..warmup + calls {
        let call = probe.prepare(i);
        let sent = Instant::now();
        probe.call(call).await;
        latencies.push(sent.elapsed());
    }
    let ended = Instant::now();
    let after = Counters::read();
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

/// HTTP calls on one persistent connection; call `i` is `request(i)`.
struct Http<F> {
    client: Client,
    request: F,
}

impl<F: FnMut(usize) -> Request<Body>> Http<F> {
    async fn connect(path: &Path, request: F) -> Http<F> {
        Http {
            client: Client::connect(path).await,
            request,
        }
    }
}

impl<F: FnMut(usize) -> Request<Body>> Probe for Http<F> {
    type Call = Request<Body>;

    fn prepare(&mut self, i: usize) -> Request<Body> {
        (self.request)(i)
    }

    fn call(&mut self, request: Request<Body>) -> impl Future<Output = ()> + Send {
        self.client.send_ok(request)
    }
}

/// A function called in process, on the measuring thread: no socket, no HTTP, no thread hop.
struct Direct<F>(F);

impl<F: FnMut()> Probe for Direct<F> {
    type Call = ();

    fn prepare(&mut self, _: usize) {}

    fn call(&mut self, (): ()) -> impl Future<Output = ()> + Send {
        (self.0)();
        std::future::ready(())
    }
}

/// Whether an echo crosses to a blocking thread and back, or runs its body in place, before it answers.
#[derive(Clone, Copy, Debug)]
enum Hop {
    None,
    Blocking,
    InPlace,
}

/// The floor: a bare hyper HTTP/1.1 server that answers each request with its own body.
async fn serve_echo(listener: UnixListener, hop: Hop) {
    while let Ok((stream, _)) = listener.accept().await {
        let echo = service_fn(move |request| echo(request, hop));
        tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), echo));
    }
}

/// The body of a `read_context` answered to `bed`.
async fn read_answer(bed: &Bed) -> Bytes {
    let request = call(&bed.token, Bytes::from_static(READ_CONTEXT));
    let (status, answer) = Client::connect(&bed.socket).await.send(request).await;
    assert_eq!(
        status,
        hyper::StatusCode::OK,
        "the read was refused: {}",
        String::from_utf8_lossy(&answer)
    );
    answer
}

async fn echo(request: Request<Incoming>, hop: Hop) -> Result<Response<Body>, hyper::Error> {
    let mut body = request.into_body().collect().await?.to_bytes();
    if let Hop::Blocking = hop {
        body = tokio::task::spawn_blocking(move || body)
            .await
            .expect("the blocking hop");
    }
    if let Hop::InPlace = hop {
        body = tokio::task::block_in_place(move || body);
    }
    Ok(json_response(body))
}

/// What a daemon on a shared store asks before each call: the store's latest generation number (the
/// bench publishes none, so there is never one to catch up with).
struct LatestGeneration(Arc<dyn Store>, bool);

impl conduit_toolbelt::Generations for LatestGeneration {
    fn shared(&self) -> bool {
        self.1
    }

    fn catch_up(&self) -> Result<(), conduit_core::Refusal> {
        let latest = self.0.read(|tx| tx.latest_generation_number());
        latest.map(drop).map_err(|_| conduit_core::Refusal::internal())
    }
}

/// A claimed attempt whose own toolbelt socket is served and whose lease is renewed, as in the daemon.
struct Bed {
    execution_id: String,
    token: String,
    socket: PathBuf,
    stop: oneshot::Sender<()>,
    server: JoinHandle<()>,
    lease: JoinHandle<()>,
}

impl Bed {
    /// Claims new Work in `store` and serves its socket `<name>.sock`; call it on the servers' runtime.
    /// On a `shared` store, each call first reads the latest generation, as a daemon's does.
    fn start(store: &Arc<dyn Store>, shared: bool, config: &CurrentConfig, dir: &Path, name: &str) -> Bed {
        let (execution, token) = claim(&**store, &config.get()).expect("create, claim and issue a token");
        let socket = dir.join(format!("{name}.sock"));
        let router = execution_router(ExecutionSocket {
            toolbelt: Toolbelt::new(
                store.clone(),
                config.clone(),
                Arc::new(conduit_server::SystemClock),
                Arc::default(),
            )
            .with_generations(Arc::new(LatestGeneration(store.clone(), shared))),
            execution_id: execution.id.clone().into(),
            kick: Arc::new(Notify::new()),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let listener = bind_owner_only(&socket).expect("bind an execution socket");
        let server = tokio::spawn(serve(listener, router, bench_limits(), async move {
            let _ = stopped.await;
        }));
        let execution_id = execution.id.clone();
        let lease = tokio::spawn(keep_lease(store.clone(), execution));
        Bed {
            execution_id,
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
        let work = NewWork::manual("setup", "shell", json!({}), Some("operator:local".into()));
        create_work(tx, config, work, None, at)?;
        let claim = claim_next(tx, config, &Lessee::new(OWNER), at)?.expect("the Work just created is ready");
        let ops = config.granted_operations(&claim.work.scope, &claim.work.binding);
        let token = token::issue(tx, &claim.execution, &claim.work, ops, None, at)?;
        Ok((claim.execution, token))
    })
}

/// Renews the lease at a third of its length, as the daemon's attempt supervision does, so a long
/// run (a large `BENCH_CALLS`) keeps its authority.
async fn keep_lease(store: Arc<dyn Store>, execution: Execution) {
    let mut every = tokio::time::interval(Duration::from_millis((DEFAULT_LEASE.0 / 3) as u64));
    every.tick().await;
    loop {
        every.tick().await;
        let (store, id, epoch) = (store.clone(), execution.id.clone(), execution.epoch);
        let renewed = tokio::task::spawn_blocking(move || {
            store.write(|tx| renew_lease(tx, &id, epoch, &Lessee::new(OWNER), now()))
        })
        .await;
        assert!(matches!(renewed, Ok(Ok(true))), "the bench's lease was lost");
    }
}

/// The concurrent table: aggregate throughput against one execution's, against one fsync per call,
/// and against the echoes answering as many connections at once (`[bare, hop, in place]`).
fn print_together(together: &[Stats], rows: &[Stats], [echo, hop, in_place]: &[Stats; 3]) {
    let single = together[0].per_second();
    let fsync = rows
        .iter()
        .find(|s| s.case == "fsync append")
        .map_or(f64::NAN, Stats::per_second);
    println!();
    println!(
        "emit from N executions at once: each its own Work, token, socket and connection, {} calls each",
        client_calls()
    );
    println!(
        "{:<6}{:>7}{:>9}{:>9}{:>10}{:>10}{:>9}{:>9}{:>8}{:>6}{:>9}{:>10}{:>9}{:>8}{:>9}",
        "N",
        "calls",
        "wall(s)",
        "ops/s",
        "p50(us)",
        "p99(us)",
        "vs N=1",
        "vs fsync",
        "cpu/op",
        "sys%",
        "store/op",
        "store KiB",
        "sock KiB",
        "db KiB",
        "flush/op"
    );
    for (n, s) in EXECUTIONS.iter().zip(together) {
        println!(
            "{:<6}{:>7}{:>9.2}{:>9.0}{:>10.1}{:>10.1}{:>9.2}{:>9.2}{:>8}{:>6}{:>9}{:>10}{:>9}{:>8}{:>9}",
            n,
            s.latencies.len(),
            s.wall().as_secs_f64(),
            s.per_second(),
            s.percentile(0.50),
            s.percentile(0.99),
            s.per_second() / single,
            s.per_second() / fsync,
            s.cpu_per_call(),
            s.system_share(),
            s.store_thread_per_call(),
            s.stored_per_call(),
            s.sent_per_call(),
            s.checkpointed_per_call(),
            s.flushes_per_call()
        );
    }
    let most = together.last().expect("a concurrent case");
    println!(
        "emit at N={}: {:.0} ops/s = {:.2}x the bare `fsync append` rate ({:.0} ops/s); above 1.00, commits share fsyncs",
        EXECUTIONS[EXECUTIONS.len() - 1],
        most.per_second(),
        most.per_second() / fsync,
        fsync
    );
    println!(
        "floor at N={0}: the bare echo answers {1:.0} calls/s from {0} connections at once ({2} us CPU a call), \
         {3:.0} with its body handed to a blocking thread ({4} us), {5:.0} with its body in place ({6} us); \
         emit at N={0} is {7:.2}x the bare echo's rate",
        EXECUTIONS[EXECUTIONS.len() - 1],
        echo.per_second(),
        echo.cpu_per_call(),
        hop.per_second(),
        hop.cpu_per_call(),
        in_place.per_second(),
        in_place.cpu_per_call(),
        most.per_second() / echo.per_second()
    );
}

/// What the sequential goal rows are made of, from the p50s of `rows`: a read is the echo of its
/// answer's bytes and its own work; an emit is set beside the floor of one call with its fsync off
/// the runtime's workers (the daemon's, one call at a time: its rows in place, the fsync on the flush
/// thread, a crossing there and back).
fn print_made_of(rows: &[Stats], answer_bytes: usize) {
    let p50 = |case: &str| {
        rows.iter()
            .find(|s| s.case == case)
            .map_or(f64::NAN, |s| s.percentile(0.5))
    };
    let (echo, hop, answer, read) = (
        p50("floor echo"),
        p50("echo + hop"),
        p50("echo, answer"),
        p50("read_context"),
    );
    let (emit, fsync, rows, read_rows) = (
        p50("emit"),
        p50("fsync append"),
        p50("rows floor"),
        p50("read rows floor"),
    );
    println!(
        "read_context p50 {read:.1} us = {:.2}x the echo (goal <= 2): the echo answering its {answer_bytes} bytes \
         {answer:.1} us, and its own work {:.1} us, of which its rows on a bare connection (read rows floor) \
         {read_rows:.1} us and the rest {:.1} us (the route, the checks, its records and answer built in Rust)",
        read / echo,
        read - answer,
        read - answer - read_rows
    );
    println!(
        "emit p50 {emit:.1} us = {:.2}x echo + fsync append (goal <= 1.3), {:.2}x the floor of one call \
         with its fsync off the runtime's workers, (echo + hop) + fsync append + rows floor ({hop:.1} + \
         {fsync:.1} + {rows:.1} us); the hop, a crossing to another thread and back, {:.1} us",
        emit / (echo + fsync),
        emit / (hop + fsync + rows),
        hop - echo
    );
}

/// The durable floor's line: the daemon's rate at the most executions against it.
fn print_durable_floor(together: &[Stats], floor: &Stats) {
    let most = together.last().expect("a concurrent case");
    println!(
        "durable floor at N={0}: {1:.0} calls/s ({2} us CPU a call, {3} us of it on its one call thread) from \
         an echo whose bodies cross to one thread running an emit's rows and log entry, answered after a \
         shared fsync (benches/durable); emit at N={0} is {4:.2}x it",
        EXECUTIONS[EXECUTIONS.len() - 1],
        floor.per_second(),
        floor.cpu_per_call(),
        floor.store_thread_per_call(),
        most.per_second() / floor.per_second()
    );
}

/// Serves the durable floor ([`durable`]) on `socket`, its rows on a store of their own.
fn start_durable_floor(dir: &Path, socket: &Path) -> JoinHandle<()> {
    let rows_dir = dir.join("durable");
    std::fs::create_dir(&rows_dir).expect("the durable floor's directory");
    let log = File::create(rows_dir.join("log")).expect("the durable floor's log");
    let listener = bind_owner_only(socket).expect("bind the durable floor's socket");
    let rows = move || {
        let mut rows = rows::Rows::open(&rows_dir, "floor.db");
        move || rows.emit()
    };
    tokio::spawn(durable::serve(listener, rows, log))
}

fn print_machine(dir: &Path) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let wal = if dir.join("store.db-wal").exists() {
        "store.db-wal present"
    } else {
        "NO store.db-wal file"
    };
    let (kind, device) = mount_of(dir).unwrap_or_else(|| ("an unknown filesystem".into(), "?".into()));
    println!(
        "machine: nproc={cpus}; temp dir on {kind} ({device}); store: SQLite journal_mode=WAL ({wal}), \
         synchronous=NORMAL + one shared fsync of the WAL before a write is acknowledged; one writer \
         connection committing queued writers' transactions together, reader connections, checkpoints on a thread"
    );
    println!(
        "runtimes: servers multi-thread ({cpus} workers) + blocking pool; sequential client current-thread; \
         concurrent clients multi-thread ({cpus} workers)"
    );
    println!("{}", idle_policy());
    println!("{}", columns_legend(&device));
}

/// How an idle CPU waits: where a guest's idle vCPU halts at once (`haltpoll` with
/// `guest_halt_poll_ns` 0), every wake-up of a thread on the other CPU goes through the
/// hypervisor, which `echo + hop` less `floor echo` measures.
fn idle_policy() -> String {
    let read = |path: &str| std::fs::read_to_string(path).map(|s| s.trim().to_owned());
    let driver = read("/sys/devices/system/cpu/cpuidle/current_driver").unwrap_or_else(|_| "unknown".into());
    match read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
        .ok()
        .filter(|_| driver == "haltpoll")
    {
        Some(ns) => format!("cpu idle: {driver}, guest_halt_poll_ns={ns} (0: an idle vCPU halts at once)"),
        None => format!("cpu idle: {driver}"),
    }
}
