//! Human approvals: the statements and row mapping of [`ApprovalRows`].

use crate::{args, Row};
use conduit_core::approval::{Approval, ApprovalState};
use conduit_core::Timestamp;
use conduit_store::{ApprovalRows, Page};

use super::{corrupt, from_json, oldest_first, oldest_first_params, to_json, upsert, SqlTx};
use crate::Result;

const APPROVAL_COLUMNS: &str = "id, work_id, execution_id, scope, operation, input_hash, approvers, state, reason, \
     decided_by, requested_at, expires_at, decided_at, used_by, input";

fn approval_row(r: &dyn Row) -> Result<Approval> {
    let approvers: String = r.get(6)?;
    let state: String = r.get(7)?;
    let build = |approvers| -> Result<Approval> {
        Ok(Approval {
            id: r.get(0)?,
            work_id: r.get(1)?,
            execution_id: r.get(2)?,
            scope: r.get(3)?,
            operation: r.get(4)?,
            input_hash: r.get(5)?,
            approvers,
            state: ApprovalState::parse(&state).ok_or_else(|| corrupt("approval state"))?,
            reason: r.get(8)?,
            decided_by: r.get(9)?,
            requested_at: Timestamp(r.get(10)?),
            expires_at: r.get::<Option<i64>>(11)?.map(Timestamp),
            decided_at: r.get::<Option<i64>>(12)?.map(Timestamp),
            used_by: r.get(13)?,
            input: r.get::<Option<String>>(14)?.map(|text| from_json(&text)).transpose()?,
        })
    };
    from_json(&approvers).and_then(build)
}

impl ApprovalRows for SqlTx<'_> {
    fn put_approval(&mut self, a: &Approval) -> Result<()> {
        self.exec(
            &upsert("approvals", APPROVAL_COLUMNS, 1),
            args![
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
                a.used_by,
                a.input.as_ref().map(to_json).transpose()?
            ],
        )?;
        Ok(())
    }

    fn get_approval(&mut self, id: &str) -> Result<Option<Approval>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1");
        self.query_one(&sql, args![id], approval_row)
    }

    fn approval_for(&mut self, work_id: &str, operation: &str, input_hash: &str) -> Result<Option<Approval>> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE work_id = ?1 AND operation = ?2 AND input_hash = ?3 \
             ORDER BY requested_at DESC, id DESC LIMIT 1"
        );
        self.query_one(&sql, args![work_id, operation, input_hash], approval_row)
    }

    fn pending_approvals_of_work(&mut self, work_id: &str) -> Result<Vec<Approval>> {
        let sql =
            format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE work_id = ?1 AND state = 'pending' ORDER BY id");
        self.query_all(&sql, args![work_id], approval_row)
    }

    fn page_approvals(&mut self, state: Option<ApprovalState>, page: &Page<(i64, String)>) -> Result<Vec<Approval>> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE (CAST(?1 AS TEXT) IS NULL OR state = ?1) AND {}",
            oldest_first("requested_at", 2)
        );
        let (upper, at, id, limit) = oldest_first_params(page);
        let state = state.map(ApprovalState::as_str);
        self.query_all(&sql, args![state, upper, at, id, limit], approval_row)
    }
}
