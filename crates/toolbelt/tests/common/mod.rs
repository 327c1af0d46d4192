//! The in-process toolbelt harness: a real SQLite file, a configuration, a clock the test sets.

// Test helpers, like tests, stop loudly on what they did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use conduit_config::{default_config_json, parse_with, CurrentConfig, Snapshot};
use conduit_core::{Clock, ErrorCode, Refusal, Timestamp};
use conduit_scheduler::{claim_next, create_work, Claim, NewWork};
use conduit_store::Store;
use conduit_store_sqlite::SqliteStore;
use conduit_toolbelt::token::issue;
use conduit_toolbelt::{CallRequest, Registry, Toolbelt};
use serde_json::{json, Value};

pub const T0: Timestamp = Timestamp(1_700_000_000_000);

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
    pub config: CurrentConfig,
    pub clock: Arc<ManualClock>,
    pub toolbelt: Toolbelt,
    pub registry: Arc<Registry>,
}

/// A clock the test sets.
pub struct ManualClock(pub AtomicI64);

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

impl Harness {
    pub fn new(config_text: &str) -> Harness {
        Harness::with_registry(config_text, Registry::default())
    }

    pub fn with_registry(config_text: &str, registry: Registry) -> Harness {
        let registry = Arc::new(registry);
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
        let snapshot = parse_with(config_text.as_bytes(), &registry.config_registry())
            .unwrap()
            .at_generation(1);
        let config = CurrentConfig::new(snapshot);
        let clock = Arc::new(ManualClock(AtomicI64::new(T0.0)));
        let toolbelt = Toolbelt::new(store.clone(), config.clone(), clock.clone(), registry.clone());
        Harness {
            dir,
            store,
            config,
            clock,
            toolbelt,
            registry,
        }
    }

    /// Parses a configuration against this harness's registry.
    pub fn snapshot(&self, text: &str) -> Snapshot {
        parse_with(text.as_bytes(), &self.registry.config_registry())
            .unwrap()
            .at_generation(1)
    }

    /// Creates Work in `setup`/`shell`, claims it and issues its token.
    pub fn attempt(&self) -> (Claim, String) {
        let config = self.config.get();
        self.store
            .write(|tx| {
                let new = NewWork::manual("setup", "shell", json!({"x": 1}), None);
                create_work(tx, &config, new, None, T0)?;
                let claim = claim_next(tx, &config, &conduit_scheduler::Lessee::new("owner"), T0)?.unwrap();
                let ops = config.granted_operations("setup", "shell");
                let token = issue(tx, &claim.execution, &claim.work, ops, None, T0)?;
                Ok::<_, conduit_scheduler::HostError>((claim, token))
            })
            .unwrap()
    }

    pub fn set_time(&self, now: Timestamp) {
        self.clock.0.store(now.0, Ordering::SeqCst);
    }

    /// A whole call (an extension's handler awaited in between), answering the output or the refusal.
    pub fn request_at(&self, claim: &Claim, token: &str, request: Value, now: Timestamp) -> Result<Value, Refusal> {
        let request: CallRequest = serde_json::from_value(request).unwrap();
        self.set_time(now);
        block_on(self.toolbelt.call(&claim.execution.id, token, &request)).map(|v| v["output"].clone())
    }

    pub fn call_at(&self, claim: &Claim, token: &str, request: Value, now: Timestamp) -> Result<Value, ErrorCode> {
        self.request_at(claim, token, request, now).map_err(|r| r.code)
    }

    pub fn call(&self, claim: &Claim, token: &str, operation: &str, input: Value) -> Result<Value, ErrorCode> {
        self.call_at(claim, token, json!({"operation": operation, "input": input}), T0)
    }
}

impl Harness {
    /// The attempt's process exited 0: its declaration (if any) is applied.
    pub fn end_segment(&self, claim: &Claim) {
        let end = conduit_core::execution::SegmentEnd::Exited(0);
        let retry = conduit_core::retry::RetryPolicy::default();
        self.store
            .write(|tx| conduit_scheduler::complete(tx, &claim.execution.id, end, retry, T0))
            .unwrap();
    }

    pub fn work_state(&self, claim: &Claim) -> conduit_core::WorkState {
        let work = self.store.read(|tx| tx.get_work(&claim.work.id)).unwrap();
        work.unwrap().state
    }

    /// An operator's event in `setup` on `key`.
    pub fn accept_event(&self, event_type: &str, key: &str) {
        let config = self.config.get();
        let event = conduit_scheduler::OperatorEvent {
            event_type: event_type.into(),
            scope: "setup".into(),
            data: Value::Null,
            correlation_key: Some(key.into()),
            parent: None,
        };
        let by = conduit_scheduler::Operator {
            actor: "operator",
            seed: event_type,
        };
        self.store
            .write(|tx| conduit_scheduler::emit_event(tx, &config, event, &by, T0))
            .unwrap();
    }
}

pub fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

pub fn default_harness() -> Harness {
    Harness::new(default_config_json())
}

pub fn config(text: &str) -> Snapshot {
    conduit_config::parse(text.as_bytes()).unwrap().at_generation(1)
}

/// A handler that answers `null` and emits nothing: for registrations a test only describes.
pub struct Noop;

impl conduit_toolbelt::registry::Handler for Noop {
    fn call(&self, _: conduit_toolbelt::registry::HandlerCall) -> conduit_toolbelt::registry::HandlerFuture {
        Box::pin(async { Ok(conduit_toolbelt::registry::HandlerOutput::output(Value::Null)) })
    }
}

/// Every byte of the harness's store: the database and its write-ahead log.
pub fn store_bytes(h: &Harness) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(h.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("store.db") {
            bytes.extend(std::fs::read(path).unwrap());
        }
    }
    bytes
}

pub fn contains(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}
