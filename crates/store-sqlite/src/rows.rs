//! [`Tx`] over a SQLite transaction: statements and row mapping.

use conduit_core::approval::{Approval, ApprovalState};
use conduit_core::{
    ArtifactRecord, ArtifactRefusal, AuditKind, AuditRecord, CausalPin, Causation, Event, Execution, ExecutionState,
    NewEvent, OperatorRecord, RequestRecord, Role, SessionOutcome, Source, Timestamp, TokenRecord, ToolSession, Wait,
    WaitState, Work, WorkState,
};
use rusqlite::{params, OptionalExtension, Row, Transaction};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{sqlite_error, Result};
use conduit_store::{IdempotentRecord, PackageRecord, Page, ScopeRecord, StoreError, Tx, WorkFilter};

pub struct SqliteTx<'a> {
    pub tx: &'a Transaction<'a>,
}

fn to_json<T: Serialize>(value: &T) -> Result<String> {
    Ok(serde_json::to_string(value)?)
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T> {
    Ok(serde_json::from_str(text)?)
}

fn opt_from_json<T: DeserializeOwned>(text: Option<String>) -> Result<Option<T>> {
    text.as_deref().map(from_json).transpose()
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("unknown {what}"))
}

fn digest(bytes: Vec<u8>) -> Result<[u8; 32]> {
    bytes.try_into().map_err(|_| corrupt("digest length"))
}

const WORK_COLUMNS: &str = "id, scope, binding, parent_work, state, input, epoch, outcome, wake_event, generation, \
     created_at, updated_at, blocked_reason";

/// A work row; its keys are loaded separately.
fn work_row(r: &Row) -> rusqlite::Result<Result<Work>> {
    let state: String = r.get(4)?;
    let input: String = r.get(5)?;
    let outcome: Option<String> = r.get(7)?;
    let build = || -> Result<Work> {
        Ok(Work {
            id: r.get(0).map_err(sqlite_error)?,
            scope: r.get(1).map_err(sqlite_error)?,
            binding: r.get(2).map_err(sqlite_error)?,
            parent_work: r.get(3).map_err(sqlite_error)?,
            state: WorkState::parse(&state).ok_or_else(|| corrupt("work state"))?,
            input: from_json(&input)?,
            keys: Vec::new(),
            epoch: r.get(6).map_err(sqlite_error)?,
            outcome: opt_from_json(outcome)?,
            wake_event: r.get(8).map_err(sqlite_error)?,
            generation: r.get(9).map_err(sqlite_error)?,
            created_at: Timestamp(r.get(10).map_err(sqlite_error)?),
            updated_at: Timestamp(r.get(11).map_err(sqlite_error)?),
            blocked_reason: r.get(12).map_err(sqlite_error)?,
        })
    };
    Ok(build())
}

const EXECUTION_COLUMNS: &str =
    "id, work_id, scope, binding, epoch, owner, state, cause_event, watermark, declaration, \
     outcome, exit_code, pid, generation, lease_expires_at, deadline_at, started_at, ended_at, stopped_at";

fn execution_row(r: &Row) -> rusqlite::Result<Result<Execution>> {
    let state: String = r.get(6)?;
    let declaration: Option<String> = r.get(9)?;
    let outcome: Option<String> = r.get(10)?;
    let build = |state: String, declaration, outcome| -> Result<Execution> {
        Ok(Execution {
            id: r.get(0).map_err(sqlite_error)?,
            work_id: r.get(1).map_err(sqlite_error)?,
            scope: r.get(2).map_err(sqlite_error)?,
            binding: r.get(3).map_err(sqlite_error)?,
            epoch: r.get(4).map_err(sqlite_error)?,
            owner: r.get(5).map_err(sqlite_error)?,
            state: ExecutionState::parse(&state).ok_or_else(|| corrupt("execution state"))?,
            cause_event: r.get(7).map_err(sqlite_error)?,
            watermark: r.get(8).map_err(sqlite_error)?,
            declaration: opt_from_json(declaration)?,
            outcome: opt_from_json(outcome)?,
            exit_code: r.get(11).map_err(sqlite_error)?,
            pid: r.get(12).map_err(sqlite_error)?,
            generation: r.get(13).map_err(sqlite_error)?,
            lease_expires_at: Timestamp(r.get(14).map_err(sqlite_error)?),
            deadline_at: Timestamp(r.get(15).map_err(sqlite_error)?),
            started_at: Timestamp(r.get(16).map_err(sqlite_error)?),
            ended_at: r.get::<_, Option<i64>>(17).map_err(sqlite_error)?.map(Timestamp),
            stopped_at: r.get::<_, Option<i64>>(18).map_err(sqlite_error)?.map(Timestamp),
        })
    };
    Ok(build(state, declaration, outcome))
}

const EVENT_COLUMNS: &str = "sequence, id, type, source, scope, work_id, execution_id, correlation_key, parent_id, \
     root_id, depth, actor, data, accepted_at";

fn event_row(r: &Row) -> rusqlite::Result<Result<Event>> {
    let source: String = r.get(3)?;
    let data: String = r.get(12)?;
    let build = || -> Result<Event> {
        Ok(Event {
            sequence: r.get(0).map_err(sqlite_error)?,
            id: r.get(1).map_err(sqlite_error)?,
            event_type: r.get(2).map_err(sqlite_error)?,
            source: Source::from_wire(&source).ok_or_else(|| corrupt("event source"))?,
            scope: r.get(4).map_err(sqlite_error)?,
            work_id: r.get(5).map_err(sqlite_error)?,
            execution_id: r.get(6).map_err(sqlite_error)?,
            correlation_key: r.get(7).map_err(sqlite_error)?,
            causation: Causation {
                parent: r.get(8).map_err(sqlite_error)?,
                root: r.get(9).map_err(sqlite_error)?,
                depth: r.get(10).map_err(sqlite_error)?,
            },
            actor: r.get(11).map_err(sqlite_error)?,
            data: from_json(&data)?,
            accepted_at: Timestamp(r.get(13).map_err(sqlite_error)?),
        })
    };
    Ok(build())
}

const WAIT_COLUMNS: &str =
    "id, work_id, execution_id, types, keys, watermark, timeout_at, state, satisfied_by, created_at";

fn wait_row(r: &Row) -> rusqlite::Result<Result<Wait>> {
    let types: String = r.get(3)?;
    let keys: String = r.get(4)?;
    let state: String = r.get(7)?;
    let build = || -> Result<Wait> {
        Ok(Wait {
            id: r.get(0).map_err(sqlite_error)?,
            work_id: r.get(1).map_err(sqlite_error)?,
            execution_id: r.get(2).map_err(sqlite_error)?,
            types: from_json(&types)?,
            keys: from_json(&keys)?,
            watermark: r.get(5).map_err(sqlite_error)?,
            timeout_at: r.get::<_, Option<i64>>(6).map_err(sqlite_error)?.map(Timestamp),
            state: WaitState::parse(&state).ok_or_else(|| corrupt("wait state"))?,
            satisfied_by: r.get(8).map_err(sqlite_error)?,
            created_at: Timestamp(r.get(9).map_err(sqlite_error)?),
        })
    };
    Ok(build())
}

const TOKEN_COLUMNS: &str = "id, digest, execution_id, work_id, scope, binding, epoch, owner, generation, operations, \
     issued_at, expires_at, revoked_at";

fn token_row(r: &Row) -> rusqlite::Result<Result<TokenRecord>> {
    let digest_bytes: Vec<u8> = r.get(1)?;
    let operations: String = r.get(9)?;
    let build = || -> Result<TokenRecord> {
        Ok(TokenRecord {
            id: r.get(0).map_err(sqlite_error)?,
            digest: digest(digest_bytes)?,
            execution_id: r.get(2).map_err(sqlite_error)?,
            work_id: r.get(3).map_err(sqlite_error)?,
            scope: r.get(4).map_err(sqlite_error)?,
            binding: r.get(5).map_err(sqlite_error)?,
            epoch: r.get(6).map_err(sqlite_error)?,
            owner: r.get(7).map_err(sqlite_error)?,
            generation: r.get(8).map_err(sqlite_error)?,
            operations: from_json(&operations)?,
            issued_at: Timestamp(r.get(10).map_err(sqlite_error)?),
            expires_at: Timestamp(r.get(11).map_err(sqlite_error)?),
            revoked_at: r.get::<_, Option<i64>>(12).map_err(sqlite_error)?.map(Timestamp),
        })
    };
    Ok(build())
}

const REQUEST_COLUMNS: &str = "execution_id, operation, request_id, body_hash, status, response, created_at";

fn request_row(r: &Row) -> rusqlite::Result<Result<RequestRecord>> {
    let response: String = r.get(5)?;
    let build = || -> Result<RequestRecord> {
        Ok(RequestRecord {
            execution_id: r.get(0).map_err(sqlite_error)?,
            operation: r.get(1).map_err(sqlite_error)?,
            request_id: r.get(2).map_err(sqlite_error)?,
            body_hash: r.get(3).map_err(sqlite_error)?,
            status: r.get(4).map_err(sqlite_error)?,
            response: from_json(&response)?,
            created_at: Timestamp(r.get(6).map_err(sqlite_error)?),
        })
    };
    Ok(build())
}

const AUDIT_COLUMNS: &str = "id, kind, operation, execution_id, work_id, scope, request_id, result, gate, refusal, \
     input_hash, duration_ms, at";

fn audit_row(r: &Row) -> rusqlite::Result<Result<AuditRecord>> {
    let kind: String = r.get(1)?;
    let build = || -> Result<AuditRecord> {
        Ok(AuditRecord {
            id: r.get(0).map_err(sqlite_error)?,
            kind: AuditKind::parse(&kind).ok_or_else(|| corrupt("audit kind"))?,
            operation: r.get(2).map_err(sqlite_error)?,
            execution_id: r.get(3).map_err(sqlite_error)?,
            work_id: r.get(4).map_err(sqlite_error)?,
            scope: r.get(5).map_err(sqlite_error)?,
            request_id: r.get(6).map_err(sqlite_error)?,
            result: r.get(7).map_err(sqlite_error)?,
            gate: r.get(8).map_err(sqlite_error)?,
            refusal: r.get(9).map_err(sqlite_error)?,
            input_hash: r.get(10).map_err(sqlite_error)?,
            duration_ms: r.get(11).map_err(sqlite_error)?,
            at: Timestamp(r.get(12).map_err(sqlite_error)?),
        })
    };
    Ok(build())
}

const OPERATOR_COLUMNS: &str = "id, name, role, digest, created_at, revoked_at";

const ARTIFACT_COLUMNS: &str = "execution_id, idx, name, size, sha256, refusal, created_at";

fn artifact_row(r: &Row) -> rusqlite::Result<Result<ArtifactRecord>> {
    let kept = match (
        r.get::<_, Option<i64>>(3)?,
        r.get::<_, Option<String>>(4)?,
        r.get::<_, Option<String>>(5)?,
    ) {
        (Some(size), Some(sha256), None) => Ok(Ok((size as u64, sha256))),
        (None, None, Some(code)) => ArtifactRefusal::parse(&code)
            .map(Err)
            .ok_or_else(|| corrupt("artifact refusal")),
        _ => Err(corrupt("artifact")),
    };
    let build = |kept| -> Result<ArtifactRecord> {
        Ok(ArtifactRecord {
            execution_id: r.get(0).map_err(sqlite_error)?,
            index: r.get(1).map_err(sqlite_error)?,
            name: r.get(2).map_err(sqlite_error)?,
            kept,
            created_at: Timestamp(r.get(6).map_err(sqlite_error)?),
        })
    };
    Ok(kept.and_then(build))
}

const SESSION_COLUMNS: &str = "id, execution_id, work_id, scope, tool_id, opened_event, opened_at, outcome, closed_at";

fn session_row(r: &Row) -> rusqlite::Result<Result<ToolSession>> {
    let closed = match (r.get::<_, Option<String>>(7)?, r.get::<_, Option<i64>>(8)?) {
        (Some(outcome), Some(at)) => SessionOutcome::parse(&outcome)
            .map(|o| Some((o, Timestamp(at))))
            .ok_or_else(|| corrupt("session outcome")),
        (None, None) => Ok(None),
        _ => Err(corrupt("session")),
    };
    let build = |closed| -> Result<ToolSession> {
        Ok(ToolSession {
            id: r.get(0).map_err(sqlite_error)?,
            execution_id: r.get(1).map_err(sqlite_error)?,
            work_id: r.get(2).map_err(sqlite_error)?,
            scope: r.get(3).map_err(sqlite_error)?,
            tool_id: r.get(4).map_err(sqlite_error)?,
            opened_event: r.get(5).map_err(sqlite_error)?,
            opened_at: Timestamp(r.get(6).map_err(sqlite_error)?),
            closed,
        })
    };
    Ok(closed.and_then(build))
}

const APPROVAL_COLUMNS: &str = "id, work_id, execution_id, scope, operation, input_hash, approvers, state, reason, \
     decided_by, requested_at, expires_at, decided_at, used_by";

fn approval_row(r: &Row) -> rusqlite::Result<Result<Approval>> {
    let approvers: String = r.get(6)?;
    let state: String = r.get(7)?;
    let build = |approvers| -> Result<Approval> {
        Ok(Approval {
            id: r.get(0).map_err(sqlite_error)?,
            work_id: r.get(1).map_err(sqlite_error)?,
            execution_id: r.get(2).map_err(sqlite_error)?,
            scope: r.get(3).map_err(sqlite_error)?,
            operation: r.get(4).map_err(sqlite_error)?,
            input_hash: r.get(5).map_err(sqlite_error)?,
            approvers,
            state: ApprovalState::parse(&state).ok_or_else(|| corrupt("approval state"))?,
            reason: r.get(8).map_err(sqlite_error)?,
            decided_by: r.get(9).map_err(sqlite_error)?,
            requested_at: Timestamp(r.get(10).map_err(sqlite_error)?),
            expires_at: r.get::<_, Option<i64>>(11).map_err(sqlite_error)?.map(Timestamp),
            decided_at: r.get::<_, Option<i64>>(12).map_err(sqlite_error)?.map(Timestamp),
            used_by: r.get(13).map_err(sqlite_error)?,
        })
    };
    Ok(from_json(&approvers).and_then(build))
}

const PACKAGE_COLUMNS: &str = "name, version, manifest, approved_grant, approved_gating, installed_at";

fn package_row(r: &Row) -> rusqlite::Result<Result<PackageRecord>> {
    let grant: String = r.get(3)?;
    let build = |approved_grant| -> Result<PackageRecord> {
        Ok(PackageRecord {
            name: r.get(0).map_err(sqlite_error)?,
            version: r.get(1).map_err(sqlite_error)?,
            manifest: r.get(2).map_err(sqlite_error)?,
            approved_grant,
            approved_gating: r.get(4).map_err(sqlite_error)?,
            installed_at: Timestamp(r.get(5).map_err(sqlite_error)?),
        })
    };
    Ok(from_json(&grant).and_then(build))
}

fn operator_row(r: &Row) -> rusqlite::Result<Result<OperatorRecord>> {
    let role: String = r.get(2)?;
    let digest_bytes: Vec<u8> = r.get(3)?;
    let build = || -> Result<OperatorRecord> {
        Ok(OperatorRecord {
            id: r.get(0).map_err(sqlite_error)?,
            name: r.get(1).map_err(sqlite_error)?,
            role: Role::parse(&role).ok_or_else(|| corrupt("operator role"))?,
            digest: digest(digest_bytes)?,
            created_at: Timestamp(r.get(4).map_err(sqlite_error)?),
            revoked_at: r.get::<_, Option<i64>>(5).map_err(sqlite_error)?.map(Timestamp),
        })
    };
    Ok(build())
}

impl SqliteTx<'_> {
    /// Runs a query whose row mapper itself returns a `Result`, flattening both layers.
    fn query_all<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        map: impl FnMut(&Row) -> rusqlite::Result<Result<T>>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.tx.prepare_cached(sql).map_err(sqlite_error)?;
        let rows = stmt.query_map(params, map).map_err(sqlite_error)?;
        rows.map(|r| r.map_err(sqlite_error)?).collect()
    }

    fn query_one<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        map: impl FnOnce(&Row) -> rusqlite::Result<Result<T>>,
    ) -> Result<Option<T>> {
        let mut stmt = self.tx.prepare_cached(sql).map_err(sqlite_error)?;
        stmt.query_row(params, map)
            .optional()
            .map_err(sqlite_error)?
            .transpose()
    }

    /// Executes a statement through the connection's prepared-statement cache.
    fn exec(&self, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
        self.tx.prepare_cached(sql)?.execute(params)
    }

    fn work_keys(&self, work_id: &str) -> Result<Vec<String>> {
        let mut stmt = self
            .tx
            .prepare_cached("SELECT key FROM work_keys WHERE work_id = ?1 ORDER BY rowid")
            .map_err(sqlite_error)?;
        let keys = stmt
            .query_map([work_id], |r| r.get(0))
            .map_err(sqlite_error)?
            .collect::<rusqlite::Result<Vec<String>>>()
            .map_err(sqlite_error)?;
        Ok(keys)
    }

    fn works(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<Work>> {
        let mut works = self.query_all(sql, params, work_row)?;
        for work in &mut works {
            work.keys = self.work_keys(&work.id)?;
        }
        Ok(works)
    }
}

impl Tx for SqliteTx<'_> {
    fn latest_generation(&mut self) -> Result<Option<(i64, String, String)>> {
        let sql = "SELECT generation, hash, config FROM config_generations ORDER BY generation DESC LIMIT 1";
        self.tx
            .query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
            .map_err(sqlite_error)
    }

    fn generation_hash(&mut self, generation: i64) -> Result<Option<String>> {
        let sql = "SELECT hash FROM config_generations WHERE generation = ?1";
        self.tx
            .query_row(sql, [generation], |r| r.get(0))
            .optional()
            .map_err(sqlite_error)
    }

    fn insert_generation(&mut self, generation: i64, hash: &str, config_json: &str, at: Timestamp) -> Result<()> {
        self.exec(
            "INSERT INTO config_generations (generation, hash, config, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![generation, hash, config_json, at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn upsert_scope(&mut self, id: &str, generation: i64, parent: Option<&str>, enabled: bool) -> Result<()> {
        self.exec(
            "INSERT INTO scopes (id, generation, parent, enabled) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET generation = ?2, parent = ?3, enabled = ?4, removed_in = NULL",
            params![id, generation, parent, enabled],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn tombstone_scopes(&mut self, kept: &[String], generation: i64) -> Result<()> {
        let live: Vec<String> = {
            let mut stmt = self
                .tx
                .prepare_cached("SELECT id FROM scopes WHERE removed_in IS NULL")
                .map_err(sqlite_error)?;
            let ids = stmt
                .query_map([], |r| r.get(0))
                .map_err(sqlite_error)?
                .collect::<rusqlite::Result<Vec<String>>>()
                .map_err(sqlite_error)?;
            ids
        };
        for id in live.iter().filter(|id| !kept.contains(id)) {
            self.exec(
                "UPDATE scopes SET removed_in = ?2, enabled = 0 WHERE id = ?1",
                params![id, generation],
            )
            .map_err(sqlite_error)?;
        }
        Ok(())
    }

    fn list_scopes(&mut self) -> Result<Vec<ScopeRecord>> {
        let mut stmt = self
            .tx
            .prepare_cached("SELECT id, generation, parent, enabled, removed_in FROM scopes ORDER BY id")
            .map_err(sqlite_error)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(ScopeRecord {
                    id: r.get(0)?,
                    generation: r.get(1)?,
                    parent: r.get(2)?,
                    enabled: r.get(3)?,
                    removed_in: r.get(4)?,
                })
            })
            .map_err(sqlite_error)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sqlite_error)
    }

    fn insert_work(&mut self, work: &Work) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO work ({WORK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
            ),
            params![
                work.id,
                work.scope,
                work.binding,
                work.parent_work,
                work.state.as_str(),
                to_json(&work.input)?,
                work.epoch,
                work.outcome.as_ref().map(to_json).transpose()?,
                work.wake_event,
                work.generation,
                work.created_at.0,
                work.updated_at.0,
                work.blocked_reason
            ],
        )
        .map_err(sqlite_error)?;
        for key in &work.keys {
            let inserted = self
                .exec(
                    "INSERT OR IGNORE INTO work_keys (key, work_id) VALUES (?1, ?2)",
                    params![key, work.id],
                )
                .map_err(sqlite_error)?;
            if inserted == 0 {
                return Err(StoreError::KeyTaken);
            }
        }
        Ok(())
    }

    fn get_work(&mut self, id: &str) -> Result<Option<Work>> {
        let sql = format!("SELECT {WORK_COLUMNS} FROM work WHERE id = ?1");
        Ok(self.works(&sql, [id])?.pop())
    }

    fn update_work(&mut self, work: &Work) -> Result<()> {
        self.exec(
            "UPDATE work SET state = ?2, epoch = ?3, outcome = ?4, wake_event = ?5, updated_at = ?6, blocked_reason = ?7
             WHERE id = ?1",
            params![
                work.id,
                work.state.as_str(),
                work.epoch,
                work.outcome.as_ref().map(to_json).transpose()?,
                work.wake_event,
                work.updated_at.0,
                work.blocked_reason
            ],
        ).map_err(sqlite_error)?;
        Ok(())
    }

    fn list_work(&mut self, filter: &WorkFilter) -> Result<Vec<Work>> {
        let sql = format!(
            "SELECT {WORK_COLUMNS} FROM work WHERE (?1 IS NULL OR scope = ?1) AND (?2 IS NULL OR state = ?2)
             ORDER BY created_at DESC, id DESC LIMIT 500"
        );
        self.works(&sql, params![filter.scope, filter.state.map(WorkState::as_str)])
    }

    fn page_work(&mut self, filter: &WorkFilter, page: &Page<(i64, String)>) -> Result<Vec<Work>> {
        let (at, id) = page.after.clone().unwrap_or((i64::MAX, String::new()));
        let sql = format!(
            "SELECT {WORK_COLUMNS} FROM work WHERE (?1 IS NULL OR scope = ?1) AND (?2 IS NULL OR state = ?2)
             AND created_at <= ?3 AND (created_at < ?4 OR (created_at = ?4 AND ?5 != '' AND id < ?5))
             ORDER BY created_at DESC, id DESC LIMIT ?6"
        );
        let state = filter.state.map(WorkState::as_str);
        self.works(
            &sql,
            params![filter.scope, state, page.upper, at, id, page.limit as i64],
        )
    }

    fn ready_work(&mut self, limit: usize) -> Result<Vec<Work>> {
        let sql = format!(
            "SELECT {WORK_COLUMNS} FROM work WHERE state = 'ready' AND blocked_reason IS NULL ORDER BY updated_at, id LIMIT ?1"
        );
        self.works(&sql, [limit as i64])
    }

    fn work_owning_key(&mut self, key: &str) -> Result<Option<String>> {
        self.tx
            .query_row("SELECT work_id FROM work_keys WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(sqlite_error)
    }

    fn count_unfinished_work(&mut self, scope: &str) -> Result<u64> {
        let sql = "SELECT COUNT(*) FROM work WHERE scope = ?1 AND state IN ('ready', 'running', 'waiting')";
        self.tx.query_row(sql, [scope], |r| r.get(0)).map_err(sqlite_error)
    }

    fn insert_execution(&mut self, x: &Execution) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO executions ({EXECUTION_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"
            ),
            params![
                x.id,
                x.work_id,
                x.scope,
                x.binding,
                x.epoch,
                x.owner,
                x.state.as_str(),
                x.cause_event,
                x.watermark,
                x.declaration.as_ref().map(to_json).transpose()?,
                x.outcome.as_ref().map(to_json).transpose()?,
                x.exit_code,
                x.pid,
                x.generation,
                x.lease_expires_at.0,
                x.deadline_at.0,
                x.started_at.0,
                x.ended_at.map(|t| t.0),
                x.stopped_at.map(|t| t.0)
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn get_execution(&mut self, id: &str) -> Result<Option<Execution>> {
        self.query_one(
            &format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = ?1"),
            [id],
            execution_row,
        )
    }

    fn update_execution(&mut self, x: &Execution) -> Result<()> {
        self.exec(
            "UPDATE executions SET epoch = ?2, owner = ?3, state = ?4, declaration = ?5, outcome = ?6, exit_code = ?7,
             pid = ?8, lease_expires_at = ?9, ended_at = ?10, stopped_at = ?11 WHERE id = ?1",
            params![
                x.id,
                x.epoch,
                x.owner,
                x.state.as_str(),
                x.declaration.as_ref().map(to_json).transpose()?,
                x.outcome.as_ref().map(to_json).transpose()?,
                x.exit_code,
                x.pid,
                x.lease_expires_at.0,
                x.ended_at.map(|t| t.0),
                x.stopped_at.map(|t| t.0)
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn list_executions(&mut self, work: Option<&str>) -> Result<Vec<Execution>> {
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE (?1 IS NULL OR work_id = ?1)
             ORDER BY started_at, id LIMIT 500"
        );
        self.query_all(&sql, [work], execution_row)
    }

    fn page_executions(&mut self, work: Option<&str>, page: &Page<(i64, String)>) -> Result<Vec<Execution>> {
        let (at, id) = page.after.clone().unwrap_or((i64::MIN, String::new()));
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE (?1 IS NULL OR work_id = ?1) AND started_at <= ?2
             AND (started_at > ?3 OR (started_at = ?3 AND id > ?4)) ORDER BY started_at, id LIMIT ?5"
        );
        self.query_all(
            &sql,
            params![work, page.upper, at, id, page.limit as i64],
            execution_row,
        )
    }

    fn executions_in_state(&mut self, state: ExecutionState) -> Result<Vec<Execution>> {
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE state = ?1 ORDER BY started_at, id");
        self.query_all(&sql, [state.as_str()], execution_row)
    }

    fn insert_event(&mut self, e: NewEvent) -> Result<Event> {
        self.exec(
            "INSERT INTO events (id, type, source, scope, work_id, execution_id, correlation_key, parent_id, root_id,
                 depth, actor, data, accepted_at, delivery_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                e.id,
                e.event_type,
                e.source.to_wire(),
                e.scope,
                e.work_id,
                e.execution_id,
                e.correlation_key,
                e.causation.parent,
                e.causation.root,
                e.causation.depth,
                if e.source == Source::Manual {
                    e.actor.clone()
                } else {
                    None
                },
                to_json(&e.data)?,
                e.accepted_at.0,
                e.delivery_id
            ],
        )
        .map_err(sqlite_error)?;
        Ok(e.into_event(self.tx.last_insert_rowid()))
    }

    fn get_event(&mut self, id: &str) -> Result<Option<Event>> {
        self.query_one(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ?1"),
            [id],
            event_row,
        )
    }

    fn list_events(&mut self, work: Option<&str>, limit: usize) -> Result<Vec<Event>> {
        let sql =
            format!("SELECT {EVENT_COLUMNS} FROM events WHERE (?1 IS NULL OR work_id = ?1) ORDER BY sequence LIMIT ?2");
        self.query_all(&sql, params![work, limit as i64], event_row)
    }

    fn page_events(&mut self, work: Option<&str>, page: &Page<i64>) -> Result<Vec<Event>> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE (?1 IS NULL OR work_id = ?1) AND sequence > ?2 AND sequence <= ?3
             ORDER BY sequence LIMIT ?4"
        );
        let after = page.after.unwrap_or(0);
        self.query_all(&sql, params![work, after, page.upper, page.limit as i64], event_row)
    }

    fn events_after_for_keys(&mut self, sequence: i64, keys: &[String]) -> Result<Vec<Event>> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE correlation_key = ?1 AND sequence > ?2 ORDER BY sequence"
        );
        let mut found = Vec::new();
        for key in keys {
            found.extend(self.query_all(&sql, params![key, sequence], event_row)?);
        }
        found.sort_by_key(|e| e.sequence);
        Ok(found)
    }

    fn max_sequence(&mut self) -> Result<i64> {
        self.tx
            .query_row("SELECT COALESCE(MAX(sequence), 0) FROM events", [], |r| r.get(0))
            .map_err(sqlite_error)
    }

    fn event_by_delivery(&mut self, delivery_id: &str) -> Result<Option<Event>> {
        self.query_one(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE delivery_id = ?1"),
            [delivery_id],
            event_row,
        )
    }

    fn count_root_events_since(&mut self, root: &str, since: Timestamp) -> Result<u64> {
        // The toolbelt's call records are not causal links: they do not count against a chain's rate.
        let sql = "SELECT COUNT(*) FROM events WHERE root_id = ?1 AND accepted_at >= ?2 AND source != 'core.toolbelt'";
        self.tx
            .query_row(sql, params![root, since.0], |r| r.get(0))
            .map_err(sqlite_error)
    }

    fn causal_pin(&mut self, root: &str) -> Result<Option<CausalPin>> {
        let sql = "SELECT max_depth, per_minute FROM causal_pins WHERE root_id = ?1";
        let pin = self.tx.query_row(sql, [root], |r| {
            Ok(CausalPin {
                max_depth: r.get(0)?,
                per_minute: r.get(1)?,
            })
        });
        pin.optional().map_err(sqlite_error)
    }

    fn insert_causal_pin(&mut self, root: &str, pin: CausalPin, at: Timestamp) -> Result<()> {
        self.exec(
            "INSERT OR IGNORE INTO causal_pins (root_id, max_depth, per_minute, pinned_at) VALUES (?1, ?2, ?3, ?4)",
            params![root, pin.max_depth, pin.per_minute, at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn insert_wait(&mut self, w: &Wait) -> Result<()> {
        self.exec(
            &format!("INSERT INTO waits ({WAIT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
            params![
                w.id,
                w.work_id,
                w.execution_id,
                to_json(&w.types)?,
                to_json(&w.keys)?,
                w.watermark,
                w.timeout_at.map(|t| t.0),
                w.state.as_str(),
                w.satisfied_by,
                w.created_at.0
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn armed_waits(&mut self) -> Result<Vec<Wait>> {
        let sql = format!("SELECT {WAIT_COLUMNS} FROM waits WHERE state = 'armed' ORDER BY created_at, id");
        self.query_all(&sql, [], wait_row)
    }

    fn list_waits(&mut self, work: Option<&str>, limit: usize) -> Result<Vec<Wait>> {
        let sql = format!(
            "SELECT {WAIT_COLUMNS} FROM waits WHERE (?1 IS NULL OR work_id = ?1) ORDER BY created_at, id LIMIT ?2"
        );
        self.query_all(&sql, params![work, limit as i64], wait_row)
    }

    fn update_wait(&mut self, w: &Wait) -> Result<()> {
        self.exec(
            "UPDATE waits SET state = ?2, satisfied_by = ?3 WHERE id = ?1",
            params![w.id, w.state.as_str(), w.satisfied_by],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn insert_token(&mut self, t: &TokenRecord) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
            ),
            params![
                t.id,
                &t.digest[..],
                t.execution_id,
                t.work_id,
                t.scope,
                t.binding,
                t.epoch,
                t.owner,
                t.generation,
                to_json(&t.operations)?,
                t.issued_at.0,
                t.expires_at.0,
                t.revoked_at.map(|r| r.0)
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn token_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<TokenRecord>> {
        self.query_one(
            &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE digest = ?1"),
            [&digest[..]],
            token_row,
        )
    }

    fn revoke_tokens_below(&mut self, work_id: &str, epoch: u32, at: Timestamp) -> Result<()> {
        self.exec(
            "UPDATE tokens SET revoked_at = ?3 WHERE work_id = ?1 AND epoch < ?2 AND revoked_at IS NULL",
            params![work_id, epoch, at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn revoke_execution_tokens(&mut self, execution_id: &str, at: Timestamp) -> Result<()> {
        self.exec(
            "UPDATE tokens SET revoked_at = ?2 WHERE execution_id = ?1 AND revoked_at IS NULL",
            params![execution_id, at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn delete_tokens_settled_before(&mut self, cutoff: Timestamp) -> Result<usize> {
        self.exec(
            "DELETE FROM tokens WHERE revoked_at < ?1 OR expires_at < ?1",
            [cutoff.0],
        )
        .map_err(sqlite_error)
    }

    fn get_request(&mut self, execution_id: &str, operation: &str, request_id: &str) -> Result<Option<RequestRecord>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM toolbelt_requests WHERE execution_id = ?1 AND operation = ?2 AND request_id = ?3"
        );
        self.query_one(&sql, params![execution_id, operation, request_id], request_row)
    }

    fn insert_request(&mut self, r: &RequestRecord) -> Result<()> {
        self.exec(
            &format!("INSERT INTO toolbelt_requests ({REQUEST_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            params![
                r.execution_id,
                r.operation,
                r.request_id,
                r.body_hash,
                r.status,
                to_json(&r.response)?,
                r.created_at.0
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn delete_finished_requests_before(&mut self, cutoff: Timestamp) -> Result<usize> {
        self.exec(
            "DELETE FROM toolbelt_requests WHERE created_at < ?1 AND execution_id IN
                 (SELECT id FROM executions WHERE state != 'running')",
            [cutoff.0],
        )
        .map_err(sqlite_error)
    }

    fn insert_audit(&mut self, a: &AuditRecord) -> Result<()> {
        self.exec(
            &format!("INSERT INTO toolbelt_audit ({AUDIT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
            params![
                a.id,
                a.kind.as_str(),
                a.operation,
                a.execution_id,
                a.work_id,
                a.scope,
                a.request_id,
                a.result,
                a.gate,
                a.refusal,
                a.input_hash,
                a.duration_ms,
                a.at.0
            ],
        ).map_err(sqlite_error)?;
        Ok(())
    }

    fn list_audit(&mut self, execution: Option<&str>, limit: usize) -> Result<Vec<AuditRecord>> {
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM toolbelt_audit WHERE (?1 IS NULL OR execution_id = ?1) ORDER BY at, id LIMIT ?2"
        );
        self.query_all(&sql, params![execution, limit as i64], audit_row)
    }

    fn get_idempotent(&mut self, principal: &str, key: &str) -> Result<Option<IdempotentRecord>> {
        let sql = "SELECT principal, key, method, path, body_hash, status, response, created_at FROM idempotency
                   WHERE principal = ?1 AND key = ?2";
        self.query_one(sql, params![principal, key], |r| {
            let response: String = r.get(6)?;
            let build = || -> Result<IdempotentRecord> {
                Ok(IdempotentRecord {
                    principal: r.get(0).map_err(sqlite_error)?,
                    key: r.get(1).map_err(sqlite_error)?,
                    method: r.get(2).map_err(sqlite_error)?,
                    path: r.get(3).map_err(sqlite_error)?,
                    body_hash: r.get(4).map_err(sqlite_error)?,
                    status: r.get(5).map_err(sqlite_error)?,
                    response: from_json(&response)?,
                    created_at: Timestamp(r.get(7).map_err(sqlite_error)?),
                })
            };
            Ok(build())
        })
    }

    fn insert_idempotent(&mut self, i: &IdempotentRecord) -> Result<()> {
        self.exec(
            "INSERT INTO idempotency (principal, key, method, path, body_hash, status, response, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                i.principal,
                i.key,
                i.method,
                i.path,
                i.body_hash,
                i.status,
                to_json(&i.response)?,
                i.created_at.0
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn delete_idempotent_before(&mut self, cutoff: Timestamp) -> Result<usize> {
        self.exec("DELETE FROM idempotency WHERE created_at < ?1", [cutoff.0])
            .map_err(sqlite_error)
    }

    fn revoke_token(&mut self, id: &str, at: Timestamp) -> Result<bool> {
        let changed = self
            .exec(
                "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id, at.0],
            )
            .map_err(sqlite_error)?;
        Ok(changed > 0)
    }

    fn tokens_of_execution(&mut self, execution_id: &str) -> Result<Vec<TokenRecord>> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE execution_id = ?1 ORDER BY issued_at, id");
        self.query_all(&sql, [execution_id], token_row)
    }

    fn get_operator(&mut self, id: &str) -> Result<Option<OperatorRecord>> {
        self.query_one(
            &format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE id = ?1"),
            [id],
            operator_row,
        )
    }

    fn list_operators(&mut self) -> Result<Vec<OperatorRecord>> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE revoked_at IS NULL ORDER BY name");
        self.query_all(&sql, [], operator_row)
    }

    fn put_artifact(&mut self, a: &ArtifactRecord) -> Result<()> {
        let (size, sha256, refusal) = match &a.kept {
            Ok((size, sha256)) => (Some(*size as i64), Some(sha256.as_str()), None),
            Err(refusal) => (None, None, Some(refusal.as_str())),
        };
        self.exec(
            &format!("INSERT OR REPLACE INTO artifacts ({ARTIFACT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            params![a.execution_id, a.index, a.name, size, sha256, refusal, a.created_at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn get_artifact(&mut self, execution_id: &str, index: u32) -> Result<Option<ArtifactRecord>> {
        let sql = format!("SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE execution_id = ?1 AND idx = ?2");
        self.query_one(&sql, params![execution_id, index], artifact_row)
    }

    fn list_artifacts(&mut self, execution: Option<&str>) -> Result<Vec<ArtifactRecord>> {
        let sql = format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE (?1 IS NULL OR execution_id = ?1) ORDER BY execution_id, idx"
        );
        self.query_all(&sql, params![execution], artifact_row)
    }

    fn put_approval(&mut self, a: &Approval) -> Result<()> {
        self.exec(
            &format!(
                "INSERT OR REPLACE INTO approvals ({APPROVAL_COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
            ),
            params![
                a.id,
                a.work_id,
                a.execution_id,
                a.scope,
                a.operation,
                a.input_hash,
                to_json(&a.approvers)?,
                a.state.as_str(),
                a.reason,
                a.decided_by,
                a.requested_at.0,
                a.expires_at.map(|t| t.0),
                a.decided_at.map(|t| t.0),
                a.used_by
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn get_approval(&mut self, id: &str) -> Result<Option<Approval>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1");
        self.query_one(&sql, [id], approval_row)
    }

    fn approval_for(&mut self, work_id: &str, operation: &str, input_hash: &str) -> Result<Option<Approval>> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE work_id = ?1 AND operation = ?2 AND input_hash = ?3 \
             ORDER BY requested_at DESC, id DESC LIMIT 1"
        );
        self.query_one(&sql, params![work_id, operation, input_hash], approval_row)
    }

    fn list_approvals(&mut self, state: Option<ApprovalState>) -> Result<Vec<Approval>> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE (?1 IS NULL OR state = ?1) ORDER BY requested_at, id"
        );
        self.query_all(&sql, params![state.map(ApprovalState::as_str)], approval_row)
    }

    fn put_package(&mut self, p: &PackageRecord) -> Result<()> {
        self.exec(
            &format!("INSERT OR REPLACE INTO packages ({PACKAGE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
            params![
                p.name,
                p.version,
                p.manifest,
                to_json(&p.approved_grant)?,
                p.approved_gating,
                p.installed_at.0
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn get_package(&mut self, name: &str) -> Result<Option<PackageRecord>> {
        let sql = format!("SELECT {PACKAGE_COLUMNS} FROM packages WHERE name = ?1");
        self.query_one(&sql, [name], package_row)
    }

    fn list_packages(&mut self) -> Result<Vec<PackageRecord>> {
        let sql = format!("SELECT {PACKAGE_COLUMNS} FROM packages ORDER BY name");
        self.query_all(&sql, [], package_row)
    }

    fn delete_package(&mut self, name: &str) -> Result<bool> {
        Ok(self
            .exec("DELETE FROM packages WHERE name = ?1", [name])
            .map_err(sqlite_error)?
            > 0)
    }

    fn insert_tool_session(&mut self, t: &ToolSession) -> Result<()> {
        self.exec(
            &format!("INSERT INTO tool_sessions ({SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
            params![
                t.id,
                t.execution_id,
                t.work_id,
                t.scope,
                t.tool_id,
                t.opened_event,
                t.opened_at.0,
                t.closed.map(|(o, _)| o.as_str()),
                t.closed.map(|(_, at)| at.0)
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn get_tool_session(&mut self, id: &str) -> Result<Option<ToolSession>> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM tool_sessions WHERE id = ?1");
        self.query_one(&sql, [id], session_row)
    }

    fn close_tool_session(&mut self, id: &str, outcome: SessionOutcome, at: Timestamp) -> Result<()> {
        self.exec(
            "UPDATE tool_sessions SET outcome = ?2, closed_at = ?3 WHERE id = ?1 AND closed_at IS NULL",
            params![id, outcome.as_str(), at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn open_tool_sessions(&mut self, execution_id: &str) -> Result<Vec<ToolSession>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM tool_sessions WHERE execution_id = ?1 AND closed_at IS NULL ORDER BY opened_at, id"
        );
        self.query_all(&sql, [execution_id], session_row)
    }

    fn insert_operator(&mut self, o: &OperatorRecord) -> Result<()> {
        self.exec(
            &format!("INSERT INTO operators ({OPERATOR_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
            params![
                o.id,
                o.name,
                o.role.as_str(),
                &o.digest[..],
                o.created_at.0,
                o.revoked_at.map(|t| t.0)
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn operator_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<OperatorRecord>> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE digest = ?1");
        self.query_one(&sql, [&digest[..]], operator_row)
    }

    fn active_operator(&mut self, name: &str) -> Result<Option<OperatorRecord>> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE name = ?1 AND revoked_at IS NULL");
        self.query_one(&sql, [name], operator_row)
    }

    fn revoke_operator(&mut self, id: &str, at: Timestamp) -> Result<()> {
        self.exec(
            "UPDATE operators SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            params![id, at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }
}
