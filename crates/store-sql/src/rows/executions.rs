//! Executions (attempts of a Work): the statements and row mapping of [`ExecutionRows`].

use crate::{args, Row};
use conduit_core::{Execution, ExecutionState, Timestamp};
use conduit_store::{ExecutionRows, Page};

use super::{corrupt, opt_from_json, to_json, SqlTx};
use crate::Result;

pub(super) const EXECUTION_COLUMNS: &str =
    "id, work_id, scope, binding, epoch, owner, state, cause_event, watermark, declaration, \
     outcome, exit_code, pid, generation, lease_expires_at, deadline_at, started_at, ended_at, stopped_at, \
     agent_session, agent_usage";

pub(super) fn execution_row(r: &dyn Row) -> Result<Execution> {
    let state: String = r.get(6)?;
    let declaration: Option<String> = r.get(9)?;
    let outcome: Option<String> = r.get(10)?;
    let agent_usage: Option<String> = r.get(20)?;
    let build = |state: String, declaration, outcome| -> Result<Execution> {
        Ok(Execution {
            id: r.get(0)?,
            work_id: r.get(1)?,
            scope: r.get(2)?,
            binding: r.get(3)?,
            epoch: r.get(4)?,
            owner: r.get(5)?,
            state: ExecutionState::parse(&state).ok_or_else(|| corrupt("execution state"))?,
            cause_event: r.get(7)?,
            watermark: r.get(8)?,
            declaration: opt_from_json(declaration)?,
            outcome: opt_from_json(outcome)?,
            exit_code: r.get(11)?,
            pid: r.get(12)?,
            generation: r.get(13)?,
            lease_expires_at: Timestamp(r.get(14)?),
            deadline_at: Timestamp(r.get(15)?),
            started_at: Timestamp(r.get(16)?),
            ended_at: r.get::<Option<i64>>(17)?.map(Timestamp),
            stopped_at: r.get::<Option<i64>>(18)?.map(Timestamp),
            agent_session: r.get(19)?,
            agent_usage: opt_from_json(agent_usage)?,
        })
    };
    build(state, declaration, outcome)
}

impl ExecutionRows for SqlTx<'_> {
    fn insert_execution(&mut self, x: &Execution) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO executions ({EXECUTION_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
            ),
            args![
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
        ?;
        Ok(())
    }

    fn get_execution(&mut self, id: &str) -> Result<Option<Execution>> {
        self.query_one(
            &format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = ?1"),
            args![id],
            execution_row,
        )
    }

    fn update_execution(&mut self, x: &Execution) -> Result<()> {
        self.exec(
            "UPDATE executions SET epoch = ?2, owner = ?3, state = ?4, declaration = ?5, outcome = ?6, exit_code = ?7,
             pid = ?8, lease_expires_at = ?9, ended_at = ?10, stopped_at = ?11, agent_session = ?12, agent_usage = ?13
             WHERE id = ?1",
            args![
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
        )?;
        Ok(())
    }

    fn executions_of_work(&mut self, work: &str) -> Result<Vec<Execution>> {
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE work_id = ?1 ORDER BY started_at, id");
        self.query_all(&sql, args![work], execution_row)
    }

    fn watermark_before(&mut self, work: &str, execution: &str) -> Result<i64> {
        let sql = "SELECT watermark FROM executions WHERE work_id = ?1 AND id <> ?2 ORDER BY watermark DESC LIMIT 1";
        Ok(self.query_one(sql, args![work, execution], |r| r.get(0))?.unwrap_or(0))
    }

    fn page_executions(&mut self, work: Option<&str>, page: &Page<(i64, String)>) -> Result<Vec<Execution>> {
        let (at, id) = page.after.clone().unwrap_or((i64::MIN, String::new()));
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE (CAST(?1 AS TEXT) IS NULL OR work_id = ?1) AND started_at <= ?2
             AND (started_at > ?3 OR (started_at = ?3 AND id > ?4)) ORDER BY started_at, id LIMIT CAST(?5 AS BIGINT)"
        );
        self.query_all(&sql, args![work, page.upper, at, id, page.limit as i64], execution_row)
    }

    fn executions_in_state(&mut self, state: ExecutionState) -> Result<Vec<Execution>> {
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE state = ?1 ORDER BY started_at, id");
        self.query_all(&sql, args![state.as_str()], execution_row)
    }
}
