//! The floors of a call's store work: the SQLite statements a call's rules run, prepared once and
//! run on a bare connection to a store of the same schema, with nothing of the daemon's around them.
//!
//! Calls are spread over [`WORKS`] Works (their ids, their executions' and their chains' roots are
//! ids as the daemon makes them: index keys as wide as the store's) and committed every
//! [`MEMBERS`] calls, as the store's writer holds at most. What they leave out: what the store
//! adds for crash safety and for one failing call's isolation (the redo log's entry, the
//! savepoints a member runs in after another failed), the records built in Rust, and everything
//! outside SQLite. The store thread's CPU per call (`store/op`) is set beside them.

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Statement};
use serde_json::json;
use std::path::Path;

use conduit_server::now;
use conduit_store::new_id;
use conduit_store_sql::statements;
use conduit_store_sqlite::SqliteStore;

/// Works the floors spread their calls over, as the 32-execution case does.
const WORKS: usize = 32;
/// Calls a floor transaction holds, as the store's writer holds at most.
const MEMBERS: usize = 1024;
/// The chain rate limit of the floors' pins, one the bench cannot reach.
const PER_MINUTE: u32 = 1_000_000;

/// A Work the floor writes for: its id, its execution's, its chain's root and its key.
struct Work {
    id: String,
    execution: String,
    root: String,
    key: String,
}

/// A bare connection to a store of the daemon's schema, and the statements a call's rules run.
pub struct Rows {
    conn: &'static Connection,
    works: Vec<Work>,
    usage_read: Statement<'static>,
    bounds: Statement<'static>,
    event: Statement<'static>,
    audit: Statement<'static>,
    charge: Statement<'static>,
    watermark: Statement<'static>,
    input: Statement<'static>,
    calls: usize,
}

impl Rows {
    /// Makes the store `name` in `dir` (migrated as the daemon's is), one input event under each
    /// Work's key, and prepares the statements.
    pub fn open(dir: &Path, name: &str) -> Rows {
        let path = dir.join(name);
        drop(SqliteStore::open(&path).expect("the floor's store opens and migrates"));
        // Leaked so the prepared statements can borrow it for the rest of the run.
        let conn: &'static Connection = Box::leak(Box::new(Connection::open(&path).expect("the floor's store")));
        // No checkpoints on the floor's thread: the daemon checkpoints on a thread of its own.
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0")
            .expect("the writer's journal");
        let works: Vec<Work> = (0..WORKS)
            .map(|_| Work {
                id: new_id(),
                execution: new_id(),
                root: new_id(),
                key: format!("demo:{}", new_id()),
            })
            .collect();
        let prepare = |sql: &str| conn.prepare(sql).expect("a floor statement");
        let mut rows = Rows {
            conn,
            usage_read: prepare("SELECT stored_bytes FROM work_usage WHERE work_id = ?1"),
            bounds: prepare(statements::CAUSAL_BOUNDS),
            event: prepare(statements::INSERT_EVENT),
            audit: prepare(
                "INSERT INTO toolbelt_audit (id, kind, operation, execution_id, work_id, scope, request_id, \
                 result, gate, refusal, input_hash, duration_ms, at) VALUES (?1, 'toolbelt.called', ?2, ?3, ?4, \
                 'setup', NULL, 'ok', NULL, NULL, ?5, 0, ?6)",
            ),
            charge: prepare(
                "INSERT INTO work_usage (work_id, stored_bytes) VALUES (?1, ?2) ON CONFLICT (work_id) \
                 DO UPDATE SET stored_bytes = work_usage.stored_bytes + excluded.stored_bytes",
            ),
            watermark: prepare(
                "SELECT watermark FROM executions WHERE work_id = ?1 AND id <> ?2 ORDER BY watermark DESC LIMIT 1",
            ),
            input: prepare(
                "SELECT sequence, id, type, source, scope, work_id, execution_id, correlation_key, parent_id, \
                 root_id, depth, actor, data, accepted_at FROM events WHERE correlation_key = ?1 AND sequence > ?2 \
                 AND sequence <= ?3 ORDER BY sequence",
            ),
            works,
            calls: 0,
        };
        rows.seed();
        rows
    }

    /// Each Work's row, its chain pin, its running execution (the one its calls are made for) and the event
    /// that created it, under its key: a read's input.
    fn seed(&mut self) {
        for w in 0..WORKS {
            let work = &self.works[w];
            self.conn
                .execute(
                    "INSERT INTO work (id, scope, binding, state, input, epoch, wake_event, generation, \
                     created_at, updated_at) VALUES (?1, 'setup', 'shell', 'running', '{}', 1, ?2, 1, 0, 0)",
                    params![work.id, work.root],
                )
                .expect("a Work");
            self.conn
                .execute(
                    "INSERT INTO executions (id, work_id, scope, binding, epoch, owner, state, cause_event, \
                     watermark, generation, lease_expires_at, deadline_at, started_at) \
                     VALUES (?1, ?2, 'setup', 'shell', 1, 'bench', 'running', ?3, 1, 1, 0, 0, 0)",
                    params![work.execution, work.id, work.root],
                )
                .expect("a Work's execution");
            self.conn
                .execute(
                    "INSERT INTO causal_pins (root_id, max_depth, per_minute, pinned_at) VALUES (?1, 32, ?2, 0)",
                    params![work.root, PER_MINUTE],
                )
                .expect("a chain's pin");
            let data = json!({"title": "floor", "input": {"n": w}});
            let (root, key) = (work.root.clone(), work.key.clone());
            let created = Record {
                id: &root,
                kind: "demo.requested",
                source: "core.manual",
                key: Some(&key),
                parent: None,
                depth: 0,
                data,
            };
            self.insert_event(w, created);
        }
    }

    /// An `emit`'s statements: the Work's usage read for its quota; the chain's pin and per-minute
    /// bound; `agent.toolCalled`, the emitted event numbered in its chain, `agent.toolReturned`;
    /// the audit record; the usage charge.
    pub fn emit(&mut self) {
        let (w, called) = self.begin("emit");
        let (root, execution) = (self.works[w].root.clone(), self.works[w].execution.clone());
        let _: (i64, i64, Option<i64>) = self
            .bounds
            .query_row([&root], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("the chain's bounds");
        let (id, source) = (new_id(), format!("execution:{execution}"));
        let emitted = Record {
            source: &source,
            ..Record::host(&id, "demo.bench", &called, 2, json!({"i": self.calls}))
        };
        self.insert_event(w, emitted);
        self.end(w, "emit", &called, 3);
    }

    /// A `read_context`'s statements: the Work's usage read; `agent.toolCalled`; the previous
    /// attempt's watermark (none: the seek finds only the running execution, as the bench's first
    /// attempt's does); the input events under the Work's key (through the newest, where the daemon
    /// stops at the execution's watermark: the same one event), every column read;
    /// `agent.toolReturned`; the audit record; the usage charge.
    pub fn read(&mut self) {
        let (w, called) = self.begin("read_context");
        let work = &self.works[w];
        let previous: Option<i64> = self
            .watermark
            .query_row([&work.id, &work.execution], |r| r.get(0))
            .optional()
            .expect("the previous watermark");
        assert_eq!(previous, None, "a first attempt has no previous watermark");
        let mut input = self.input.query(params![work.key, 0, i64::MAX]).expect("the input");
        while let Some(row) = input.next().expect("an input event") {
            for column in 0..14 {
                std::hint::black_box(row.get::<_, Value>(column).expect("a column"));
            }
        }
        drop(input);
        self.end(w, "read_context", &called, 2);
    }

    /// Opens the next transaction when one is due, reads the next Work's usage and records
    /// `agent.toolCalled`: the call's Work and its called event's id.
    fn begin(&mut self, operation: &str) -> (usize, String) {
        if self.calls.is_multiple_of(MEMBERS) {
            let end = if self.calls == 0 { "" } else { "COMMIT;" };
            self.conn
                .execute_batch(&format!("{end} BEGIN IMMEDIATE"))
                .expect("a floor transaction");
        }
        let w = self.calls % WORKS;
        self.calls += 1;
        let (id, execution) = (self.works[w].id.clone(), self.works[w].execution.clone());
        let _: Option<i64> = self
            .usage_read
            .query_row([&id], |r| r.get(0))
            .optional()
            .expect("the Work's usage");
        let called = new_id();
        let data = json!({"agentId": execution, "toolName": operation, "callId": called,
            "argsHash": "0".repeat(64), "principal": format!("execution:{execution}"), "transport": "native"});
        self.insert_event(w, Record::host(&called, "agent.toolCalled", &called, 1, data));
        (w, called)
    }

    /// Records `agent.toolReturned` at `depth`, the audit record of `operation`, and the usage charge.
    fn end(&mut self, w: usize, operation: &str, called: &str, depth: i64) {
        let (id, execution) = (self.works[w].id.clone(), self.works[w].execution.clone());
        let data = json!({"agentId": execution, "toolName": operation, "callId": called, "status": "ok",
            "durationMs": 0});
        self.insert_event(w, Record::host(&new_id(), "agent.toolReturned", called, depth, data));
        self.audit
            .execute(params![new_id(), operation, execution, id, "0".repeat(64), now().0])
            .expect("the audit record");
        self.charge.execute(params![id, 600]).expect("the usage charge");
    }

    /// One event of Work `w`'s chain.
    fn insert_event(&mut self, w: usize, e: Record<'_>) {
        let work = &self.works[w];
        self.event
            .execute(params![
                work.root,
                e.id,
                e.kind,
                e.source,
                "setup",
                work.id,
                work.execution,
                e.key,
                e.parent,
                e.depth,
                None::<String>,
                e.data.to_string(),
                now().0,
                None::<String>
            ])
            .expect("an event");
    }
}

/// An event a floor call writes, less what its Work sets.
struct Record<'a> {
    id: &'a str,
    kind: &'a str,
    source: &'a str,
    key: Option<&'a str>,
    parent: Option<&'a str>,
    depth: i64,
    data: serde_json::Value,
}

impl<'a> Record<'a> {
    /// A record of the host's (`core.toolbelt`) in the chain of call `parent`.
    fn host(id: &'a str, kind: &'a str, parent: &'a str, depth: i64, data: serde_json::Value) -> Record<'a> {
        Record {
            id,
            kind,
            source: "core.toolbelt",
            key: None,
            parent: Some(parent),
            depth,
            data,
        }
    }
}
