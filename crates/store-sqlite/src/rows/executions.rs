//! Executions (attempts of a Work): the SQLite statements and row mapping of [`ExecutionRows`].

use conduit_core::{Execution, ExecutionState, Timestamp};
use conduit_store::{ExecutionRows, Page};
use rusqlite::{params, Row};

use super::{corrupt, opt_from_json, to_json, SqliteTx};
use crate::{sqlite_error, Result};

const EXECUTION_COLUMNS: &str =
    "id, work_id, scope, binding, epoch, owner, state, cause_event, watermark, declaration, \
     outcome, exit_code, pid, generation, lease_expires_at, deadline_at, started_at, ended_at, stopped_at, \
     agent_session, agent_usage";

fn execution_row(r: &Row) -> rusqlite::Result<Result<Execution>> {
    let state: String = r.get(6)?;
    let declaration: Option<String> = r.get(9)?;
    let outcome: Option<String> = r.get(10)?;
    let agent_usage: Option<String> = r.get(20)?;
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
            agent_session: r.get(19).map_err(sqlite_error)?,
            agent_usage: opt_from_json(agent_usage)?,
        })
    };
    Ok(build(state, declaration, outcome))
}

impl ExecutionRows for SqliteTx<'_> {
    fn insert_execution(&mut self, x: &Execution) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO executions ({EXECUTION_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
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
                x.stopped_at.map(|t| t.0),
                x.agent_session,
                x.agent_usage.as_ref().map(to_json).transpose()?
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
             pid = ?8, lease_expires_at = ?9, ended_at = ?10, stopped_at = ?11, agent_session = ?12, agent_usage = ?13
             WHERE id = ?1",
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
                x.stopped_at.map(|t| t.0),
                x.agent_session,
                x.agent_usage.as_ref().map(to_json).transpose()?
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn executions_of_work(&mut self, work: &str) -> Result<Vec<Execution>> {
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE work_id = ?1 ORDER BY started_at, id");
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
}
