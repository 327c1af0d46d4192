//! Work and its correlation keys: the statements and row mapping of [`WorkRows`].

use crate::{args, Arg, Dialect, Row};
use conduit_core::{Timestamp, Work, WorkState};
use conduit_store::{Page, StoreError, WorkFilter, WorkRows};

use super::{corrupt, from_json, opt_from_json, to_json, SqlTx};
use crate::Result;

pub(super) const WORK_COLUMNS: &str =
    "id, scope, binding, parent_work, state, input, epoch, outcome, wake_event, generation, \
     created_at, updated_at, blocked_reason, failed_attempts, not_before, grants";

/// A work row; its keys are loaded separately.
pub(super) fn work_row(r: &dyn Row) -> Result<Work> {
    let state: String = r.get(4)?;
    let input: String = r.get(5)?;
    let outcome: Option<String> = r.get(7)?;
    let grants: String = r.get(15)?;
    let build = || -> Result<Work> {
        Ok(Work {
            id: r.get(0)?,
            scope: r.get(1)?,
            binding: r.get(2)?,
            parent_work: r.get(3)?,
            state: WorkState::parse(&state).ok_or_else(|| corrupt("work state"))?,
            input: from_json(&input)?,
            keys: Vec::new(),
            epoch: r.get(6)?,
            outcome: opt_from_json(outcome)?,
            wake_event: r.get(8)?,
            generation: r.get(9)?,
            created_at: Timestamp(r.get(10)?),
            updated_at: Timestamp(r.get(11)?),
            blocked_reason: r.get(12)?,
            failed_attempts: r.get(13)?,
            not_before: r.get::<Option<i64>>(14)?.map(Timestamp),
            grants: from_json(&grants)?,
        })
    };
    build()
}

impl SqlTx<'_> {
    /// Adds `bytes` to what `work_id` has written (see `conduit_core::quota`), written with the
    /// transaction's other charges to it when its body ends ([`SqlTx::run`]).
    pub(super) fn charge_work(&mut self, work_id: &str, bytes: u64) {
        match self.charges.iter_mut().find(|(w, _)| w == work_id) {
            Some((_, pending)) => *pending += bytes,
            None => self.charges.push((work_id.to_owned(), bytes)),
        }
    }

    /// Writes the charges [`SqlTx::charge_work`] left pending, one statement per Work.
    pub(super) fn write_charges(&mut self) -> Result<()> {
        for (work_id, bytes) in std::mem::take(&mut self.charges) {
            self.exec(
                "INSERT INTO work_usage (work_id, stored_bytes) VALUES (?1, ?2)
                 ON CONFLICT (work_id) DO UPDATE SET stored_bytes = work_usage.stored_bytes + excluded.stored_bytes",
                args![work_id, bytes as i64],
            )?;
        }
        Ok(())
    }

    /// Adds `bytes` to what the Work of `execution_id` has written.
    pub(super) fn charge_execution_work(&mut self, execution_id: &str, bytes: u64) -> Result<()> {
        self.exec(
            "INSERT INTO work_usage (work_id, stored_bytes) SELECT work_id, ?2 FROM executions WHERE id = ?1
             ON CONFLICT (work_id) DO UPDATE SET stored_bytes = work_usage.stored_bytes + excluded.stored_bytes",
            args![execution_id, bytes as i64],
        )?;
        Ok(())
    }

    pub(super) fn work_keys(&mut self, work_id: &str) -> Result<Vec<String>> {
        // The order the Work took its keys in: SQLite's rowid, PostgreSQL's identity column.
        let sql = match self.sql.dialect() {
            Dialect::Sqlite => "SELECT key FROM work_keys WHERE work_id = ?1 ORDER BY rowid",
            Dialect::Postgres => "SELECT key FROM work_keys WHERE work_id = ?1 ORDER BY taken",
        };
        self.query_all(sql, args![work_id], |r| r.get(0))
    }

    fn works(&mut self, sql: &str, params: &[Arg<'_>]) -> Result<Vec<Work>> {
        let mut works = self.query_all(sql, params, work_row)?;
        for work in &mut works {
            work.keys = self.work_keys(&work.id)?;
        }
        Ok(works)
    }
}

impl WorkRows for SqlTx<'_> {
    fn insert_work(&mut self, work: &Work) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO work ({WORK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
            ),
            args![
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
                work.blocked_reason,
                work.failed_attempts,
                work.not_before.map(|t| t.0),
                to_json(&work.grants)?
            ],
        )
        ?;
        for key in &work.keys {
            self.attach_work_key(&work.id, key)?;
        }
        Ok(())
    }

    fn attach_work_key(&mut self, work_id: &str, key: &str) -> Result<()> {
        let inserted = self.exec(
            "INSERT INTO work_keys (key, work_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            args![key, work_id],
        )?;
        if inserted == 0 {
            return Err(StoreError::KeyTaken);
        }
        Ok(())
    }

    fn get_work(&mut self, id: &str) -> Result<Option<Work>> {
        let sql = format!("SELECT {WORK_COLUMNS} FROM work WHERE id = ?1");
        Ok(self.works(&sql, args![id])?.pop())
    }

    fn update_work(&mut self, work: &Work) -> Result<()> {
        self.exec(
            "UPDATE work SET state = ?2, epoch = ?3, outcome = ?4, wake_event = ?5, updated_at = ?6, blocked_reason = ?7,
             failed_attempts = ?8, not_before = ?9, binding = ?10 WHERE id = ?1",
            args![
                work.id,
                work.state.as_str(),
                work.epoch,
                work.outcome.as_ref().map(to_json).transpose()?,
                work.wake_event,
                work.updated_at.0,
                work.blocked_reason,
                work.failed_attempts,
                work.not_before.map(|t| t.0),
                work.binding
            ],
        )?;
        Ok(())
    }

    fn list_work(&mut self, filter: &WorkFilter) -> Result<Vec<Work>> {
        let sql = format!(
            "SELECT {WORK_COLUMNS} FROM work WHERE (CAST(?1 AS TEXT) IS NULL OR scope = ?1) AND (CAST(?2 AS TEXT) IS NULL OR state = ?2)
             ORDER BY created_at DESC, id DESC LIMIT 500"
        );
        self.works(&sql, args![filter.scope, filter.state.map(WorkState::as_str)])
    }

    fn page_work(&mut self, filter: &WorkFilter, page: &Page<(i64, String)>) -> Result<Vec<Work>> {
        let (at, id) = page.after.clone().unwrap_or((i64::MAX, String::new()));
        let sql = format!(
            "SELECT {WORK_COLUMNS} FROM work WHERE (CAST(?1 AS TEXT) IS NULL OR scope = ?1) AND (CAST(?2 AS TEXT) IS NULL OR state = ?2)
             AND created_at <= ?3 AND (created_at < ?4 OR (created_at = ?4 AND ?5 != '' AND id < ?5))
             ORDER BY created_at DESC, id DESC LIMIT CAST(?6 AS BIGINT)"
        );
        let state = filter.state.map(WorkState::as_str);
        self.works(&sql, args![filter.scope, state, page.upper, at, id, page.limit as i64])
    }

    fn ready_work(&mut self, limit: usize, now: Timestamp) -> Result<Vec<Work>> {
        let sql = format!(
            "SELECT {WORK_COLUMNS} FROM work WHERE state = 'ready' AND blocked_reason IS NULL
             AND (not_before IS NULL OR not_before <= ?2) ORDER BY updated_at, id LIMIT CAST(?1 AS BIGINT)"
        );
        self.works(&sql, args![limit as i64, now.0])
    }

    fn work_owning_key(&mut self, key: &str) -> Result<Option<String>> {
        self.query_one("SELECT work_id FROM work_keys WHERE key = ?1", args![key], |r| r.get(0))
    }

    fn work_stored_bytes(&mut self, work_id: &str) -> Result<u64> {
        let sql = "SELECT stored_bytes FROM work_usage WHERE work_id = ?1";
        let stored: Option<i64> = self.query_one(sql, args![work_id], |r| r.get(0))?;
        let pending = self.charges.iter().find(|(w, _)| w == work_id).map_or(0, |(_, b)| *b);
        Ok(stored.map_or(0, |b| b as u64) + pending)
    }

    fn count_unfinished_work(&mut self, scope: &str) -> Result<u64> {
        let sql = "SELECT COUNT(*) FROM work WHERE scope = ?1 AND state IN ('ready', 'running', 'waiting')";
        Ok(self.query_one(sql, args![scope], |r| r.get(0))?.unwrap_or(0))
    }
}
