//! Versioned, forward-only schema migrations, tracked in `schema_migrations` and applied under a
//! transaction-scoped advisory lock: daemons that start at once migrate once, the others wait for
//! the lock and find nothing left to do. PostgreSQL's DDL is transactional, so a migration that
//! fails leaves the schema as it was.
//!
//! Version 1 is the SQLite store's schema at its version 20, in PostgreSQL's types: `BIGINT` for
//! SQLite's integers, `BYTEA` for its blobs, an identity column where SQLite relied on its rowid.

use conduit_store::StoreError;
use postgres::Client;

use crate::{backend, Result};

/// The advisory lock key every daemon migrates under (`"oc-migra"` as bytes).
const MIGRATION_LOCK: i64 = 0x6f63_2d6d_6967_7261;

const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE work (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    binding TEXT NOT NULL,
    parent_work TEXT,
    state TEXT NOT NULL,
    input TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    outcome TEXT,
    wake_event TEXT NOT NULL,
    generation BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    blocked_reason TEXT,
    failed_attempts BIGINT NOT NULL DEFAULT 0,
    not_before BIGINT
);
CREATE INDEX work_by_state ON work (state, created_at, id);
CREATE TABLE work_keys (
    key TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES work (id),
    -- The order the Work took its keys in (SQLite's rowid).
    taken BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX work_keys_by_work ON work_keys (work_id, taken);
CREATE TABLE work_usage (work_id TEXT PRIMARY KEY, stored_bytes BIGINT NOT NULL);
CREATE TABLE executions (
    id TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES work (id),
    scope TEXT NOT NULL,
    binding TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    owner TEXT NOT NULL,
    state TEXT NOT NULL,
    cause_event TEXT NOT NULL,
    watermark BIGINT NOT NULL,
    declaration TEXT,
    outcome TEXT,
    exit_code BIGINT,
    pid BIGINT,
    generation BIGINT NOT NULL,
    lease_expires_at BIGINT NOT NULL,
    deadline_at BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at BIGINT,
    stopped_at BIGINT,
    agent_session TEXT,
    agent_usage TEXT
);
CREATE INDEX executions_by_work ON executions (work_id, started_at, id);
CREATE INDEX executions_by_state ON executions (state);
CREATE TABLE events (
    sequence BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    scope TEXT NOT NULL,
    work_id TEXT,
    execution_id TEXT,
    correlation_key TEXT,
    parent_id TEXT,
    root_id TEXT NOT NULL,
    depth BIGINT NOT NULL,
    actor TEXT,
    data TEXT NOT NULL,
    delivery_id TEXT,
    accepted_at BIGINT NOT NULL,
    chain_ordinal BIGINT
);
CREATE UNIQUE INDEX events_by_id ON events (id);
CREATE UNIQUE INDEX events_by_delivery ON events (delivery_id) WHERE delivery_id IS NOT NULL;
CREATE INDEX events_by_work ON events (work_id, sequence) WHERE work_id IS NOT NULL;
CREATE INDEX events_by_key ON events (correlation_key, sequence) WHERE correlation_key IS NOT NULL;
-- Unique here, unlike SQLite's one writer: a chain numbered twice fails loudly.
CREATE UNIQUE INDEX events_chain ON events (root_id, chain_ordinal) INCLUDE (accepted_at)
    WHERE chain_ordinal IS NOT NULL;
CREATE TABLE causal_pins (
    root_id TEXT PRIMARY KEY,
    max_depth BIGINT NOT NULL,
    per_minute BIGINT NOT NULL,
    pinned_at BIGINT NOT NULL
);
CREATE TABLE waits (
    id TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES work (id),
    execution_id TEXT NOT NULL,
    types TEXT NOT NULL,
    keys TEXT NOT NULL,
    watermark BIGINT NOT NULL,
    timeout_at BIGINT,
    state TEXT NOT NULL,
    satisfied_by TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX waits_by_state ON waits (state, timeout_at);
CREATE INDEX waits_by_work ON waits (work_id, state);
CREATE TABLE wait_keys (
    key TEXT NOT NULL,
    wait_id TEXT NOT NULL,
    PRIMARY KEY (key, wait_id)
);
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    digest BYTEA NOT NULL UNIQUE,
    execution_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    binding TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    owner TEXT NOT NULL,
    generation BIGINT NOT NULL,
    operations TEXT NOT NULL,
    issued_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX tokens_by_execution ON tokens (execution_id, epoch);
CREATE INDEX tokens_by_work ON tokens (work_id, epoch);
CREATE INDEX tokens_by_revocation ON tokens (revoked_at);
CREATE INDEX tokens_by_expiry ON tokens (expires_at);
CREATE TABLE operators (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    digest BYTEA NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    revoked_by TEXT
);
CREATE UNIQUE INDEX operators_one_active ON operators (name) WHERE revoked_at IS NULL;
CREATE TABLE config_generations (
    generation BIGINT PRIMARY KEY,
    hash TEXT NOT NULL,
    config TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE scopes (
    id TEXT PRIMARY KEY,
    generation BIGINT NOT NULL,
    parent TEXT,
    enabled BIGINT NOT NULL,
    removed_in BIGINT
);
CREATE TABLE idempotency (
    principal TEXT NOT NULL,
    key TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    status BIGINT NOT NULL,
    response TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_by_created ON idempotency (created_at);
CREATE TABLE toolbelt_requests (
    execution_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    request_id TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    status BIGINT NOT NULL,
    response TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (execution_id, operation, request_id)
);
CREATE INDEX toolbelt_requests_by_created ON toolbelt_requests (created_at);
CREATE TABLE toolbelt_audit (
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
    duration_ms BIGINT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (at, id)
);
CREATE INDEX toolbelt_audit_by_execution ON toolbelt_audit (execution_id, at, id);
CREATE INDEX toolbelt_audit_by_work ON toolbelt_audit (work_id, at, id) WHERE work_id IS NOT NULL;
CREATE TABLE tool_sessions (
    id TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    tool_id TEXT NOT NULL,
    opened_event TEXT NOT NULL,
    opened_at BIGINT NOT NULL,
    outcome TEXT,
    closed_at BIGINT
);
CREATE INDEX tool_sessions_open ON tool_sessions (execution_id) WHERE closed_at IS NULL;
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
    requested_at BIGINT NOT NULL,
    expires_at BIGINT,
    decided_at BIGINT,
    used_by TEXT
);
CREATE INDEX approvals_by_call ON approvals (work_id, operation, input_hash, requested_at);
CREATE TABLE artifacts (
    execution_id TEXT NOT NULL,
    idx BIGINT NOT NULL,
    name TEXT NOT NULL,
    size BIGINT,
    sha256 TEXT,
    refusal TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (execution_id, idx)
);
CREATE TABLE packages (
    name TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    manifest TEXT NOT NULL,
    approved_grant TEXT NOT NULL,
    approved_gating BIGINT NOT NULL,
    installed_at BIGINT NOT NULL
);
"#,
    // 2 (the SQLite store's 21): keys every daemon on the store shares (the cursors').
    r#"
CREATE TABLE shared_keys (
    name TEXT PRIMARY KEY,
    key BYTEA NOT NULL
);
"#,
    // 3 (the SQLite store's 22): what operators changed, by whom and when.
    r#"
CREATE TABLE operator_actions (
    id TEXT PRIMARY KEY,
    at BIGINT NOT NULL,
    principal TEXT NOT NULL,
    route TEXT NOT NULL,
    path TEXT NOT NULL,
    status BIGINT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX operator_actions_by_time ON operator_actions (at, id);
CREATE INDEX operator_actions_by_principal ON operator_actions (principal, at, id);
"#,
    // 4 (the SQLite store's 23): the binding grants each Work took.
    r#"
ALTER TABLE work ADD COLUMN grants TEXT NOT NULL DEFAULT '[]';
"#,
    // 5 (the SQLite store's 24): the input an approval covers.
    r#"
ALTER TABLE approvals ADD COLUMN input TEXT;
"#,
    // 6 (the SQLite store's 28): a Work's audit trail is read through its executions' index.
    r#"
DROP INDEX toolbelt_audit_by_work;
"#,
];

/// The schema version this release writes.
pub const SUPPORTED: i64 = MIGRATIONS.len() as i64;

/// Applies the pending migrations, all in one transaction under the migration lock.
pub fn migrate(client: &mut Client) -> Result<()> {
    migrate_to(client, MIGRATIONS.len())
}

/// Applies the migrations up to schema version `target`.
pub fn migrate_to(client: &mut Client, target: usize) -> Result<()> {
    let mut tx = client.transaction().map_err(backend)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(backend)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .map_err(backend)?;
    let found: i64 = tx
        .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &[])
        .map_err(backend)?
        .get(0);
    check_owned(&mut tx)?;
    if found < 0 {
        return Err(StoreError::Corrupt("schema_migrations holds a negative version".into()));
    }
    if found > SUPPORTED {
        return Err(StoreError::NewerSchema {
            found,
            supported: SUPPORTED,
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().take(target).skip(found as usize) {
        tx.batch_execute(sql).map_err(backend)?;
        let version = index as i64 + 1;
        tx.execute("INSERT INTO schema_migrations (version) VALUES ($1)", &[&version])
            .map_err(backend)?;
    }
    tx.commit().map_err(backend)
}

/// Refuses a `schema_migrations` that another role owns: on a shared server, a role that made it
/// first could skip the migrations and leave the daemon on tables of its own.
fn check_owned(tx: &mut postgres::Transaction<'_>) -> Result<()> {
    let ours: bool = tx
        .query_one(
            "SELECT c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
             FROM pg_class c WHERE c.oid = to_regclass('schema_migrations')",
            &[],
        )
        .map_err(backend)?
        .get(0);
    if ours {
        return Ok(());
    }
    Err(StoreError::Backend(
        "schema_migrations belongs to another role; give the daemon a database or schema of its own".into(),
    ))
}

/// The schema version the database is at (0 before any migration).
pub fn version(client: &mut Client) -> Result<i64> {
    let tracked: bool = client
        .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
        .map_err(backend)?
        .get(0);
    if !tracked {
        return Ok(0);
    }
    let row = client
        .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &[])
        .map_err(backend)?;
    Ok(row.get(0))
}
