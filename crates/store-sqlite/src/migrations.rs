//! Versioned, forward-only schema migrations, tracked in `PRAGMA user_version`.

use rusqlite::Connection;

use crate::{sqlite_error, Result};
use conduit_store::StoreError;

/// Migration `i` moves the schema from version `i` to `i + 1`. Append only; never edit a shipped one.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE config_generations (
    generation INTEGER PRIMARY KEY,
    hash TEXT NOT NULL,
    config TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE scopes (
    id TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    parent TEXT,
    enabled INTEGER NOT NULL
);
CREATE TABLE work (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    binding TEXT NOT NULL,
    parent_work TEXT,
    state TEXT NOT NULL,
    input TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    outcome TEXT,
    wake_event TEXT NOT NULL,
    generation INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX work_by_state ON work (state, created_at, id);
CREATE TABLE work_keys (
    key TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES work (id)
);
CREATE INDEX work_keys_by_work ON work_keys (work_id);
CREATE TABLE executions (
    id TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES work (id),
    scope TEXT NOT NULL,
    binding TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    owner TEXT NOT NULL,
    state TEXT NOT NULL,
    cause_event TEXT NOT NULL,
    watermark INTEGER NOT NULL,
    declaration TEXT,
    outcome TEXT,
    exit_code INTEGER,
    pid INTEGER,
    generation INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER
);
CREATE INDEX executions_by_work ON executions (work_id, started_at, id);
CREATE INDEX executions_by_state ON executions (state);
CREATE TABLE events (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    scope TEXT NOT NULL,
    work_id TEXT,
    execution_id TEXT,
    correlation_key TEXT,
    parent_id TEXT,
    root_id TEXT NOT NULL,
    depth INTEGER NOT NULL,
    actor TEXT,
    data TEXT NOT NULL,
    delivery_id TEXT UNIQUE,
    accepted_at INTEGER NOT NULL
);
CREATE INDEX events_by_work ON events (work_id, sequence);
CREATE INDEX events_by_key ON events (correlation_key, sequence);
CREATE INDEX events_by_root ON events (root_id, accepted_at);
CREATE TABLE waits (
    id TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES work (id),
    execution_id TEXT NOT NULL,
    types TEXT NOT NULL,
    keys TEXT NOT NULL,
    watermark INTEGER NOT NULL,
    timeout_at INTEGER,
    state TEXT NOT NULL,
    satisfied_by TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX waits_by_state ON waits (state, timeout_at);
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    digest BLOB NOT NULL UNIQUE,
    execution_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    binding TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    owner TEXT NOT NULL,
    generation INTEGER NOT NULL,
    operations TEXT NOT NULL,
    issued_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX tokens_by_execution ON tokens (execution_id, epoch);
CREATE INDEX tokens_by_work ON tokens (work_id, epoch);
CREATE TABLE toolbelt_requests (
    execution_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    request_id TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, operation, request_id)
);
CREATE TABLE operators (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    digest BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE UNIQUE INDEX operators_one_active ON operators (name) WHERE revoked_at IS NULL;
"#,
    r#"
CREATE TABLE toolbelt_audit (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    operation TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    work_id TEXT,
    scope TEXT,
    request_id TEXT,
    result TEXT NOT NULL,
    gate TEXT,
    refusal TEXT,
    input_hash TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX toolbelt_audit_by_execution ON toolbelt_audit (execution_id, at, id);
CREATE TABLE causal_pins (
    root_id TEXT PRIMARY KEY,
    max_depth INTEGER NOT NULL,
    per_minute INTEGER NOT NULL,
    pinned_at INTEGER NOT NULL
);
CREATE INDEX toolbelt_requests_by_created ON toolbelt_requests (created_at);
CREATE INDEX tokens_by_revocation ON tokens (revoked_at);
CREATE INDEX tokens_by_expiry ON tokens (expires_at);
"#,
    r#"
CREATE INDEX events_causal ON events (root_id, accepted_at) WHERE source != 'core.toolbelt';
"#,
    r#"
ALTER TABLE scopes ADD COLUMN removed_in INTEGER;
"#,
    r#"
CREATE TABLE idempotency (
    principal TEXT NOT NULL,
    key TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_by_created ON idempotency (created_at);
"#,
    r#"
ALTER TABLE work ADD COLUMN blocked_reason TEXT;
"#,
    r#"
ALTER TABLE executions ADD COLUMN stopped_at INTEGER;
"#,
    r#"
CREATE TABLE artifacts (
    execution_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    size INTEGER,
    sha256 TEXT,
    refusal TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, idx)
);
"#,
    r#"
CREATE TABLE tool_sessions (
    id TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    tool_id TEXT NOT NULL,
    opened_event TEXT NOT NULL,
    opened_at INTEGER NOT NULL,
    outcome TEXT,
    closed_at INTEGER
);
CREATE INDEX tool_sessions_open ON tool_sessions (execution_id) WHERE closed_at IS NULL;
"#,
    r#"
CREATE TABLE packages (
    name TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    manifest TEXT NOT NULL,
    approved_grant TEXT NOT NULL,
    approved_gating INTEGER NOT NULL,
    installed_at INTEGER NOT NULL
);
"#,
    r#"
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    work_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    operation TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    approvers TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    decided_by TEXT,
    requested_at INTEGER NOT NULL,
    expires_at INTEGER,
    decided_at INTEGER
);
CREATE INDEX approvals_by_call ON approvals (work_id, operation, input_hash, requested_at);
"#,
    r#"
ALTER TABLE approvals ADD COLUMN used_by TEXT;
"#,
    // The keys armed waits subscribe on, so an event finds the waits it may wake by its key.
    r#"
CREATE TABLE wait_keys (
    key TEXT NOT NULL,
    wait_id TEXT NOT NULL,
    PRIMARY KEY (key, wait_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO wait_keys (key, wait_id)
    SELECT k.value, w.id FROM waits w, json_each(w.keys) k WHERE w.state = 'armed';
CREATE INDEX waits_by_work ON waits (work_id, state);
"#,
    r#"
ALTER TABLE operators ADD COLUMN revoked_by TEXT;
"#,
    // The audit trail pages by time, all of it or one Work's.
    r#"
CREATE INDEX toolbelt_audit_by_time ON toolbelt_audit (at, id);
CREATE INDEX toolbelt_audit_by_work ON toolbelt_audit (work_id, at, id);
"#,
    // What each Work has written, charged against limits.work_store_bytes.
    r#"
CREATE TABLE work_usage (work_id TEXT PRIMARY KEY, stored_bytes INTEGER NOT NULL) WITHOUT ROWID;
"#,
    // A binding's retry policy: failures in a row, and the backoff a ready Work waits out.
    r#"
ALTER TABLE work ADD COLUMN failed_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE work ADD COLUMN not_before INTEGER;
"#,
    // What an agent executor's attempt left: its session (resumed after a wait) and usage.
    r#"
ALTER TABLE executions ADD COLUMN agent_session TEXT;
ALTER TABLE executions ADD COLUMN agent_usage TEXT;
"#,
    // Narrower call records. Every toolbelt call writes two events and an audit record; each B-tree
    // a commit touches costs at least one page in the log. Events lose AUTOINCREMENT (they are never
    // deleted, so the rowid alone never repeats; no `sqlite_sequence` page per commit) and the
    // index by root that only the causal count used (it has its own partial index); the delivery,
    // key and Work indexes hold only rows that have one. The audit trail is kept in its listing
    // order, `(at, id)`, with no separate rowid, id and time indexes.
    r#"
CREATE TABLE events_v19 (
    sequence INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    scope TEXT NOT NULL,
    work_id TEXT,
    execution_id TEXT,
    correlation_key TEXT,
    parent_id TEXT,
    root_id TEXT NOT NULL,
    depth INTEGER NOT NULL,
    actor TEXT,
    data TEXT NOT NULL,
    delivery_id TEXT,
    accepted_at INTEGER NOT NULL
);
INSERT INTO events_v19 (sequence, id, type, source, scope, work_id, execution_id, correlation_key, parent_id,
        root_id, depth, actor, data, delivery_id, accepted_at)
    SELECT sequence, id, type, source, scope, work_id, execution_id, correlation_key, parent_id,
        root_id, depth, actor, data, delivery_id, accepted_at FROM events ORDER BY sequence;
DROP TABLE events;
ALTER TABLE events_v19 RENAME TO events;
CREATE UNIQUE INDEX events_by_id ON events (id);
CREATE UNIQUE INDEX events_by_delivery ON events (delivery_id) WHERE delivery_id IS NOT NULL;
CREATE INDEX events_by_work ON events (work_id, sequence) WHERE work_id IS NOT NULL;
CREATE INDEX events_by_key ON events (correlation_key, sequence) WHERE correlation_key IS NOT NULL;
CREATE INDEX events_causal ON events (root_id, accepted_at) WHERE source != 'core.toolbelt';
CREATE TABLE toolbelt_audit_v19 (
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    operation TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    work_id TEXT,
    scope TEXT,
    request_id TEXT,
    result TEXT NOT NULL,
    gate TEXT,
    refusal TEXT,
    input_hash TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (at, id)
) WITHOUT ROWID;
INSERT INTO toolbelt_audit_v19 (id, kind, operation, execution_id, work_id, scope, request_id, result, gate,
        refusal, input_hash, duration_ms, at)
    SELECT id, kind, operation, execution_id, work_id, scope, request_id, result, gate,
        refusal, input_hash, duration_ms, at FROM toolbelt_audit ORDER BY at, id;
DROP TABLE toolbelt_audit;
ALTER TABLE toolbelt_audit_v19 RENAME TO toolbelt_audit;
CREATE INDEX toolbelt_audit_by_execution ON toolbelt_audit (execution_id, at, id);
CREATE INDEX toolbelt_audit_by_work ON toolbelt_audit (work_id, at, id) WHERE work_id IS NOT NULL;
"#,
    // Each causal event is numbered in its root's chain, so the per-minute bound looks up the event
    // `per_minute` places back instead of counting the last minute's.
    r#"
ALTER TABLE events ADD COLUMN chain_ordinal INTEGER;
UPDATE events SET chain_ordinal = numbered.n
    FROM (SELECT sequence, ROW_NUMBER() OVER (PARTITION BY root_id ORDER BY sequence) AS n
          FROM events WHERE source != 'core.toolbelt') AS numbered
    WHERE events.sequence = numbered.sequence;
DROP INDEX events_causal;
CREATE INDEX events_chain ON events (root_id, chain_ordinal, accepted_at) WHERE chain_ordinal IS NOT NULL;
"#,
    // 21: keys every daemon on the store shares (the cursors').
    r#"
CREATE TABLE shared_keys (
    name TEXT PRIMARY KEY,
    key BLOB NOT NULL
);
"#,
    // 22: what operators changed, by whom and when.
    r#"
CREATE TABLE operator_actions (
    id TEXT PRIMARY KEY,
    at INTEGER NOT NULL,
    principal TEXT NOT NULL,
    route TEXT NOT NULL,
    path TEXT NOT NULL,
    status INTEGER NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX operator_actions_by_time ON operator_actions (at, id);
CREATE INDEX operator_actions_by_principal ON operator_actions (principal, at, id);
"#,
    // 23: the binding grants each Work took.
    r#"
ALTER TABLE work ADD COLUMN grants TEXT NOT NULL DEFAULT '[]';
"#,
    // 24: the input an approval covers, shown to whoever decides (null for approvals made before).
    r#"
ALTER TABLE approvals ADD COLUMN input TEXT;
"#,
    // 25: how far the redo log is applied, and the identity its entries are checked with (see
    // `redo.rs`).
    r#"
CREATE TABLE redo_applied (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    through INTEGER NOT NULL,
    identity BLOB NOT NULL
);
INSERT INTO redo_applied (id, through, identity) VALUES (1, 0, randomblob(16));
"#,
    // 26: no change to the tables: redo log entries may now write a repeated text as a number
    // (`redo/repeats.rs`), which a release before this one would misread, so it refuses the store.
    r#"
UPDATE redo_applied SET through = through;
"#,
    // 27: no change to the tables: redo log entries are now checked with XXH3 (`redo.rs`), which
    // a release before this one would read as a torn first entry and empty away, so it refuses the
    // store instead.
    r#"
UPDATE redo_applied SET through = through;
"#,
    // 28: a Work's audit trail is read through its executions' index (an audit record's Work is its
    // execution's), so no index by Work is written on every call.
    r#"
DROP INDEX toolbelt_audit_by_work;
"#,
];

pub fn migrate(conn: &mut Connection) -> Result<()> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Refuses a store a newer release migrated; answers its schema version.
pub fn supported_version(conn: &Connection) -> Result<i64> {
    let supported = MIGRATIONS.len() as i64;
    let found: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sqlite_error)?;
    if found > supported {
        return Err(StoreError::NewerSchema { found, supported });
    }
    Ok(found)
}

/// Applies the migrations up to schema version `target`.
pub fn migrate_to(conn: &mut Connection, target: usize) -> Result<()> {
    let found = supported_version(conn)?;
    for (version, sql) in MIGRATIONS.iter().enumerate().take(target).skip(found as usize) {
        let tx = conn.transaction().map_err(sqlite_error)?;
        tx.execute_batch(sql).map_err(sqlite_error)?;
        tx.pragma_update(None, "user_version", version as i64 + 1)
            .map_err(sqlite_error)?;
        tx.commit().map_err(sqlite_error)?;
    }
    Ok(())
}
