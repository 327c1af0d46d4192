//! Management API latency against the bare hyper floor, over real Unix sockets, in one process and
//! one run: a list read of 100 events, an idempotent control (a keyed `POST /v1/events`) and its
//! replay.
//!
//! Run with `cargo bench -p conduit-server --bench management`. `BENCH_READS=N` sets the measured
//! calls of the floors and the list (default 1000), `BENCH_WRITES=N` those of the keyed emit, its
//! replay and the fsync reference (default 300).
//!
//! The daemon's management socket for real: `management_router` + `serve` on an owner-only socket,
//! a SQLite store in a temp dir, the default configuration, and an operator credential (`local`,
//! admin) in the store, sent as `Authorization: Bearer`. Every case goes through one measuring loop,
//! [`measure`], one call after another on one persistent HTTP/1.1 connection:
//! - `floor echo`: a bare hyper server that echoes the body, sent the very request the list is (a
//!   `GET` with no body, so the answer is empty); the ratios divide by it;
//! - `floor 100 rows`: a bare hyper server that answers that request with the bytes of a real list
//!   answer, so the floor pays for moving the same answer over the socket;
//! - `floor + 1 hop`: `floor 100 rows`, after one round trip to a blocking thread (`spawn_blocking`),
//!   the crossing a management read makes (its operator's credential is checked inside its read:
//!   DESIGN.md has async code reach the store on a blocking thread);
//! - `list 100`: `GET /v1/events?limit=100` over 120 seeded events;
//! - `emit keyed`: `POST /v1/events` with a fresh `Idempotency-Key` per call: a durable event and its
//!   idempotency record in one transaction;
//! - `emit replay`: the same request and key every time, answered from the idempotency record;
//! - `tools 10000`: `GET /v1/tools` with 10,000 registered operations (100 registrations of 100,
//!   each in one toolset), the whole catalog built and serialized per call (`BENCH_CATALOG=N` calls,
//!   default 50);
//! - `fsync append`: 100 bytes appended to a file in the same temp dir, then `sync_data`, the cost of
//!   one durable commit without group commit, for reference.
//!
//! Every answer is checked, outside its latency: the list's items must be byte for byte those of a
//! first answer parsed and found to hold 100 events, the emits must be 201, a replay must repeat the
//! first answer, and at the end the store must hold exactly one event per fresh key. So a broken
//! setup cannot print numbers. Nothing here asserts timing.

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{
    bench_limits, columns_legend, env_count, json_response, mount_of, multi_thread, print_table, serve_answer, Body,
    Client, Counters, Stats,
};
use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use conduit_config::{default_config_json, parse, CurrentConfig};
use conduit_core::tool::{CatalogFields, ToolSource};
use conduit_core::{ErrorCode, OperatorRecord, Refusal, Role};
use conduit_server::{
    bind_owner_only, management_router, now, serve, Applied, ArtifactFiles, Checked, ConfigControl, ConfigView,
    Cursors, KeptEvents, Management, PackageControl,
};
use conduit_store::{new_id, PackageRecord, Store};
use conduit_store_sqlite::SqliteStore;
use conduit_toolbelt::registry::{
    Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationSpec, Registration, ToolsetEntry, ToolsetSpec,
};
use conduit_toolbelt::token;
use conduit_toolbelt::{LiveRegistry, Registry};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::UnixListener;
use tokio::sync::{oneshot, watch, Notify};
use tokio::task::JoinHandle;

/// Unmeasured calls before each case, to warm the connection, caches and the SQLite page cache.
const WARMUP: usize = 100;
/// Events created through the API before measuring: more than a page, so the list has a next cursor.
const SEEDED: usize = 120;
/// Rows the list asks for and must get.
const PAGE: usize = 100;
const LIST: &str = "/v1/events?limit=100";
const EVENTS: &str = "/v1/events";
const EMIT: &[u8] = br#"{"type":"demo.bench","scope":"setup"}"#;

/// The servers run on a multi-threaded runtime, as in the daemon; the client on this thread with a
/// current-thread runtime, as the `os` CLI would, so every case pays the same cross-thread hop.
fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let servers = multi_thread("server", std::thread::available_parallelism().map_or(2, |n| n.get()));
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).expect("the store opens"));
    let token = token::generate();
    let operator = OperatorRecord {
        id: new_id(),
        name: "local".into(),
        role: Role::Admin,
        digest: token::digest(&token),
        created_at: now(),
        revoked_at: None,
        revoked_by: None,
    };
    store
        .write(|tx| tx.insert_operator(&operator))
        .expect("the operator credential is stored");
    let snapshot = parse(default_config_json().as_bytes()).expect("the default config parses");
    let sockets = Sockets {
        management: dir.path().join("management.sock"),
        none_kept: dir.path().join("management-none-kept.sock"),
        echo: dir.path().join("echo.sock"),
        answer: dir.path().join("answer.sock"),
        answer_hops: dir.path().join("answer-hops.sock"),
    };
    let (answer_tx, answer_rx) = watch::channel(Bytes::new());
    let (stop, stopped) = oneshot::channel::<()>();
    let (management, echo, answer) = servers.block_on(async {
        let stopped = async move {
            let _ = stopped.await;
        };
        let management = serve_management(
            [
                (&sockets.management, KeptEvents::default()),
                (&sockets.none_kept, KeptEvents::with_budget(0)),
            ],
            &store,
            CurrentConfig::new(snapshot.at_generation(1)),
            dir.path(),
            stopped,
        );
        let echo = bind_owner_only(&sockets.echo).expect("bind echo.sock");
        let answer = bind_owner_only(&sockets.answer).expect("bind answer.sock");
        let answer_hops = bind_owner_only(&sockets.answer_hops).expect("bind answer-hops.sock");
        (
            management,
            tokio::spawn(serve_echo(echo)),
            [
                tokio::spawn(serve_list_answer(answer, answer_rx.clone(), 0)),
                tokio::spawn(serve_list_answer(answer_hops, answer_rx, 1)),
            ],
        )
    });
    let rows = client.block_on(run_cases(dir.path(), &sockets, &token, answer_tx));
    let (reads, writes) = call_counts();
    let events = store.read(|tx| tx.max_sequence()).expect("the store reads");
    // The seeds, the replayed request once, and one event per fresh key: replays wrote none.
    let expected = SEEDED + 1 + WARMUP + writes;
    assert_eq!(events, expected as i64, "one event per fresh key, none per replay");
    // Before the store closes: closing its last connection checkpoints and removes the WAL file.
    print_machine(dir.path());
    drop(client); // closes the client connections, so the graceful shutdown below can finish
    echo.abort();
    answer.iter().for_each(JoinHandle::abort);
    let _ = stop.send(());
    let _ = servers.block_on(management);
    println!(
        "{reads} reads, {writes} writes measured, after {WARMUP} unmeasured calls each; \
         {events} events in the store at the end"
    );
    print_table(&rows);
}

struct Sockets {
    management: PathBuf,
    /// The same API keeping no event's JSON: every list reads and writes its rows whole.
    none_kept: PathBuf,
    echo: PathBuf,
    answer: PathBuf,
    answer_hops: PathBuf,
}

/// Serves the management API on each socket, over one store, each socket keeping events' JSON as
/// given, until `stopped`.
fn serve_management<const N: usize>(
    sockets: [(&PathBuf, KeptEvents); N],
    store: &Arc<dyn Store>,
    config: CurrentConfig,
    dir: &Path,
    stopped: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let (stop, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut served = Vec::new();
    let registry = LiveRegistry::new(Arc::new(catalog_registry()));
    for (socket, kept_events) in sockets {
        let router = management_router(Management {
            store: store.clone(),
            config: config.clone(),
            instance: "bench".into(),
            kick: Arc::new(Notify::new()),
            control: Arc::new(NoConfigControl),
            cursors: Cursors::new([7u8; 32]),
            files: ArtifactFiles {
                logs: dir.join("logs"),
                declared: dir.join("artifacts"),
            },
            registry: registry.clone(),
            packages: Arc::new(NoPackages),
            kept_events,
        });
        let listener = bind_owner_only(socket).expect("bind a management socket");
        let mut stop = stop.subscribe();
        served.push(tokio::spawn(serve(listener, router, bench_limits(), async move {
            let _ = stop.recv().await;
        })));
    }
    tokio::spawn(async move {
        stopped.await;
        let _ = stop.send(());
        for server in served {
            let _ = server.await;
        }
    })
}

/// The configuration service `Management` needs. None of the measured routes (`GET /v1/events`,
/// `POST /v1/events`) calls it: it answers an empty view and refuses every change.
struct NoConfigControl;

impl conduit_toolbelt::Generations for NoConfigControl {
    fn shared(&self) -> bool {
        false
    }

    fn catch_up(&self) -> Result<(), conduit_core::Refusal> {
        Ok(())
    }
}

impl ConfigControl for NoConfigControl {
    fn view(&self) -> ConfigView {
        ConfigView {
            generation: 1,
            hash: String::new(),
            config: Value::Null,
            warnings: vec![],
        }
    }

    fn check(&self, _: &str) -> Checked {
        Checked {
            valid: false,
            hash: None,
            diagnostics: vec![],
        }
    }

    fn apply(&self, _: &str, _: Option<i64>) -> Result<Applied, Refusal> {
        Err(unserved())
    }

    fn set(&self, _: &str, _: Value, _: Option<i64>) -> Result<Applied, Refusal> {
        Err(unserved())
    }
}

/// The bench installs no packages.
struct NoPackages;

impl PackageControl for NoPackages {
    fn listing(&self, record: &PackageRecord) -> Value {
        Value::String(record.name.clone())
    }

    fn show(&self, _: &str) -> Result<Value, Refusal> {
        Err(unserved())
    }

    fn install(&self, _: &str) -> Result<Value, Refusal> {
        Err(unserved())
    }

    fn judge(&self, _: &[u8], _: &[String], _: bool) -> Result<(String, Vec<String>), Refusal> {
        Err(unserved())
    }

    fn remove(&self, _: &str) -> Result<Value, Refusal> {
        Err(unserved())
    }
}

fn unserved() -> Refusal {
    Refusal::new(ErrorCode::Internal, "the bench serves no configuration changes")
}

/// Seeds the events, takes a first list answer as the reference, then measures the cases in order.
async fn run_cases(dir: &Path, sockets: &Sockets, token: &str, answer: watch::Sender<Bytes>) -> Vec<Stats> {
    let (reads, writes) = call_counts();
    let mut seed = Client::connect(&sockets.management).await;
    for i in 0..SEEDED {
        let (status, body) = seed.send(emit(token, &format!("seed-{i}"))).await;
        assert_eq!(
            status,
            StatusCode::CREATED,
            "seeding: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (status, reference) = seed.send(list(token)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the list: {}",
        String::from_utf8_lossy(&reference)
    );
    let items = items_of(&reference);
    answer
        .send(reference.clone())
        .expect("the answer servers wait for their answer");

    let mut echo = Http::connect(
        &sockets.echo,
        |_| list(token),
        |status, body: Bytes| assert!(status == StatusCode::OK && body.is_empty(), "the echo"),
    )
    .await;
    let size = reference.len();
    let fixed = |status, body: Bytes| assert!(status == StatusCode::OK && body.len() == size, "the fixed answer");
    let mut floor = Http::connect(&sockets.answer, |_| list(token), fixed).await;
    let mut floor_hops = Http::connect(&sockets.answer_hops, |_| list(token), fixed).await;
    let first_page = |status, body: Bytes| {
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        assert!(
            body.get(..items.len()) == Some(&items[..]),
            "another page than the first"
        );
    };
    let mut listing = Http::connect(&sockets.management, |_| list(token), first_page).await;
    let mut listing_none_kept = Http::connect(&sockets.none_kept, |_| list(token), first_page).await;
    let mut keyed = Http::connect(
        &sockets.management,
        |i| emit(token, &format!("bench-{i}")),
        |status, body: Bytes| assert_eq!(status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body)),
    )
    .await;
    let mut first: Option<Bytes> = None;
    let mut replay = Http::connect(
        &sockets.management,
        |_| emit(token, "replay"),
        |status, body: Bytes| {
            assert_eq!(status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
            assert_eq!(
                first.get_or_insert_with(|| body.clone()),
                &body,
                "a replay repeats the answer"
            );
        },
    )
    .await;
    let tools_expected = REGISTRATIONS * OPERATIONS_EACH + 5;
    let mut catalog = Http::connect(
        &sockets.management,
        |_| tools(token),
        |status, body: Bytes| {
            assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
            let tools: Value = serde_json::from_slice(&body).expect("the catalog is JSON");
            assert_eq!(tools.as_array().map(Vec::len), Some(tools_expected), "every operation");
        },
    )
    .await;
    let block = [b'x'; 100];
    let mut appended = File::create(dir.join("fsync-append")).expect("a file to append to");
    let mut append = Direct(|| {
        appended.write_all(&block).expect("an append");
        appended.sync_data().expect("an fsync");
    });
    vec![
        measure(&mut echo, "floor echo", reads).await,
        measure(&mut floor, "floor 100 rows", reads).await,
        measure(&mut floor_hops, "floor + 1 hop", reads).await,
        measure(&mut listing, "list 100", reads).await,
        measure(&mut listing_none_kept, "list, none kept", reads).await,
        measure(&mut keyed, "emit keyed", writes).await,
        measure(&mut replay, "emit replay", writes).await,
        measure(&mut append, "fsync append", writes).await,
        measure(&mut catalog, "tools 10000", env_count("BENCH_CATALOG").unwrap_or(50)).await,
    ]
}

/// The reference answer's items, as bytes: `{"items":[…]` up to the next cursor, once the whole
/// answer is found to be 100 events in acceptance order from the first, with a next cursor.
fn items_of(reference: &Bytes) -> Bytes {
    let page: Value = serde_json::from_slice(reference).expect("the list answers JSON");
    let items = page["items"].as_array().expect("the list has items");
    assert_eq!(items.len(), PAGE, "the list answers a full page");
    for (i, item) in items.iter().enumerate() {
        assert_eq!(item["sequence"], i + 1, "acceptance order from the first event");
    }
    assert!(page["next_cursor"].is_string(), "more events than a page");
    let end = reference
        .windows(b",\"next_cursor\"".len())
        .position(|w| w == b",\"next_cursor\"")
        .expect("the items come before the cursor");
    reference.slice(..end)
}

/// Registered operations in the catalog case: `REGISTRATIONS` extensions of `OPERATIONS_EACH`.
const REGISTRATIONS: usize = 100;
const OPERATIONS_EACH: usize = 100;

struct Noop;

impl Handler for Noop {
    fn call(&self, _: HandlerCall) -> HandlerFuture {
        Box::pin(async { Ok(HandlerOutput::output(Value::Null)) })
    }
}

/// A release with 10,000 operations, each registration's in one toolset.
fn catalog_registry() -> Registry {
    let mut registry = Registry::default();
    for r in 0..REGISTRATIONS {
        let name = format!("ext{r}");
        let operations: Vec<OperationSpec> = (0..OPERATIONS_EACH)
            .map(|o| OperationSpec {
                name: format!("{name}.op{o}"),
                title: Some(format!("Operation {o}")),
                summary: "A benchmark operation.".into(),
                input_schema: serde_json::json!({"type": "object", "properties": {"id": {"type": "string"}}}),
                output_schema: serde_json::json!({"type": "object"}),
                catalog: CatalogFields::read(),
                capabilities: Vec::new(),
                handler: Arc::new(Noop),
            })
            .collect();
        let toolset = ToolsetSpec {
            name: format!("{name}.all"),
            operations: operations
                .iter()
                .map(|o| ToolsetEntry {
                    operation: o.name.clone(),
                    since: "0.1.0".into(),
                })
                .collect(),
        };
        let registration = Registration {
            name,
            source: ToolSource::HostExtension,
            operations,
            toolsets: vec![toolset],
        };
        registry
            .register(registration)
            .expect("the bench registration is valid");
    }
    registry
}

fn tools(token: &str) -> Request<Body> {
    Request::builder()
        .method(Method::GET)
        .uri("/v1/tools")
        .header(HOST, "localhost")
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .expect("a valid request")
}

/// Measured calls per case: `(floors and list; emits and fsync)`.
fn call_counts() -> (usize, usize) {
    (
        env_count("BENCH_READS").unwrap_or(1000),
        env_count("BENCH_WRITES").unwrap_or(300),
    )
}

/// The list request, which the floors are sent too.
fn list(token: &str) -> Request<Body> {
    Request::builder()
        .method(Method::GET)
        .uri(LIST)
        .header(HOST, "localhost")
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .expect("a valid request")
}

/// An operator's event under the Idempotency-Key `key`.
fn emit(token: &str, key: &str) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(EVENTS)
        .header(HOST, "localhost")
        .header(CONTENT_TYPE, "application/json")
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .header("idempotency-key", key)
        .body(Full::new(Bytes::from_static(EMIT)))
        .expect("a valid request")
}

/// What a case measures: `prepare(i)` readies call `i` outside the timing, `call` makes it, `check`
/// inspects its answer after its latency is taken.
trait Probe {
    type Call;
    type Answer;
    fn prepare(&mut self, i: usize) -> Self::Call;
    fn call(&mut self, call: Self::Call) -> impl Future<Output = Self::Answer>;
    fn check(&mut self, answer: Self::Answer);
}

/// Sends `WARMUP` unmeasured calls, then makes `calls` timed ones; every answer is checked.
async fn measure(probe: &mut impl Probe, case: &'static str, calls: usize) -> Stats {
    for i in 0..WARMUP {
        let call = probe.prepare(i);
        let answer = probe.call(call).await;
        probe.check(answer);
    }
    let mut latencies = Vec::with_capacity(calls);
    let before = Counters::read();
    let started = Instant::now();
    for i in WARMUP..WARMUP + calls {
        let call = probe.prepare(i);
        let sent = Instant::now();
        let answer = probe.call(call).await;
        latencies.push(sent.elapsed());
        probe.check(answer);
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

/// HTTP calls on one persistent connection; call `i` is `request(i)`, its answer goes to `check`.
struct Http<R, C> {
    client: Client,
    request: R,
    check: C,
}

impl<R: FnMut(usize) -> Request<Body>, C: FnMut(StatusCode, Bytes)> Http<R, C> {
    async fn connect(path: &Path, request: R, check: C) -> Http<R, C> {
        Http {
            client: Client::connect(path).await,
            request,
            check,
        }
    }
}

impl<R: FnMut(usize) -> Request<Body>, C: FnMut(StatusCode, Bytes)> Probe for Http<R, C> {
    type Call = Request<Body>;
    type Answer = (StatusCode, Bytes);

    fn prepare(&mut self, i: usize) -> Request<Body> {
        (self.request)(i)
    }

    fn call(&mut self, request: Request<Body>) -> impl Future<Output = (StatusCode, Bytes)> {
        self.client.send(request)
    }

    fn check(&mut self, (status, body): (StatusCode, Bytes)) {
        (self.check)(status, body)
    }
}

/// A function called in process, on the measuring thread: no socket, no HTTP, no thread hop.
struct Direct<F>(F);

impl<F: FnMut()> Probe for Direct<F> {
    type Call = ();
    type Answer = ();

    fn prepare(&mut self, _: usize) {}

    fn call(&mut self, (): ()) -> impl Future<Output = ()> {
        (self.0)();
        std::future::ready(())
    }

    fn check(&mut self, (): ()) {}
}

/// The floor: a bare hyper HTTP/1.1 server that answers each request with its own body.
async fn serve_echo(listener: UnixListener) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service_fn(echo)));
    }
}

async fn echo(request: Request<Incoming>) -> Result<Response<Body>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    Ok(json_response(body))
}

/// The floor with a list's answer ([`serve_answer`]), once the bench has a real `list 100` answer.
async fn serve_list_answer(listener: UnixListener, mut answer: watch::Receiver<Bytes>, hops: usize) {
    if answer.wait_for(|a| !a.is_empty()).await.is_err() {
        return;
    }
    let answer = answer.borrow().clone();
    serve_answer(listener, answer, hops).await;
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
        "machine: nproc={cpus}; temp dir on {kind} ({device}); store: SQLite journal_mode=WAL ({wal}); \
         server multi-thread ({cpus} workers) + blocking pool, client current-thread"
    );
    println!("{}", columns_legend(&device));
}
