//! Toolbelt replay records and the audit trail: the statements and row mapping of [`RequestRows`].

use crate::{args, Row};
use conduit_core::{quota, AuditKind, AuditRecord, RequestRecord, Timestamp};
use conduit_store::{AuditFilter, Page, RequestRows};

use super::{corrupt, from_json, matching, oldest_first, oldest_first_params, to_json, SqlTx};
use crate::Result;

/// A macro, so the statements built from it can be constants (`concat!`), not texts formatted on
/// every call.
macro_rules! request_columns {
    () => {
        "execution_id, operation, request_id, body_hash, status, response, created_at"
    };
}

const GET_REQUEST: &str = concat!(
    "SELECT ",
    request_columns!(),
    " FROM toolbelt_requests WHERE execution_id = ?1 AND operation = ?2 AND request_id = ?3"
);
const INSERT_REQUEST: &str = concat!(
    "INSERT INTO toolbelt_requests (",
    request_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
);

fn request_row(r: &dyn Row) -> Result<RequestRecord> {
    let response: String = r.get(5)?;
    let build = || -> Result<RequestRecord> {
        Ok(RequestRecord {
            execution_id: r.get(0)?,
            operation: r.get(1)?,
            request_id: r.get(2)?,
            body_hash: r.get(3)?,
            status: r.get(4)?,
            response: from_json(&response)?,
            created_at: Timestamp(r.get(6)?),
        })
    };
    build()
}

macro_rules! audit_columns {
    () => {
        "id, kind, operation, execution_id, work_id, scope, request_id, result, gate, refusal, input_hash, \
         duration_ms, at"
    };
}

const AUDIT_COLUMNS: &str = audit_columns!();
const INSERT_AUDIT: &str = concat!(
    "INSERT INTO toolbelt_audit (",
    audit_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
);

fn audit_row(r: &dyn Row) -> Result<AuditRecord> {
    let kind: String = r.get(1)?;
    let build = || -> Result<AuditRecord> {
        Ok(AuditRecord {
            id: r.get(0)?,
            kind: AuditKind::parse(&kind).ok_or_else(|| corrupt("audit kind"))?,
            operation: r.get(2)?,
            execution_id: r.get(3)?,
            work_id: r.get(4)?,
            scope: r.get(5)?,
            request_id: r.get(6)?,
            result: r.get(7)?,
            gate: r.get(8)?,
            refusal: r.get(9)?,
            input_hash: r.get(10)?,
            duration_ms: r.get(11)?,
            at: Timestamp(r.get(12)?),
        })
    };
    build()
}

/// A page of the audit trail under `filter`: `?1`..`?5` the filter's fields, `?6`.. the page.
pub fn page_audit_sql(f: &AuditFilter) -> String {
    format!(
        "SELECT {AUDIT_COLUMNS} FROM toolbelt_audit WHERE {} AND {} AND {} AND {} AND {} AND {}",
        matching("execution_id", "=", 1, f.execution.is_some()),
        matching("work_id", "=", 2, f.work.is_some()),
        matching("operation", "=", 3, f.operation.is_some()),
        matching("result", "=", 4, f.result.is_some()),
        matching("at", ">=", 5, f.since.is_some()),
        oldest_first("at", 6)
    )
}

impl RequestRows for SqlTx<'_> {
    fn get_request(&mut self, execution_id: &str, operation: &str, request_id: &str) -> Result<Option<RequestRecord>> {
        self.query_one(GET_REQUEST, args![execution_id, operation, request_id], request_row)
    }

    fn insert_request(&mut self, r: &RequestRecord) -> Result<()> {
        let response = to_json(&r.response)?;
        self.charge_execution_work(&r.execution_id, quota::charge(response.len()))?;
        self.exec(
            INSERT_REQUEST,
            args![
                r.execution_id,
                r.operation,
                r.request_id,
                r.body_hash,
                r.status,
                response,
                r.created_at.0
            ],
        )?;
        Ok(())
    }

    fn delete_finished_requests_before(&mut self, cutoff: Timestamp) -> Result<usize> {
        self.exec(
            "DELETE FROM toolbelt_requests WHERE created_at < ?1 AND execution_id IN
                 (SELECT id FROM executions WHERE state != 'running')",
            args![cutoff.0],
        )
    }

    fn insert_audit(&mut self, a: &AuditRecord) -> Result<()> {
        self.exec(
            INSERT_AUDIT,
            args![
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
        )?;
        Ok(())
    }

    fn list_audit(&mut self, execution: Option<&str>, limit: usize) -> Result<Vec<AuditRecord>> {
        let of_execution = matching("execution_id", "=", 1, execution.is_some());
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM toolbelt_audit WHERE {of_execution} ORDER BY at, id LIMIT CAST(?2 AS BIGINT)"
        );
        self.query_all(&sql, args![execution, limit as i64], audit_row)
    }

    fn page_audit(&mut self, filter: &AuditFilter, page: &Page<(i64, String)>) -> Result<Vec<AuditRecord>> {
        match (&filter.work, &filter.execution) {
            (Some(work), None) => self.page_audit_of_work(filter, work, page),
            _ => self.page_audit_filtered(filter, page),
        }
    }
}

impl SqlTx<'_> {
    /// A page of a Work's audit trail: the same page of each of its executions' (an audit record's
    /// Work is its execution's, and their index is the one kept), merged in order. No index by Work
    /// is written on every call for a listing an operator asks for now and then.
    fn page_audit_of_work(
        &mut self,
        filter: &AuditFilter,
        work: &str,
        page: &Page<(i64, String)>,
    ) -> Result<Vec<AuditRecord>> {
        let executions: Vec<String> =
            self.query_all("SELECT id FROM executions WHERE work_id = ?1", args![work], |r| {
                r.get(0)
            })?;
        let mut records = Vec::new();
        for execution in executions {
            let of_execution = AuditFilter {
                execution: Some(execution),
                ..filter.clone()
            };
            records.extend(self.page_audit_filtered(&of_execution, page)?);
        }
        records.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
        records.truncate(page.limit);
        Ok(records)
    }

    fn page_audit_filtered(&mut self, filter: &AuditFilter, page: &Page<(i64, String)>) -> Result<Vec<AuditRecord>> {
        let sql = page_audit_sql(filter);
        let f = filter;
        let (upper, at, id, limit) = oldest_first_params(page);
        let since = f.since.map(|t| t.0);
        let params = args![f.execution, f.work, f.operation, f.result, since, upper, at, id, limit];
        self.query_all(&sql, params, audit_row)
    }
}
