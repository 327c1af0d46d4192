//! Tool sessions: the statements and row mapping of [`ToolSessionRows`].

use crate::{args, Row};
use conduit_core::{SessionOutcome, Timestamp, ToolSession};
use conduit_store::ToolSessionRows;

use super::{corrupt, SqlTx};
use crate::Result;

const SESSION_COLUMNS: &str = "id, execution_id, work_id, scope, tool_id, opened_event, opened_at, outcome, closed_at";

fn session_row(r: &dyn Row) -> Result<ToolSession> {
    let closed = match (r.get::<Option<String>>(7)?, r.get::<Option<i64>>(8)?) {
        (Some(outcome), Some(at)) => SessionOutcome::parse(&outcome)
            .map(|o| Some((o, Timestamp(at))))
            .ok_or_else(|| corrupt("session outcome")),
        (None, None) => Ok(None),
        _ => Err(corrupt("session")),
    };
    let build = |closed| -> Result<ToolSession> {
        Ok(ToolSession {
            id: r.get(0)?,
            execution_id: r.get(1)?,
            work_id: r.get(2)?,
            scope: r.get(3)?,
            tool_id: r.get(4)?,
            opened_event: r.get(5)?,
            opened_at: Timestamp(r.get(6)?),
            closed,
        })
    };
    closed.and_then(build)
}

impl ToolSessionRows for SqlTx<'_> {
    fn insert_tool_session(&mut self, t: &ToolSession) -> Result<()> {
        self.exec(
            &format!("INSERT INTO tool_sessions ({SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
            args![
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
        )?;
        Ok(())
    }

    fn get_tool_session(&mut self, id: &str) -> Result<Option<ToolSession>> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM tool_sessions WHERE id = ?1");
        self.query_one(&sql, args![id], session_row)
    }

    fn close_tool_session(&mut self, id: &str, outcome: SessionOutcome, at: Timestamp) -> Result<()> {
        self.exec(
            "UPDATE tool_sessions SET outcome = ?2, closed_at = ?3 WHERE id = ?1 AND closed_at IS NULL",
            args![id, outcome.as_str(), at.0],
        )?;
        Ok(())
    }

    fn open_tool_sessions(&mut self, execution_id: &str) -> Result<Vec<ToolSession>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM tool_sessions WHERE execution_id = ?1 AND closed_at IS NULL ORDER BY opened_at, id"
        );
        self.query_all(&sql, args![execution_id], session_row)
    }
}
