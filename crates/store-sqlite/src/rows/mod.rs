//! [`Tx`](conduit_store::Tx) over a SQLite transaction, one file per vocabulary of the port.

mod approvals;
mod artifacts;
mod events;
mod executions;
mod generations;
mod idempotency;
mod operators;
mod packages;
mod requests;
mod sessions;
mod tokens;
mod waits;
mod work;

use rusqlite::{Connection, OptionalExtension, Row};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{sqlite_error, Result};
use conduit_store::{Page, StoreError};

/// The rows of one transaction: a write member's savepoint on the writer, or a read transaction.
pub struct SqliteTx<'a> {
    pub tx: &'a Connection,
}

/// The keyset clause of an oldest-first page by `(time, id)`: rows within the first page's upper
/// bound and past the cursor's position, `limit` of them. Its four parameters start at `?first`, in
/// the order [`oldest_first_params`] gives them.
fn oldest_first(time: &str, first: usize) -> String {
    let (upper, at, id, limit) = (first, first + 1, first + 2, first + 3);
    // A row-value comparison, which SQLite seeks in a `(time, id)` index instead of scanning to it.
    format!("{time} <= ?{upper} AND ({time}, id) > (?{at}, ?{id}) ORDER BY {time}, id LIMIT ?{limit}")
}

/// A filter's clause on `column` against parameter `?n`: the comparison `op` when the filter is set, else
/// a clause that holds (the parameter is then null). Each case is its own statement, so SQLite
/// plans it with the column's index; `(?n IS NULL OR column = ?n)` would scan the whole table.
fn matching(column: &str, op: &str, n: usize, set: bool) -> String {
    if set {
        format!("{column} {op} ?{n}")
    } else {
        format!("?{n} IS NULL")
    }
}

/// The parameters of [`oldest_first`]: the upper bound, the cursor's position, the limit.
fn oldest_first_params(page: &Page<(i64, String)>) -> (i64, i64, String, i64) {
    let (at, id) = page.after.clone().unwrap_or((i64::MIN, String::new()));
    (page.upper, at, id, page.limit as i64)
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
        self.query_row(sql, params, map)?.transpose()
    }

    /// Runs a query for at most one row through the statement cache.
    fn query_row<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        map: impl FnOnce(&Row) -> rusqlite::Result<T>,
    ) -> Result<Option<T>> {
        let mut stmt = self.tx.prepare_cached(sql).map_err(sqlite_error)?;
        stmt.query_row(params, map).optional().map_err(sqlite_error)
    }

    /// Executes a statement through the connection's prepared-statement cache.
    fn exec(&self, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
        self.tx.prepare_cached(sql)?.execute(params)
    }
}

#[cfg(test)]
mod tests {
    use conduit_store::AuditFilter;
    use rusqlite::Connection;

    /// SQLite's plan for `sql`, one line per step.
    fn plan(sql: &str) -> String {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::migrations::migrate(&mut conn).unwrap();
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        // The plan is made at prepare time, whatever the parameters are bound to.
        let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
        let steps = stmt
            .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
            .unwrap();
        steps.map(|s| s.unwrap()).collect::<Vec<_>>().join("; ")
    }

    #[test]
    fn one_works_events_are_read_through_its_index() {
        let of_work = plan(&super::events::page_events_sql(true));
        assert!(of_work.contains("USING INDEX events_by_work"), "{of_work}");
        let all = plan(&super::events::page_events_sql(false));
        assert!(all.contains("INTEGER PRIMARY KEY"), "{all}");
    }

    #[test]
    fn the_per_minute_bound_seeks_the_chain_index_and_counts_nothing() {
        for sql in [super::events::CAUSAL_TIME_BACK, super::events::INSERT_EVENT] {
            let steps = plan(sql);
            assert!(steps.contains("USING COVERING INDEX events_chain"), "{steps}");
            assert!(!steps.contains("SCAN"), "{steps}");
        }
    }

    #[test]
    fn an_audit_filter_reads_the_index_of_what_it_names() {
        let cases = [
            (Some("x"), None, "toolbelt_audit_by_execution"),
            (None, Some("w"), "toolbelt_audit_by_work"),
            (None, None, "PRIMARY KEY"),
        ];
        for (execution, work, index) in cases {
            let filter = AuditFilter {
                execution: execution.map(str::to_owned),
                work: work.map(str::to_owned),
                ..AuditFilter::default()
            };
            let steps = plan(&super::requests::page_audit_sql(&filter));
            assert!(steps.contains(index), "{index}: {steps}");
        }
    }
}
