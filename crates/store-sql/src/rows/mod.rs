//! [`Tx`](conduit_store::Tx) over an engine's transaction, one file per vocabulary of the port.

mod approvals;
mod artifacts;
pub(crate) mod events;
mod executions;
mod generations;
mod idempotency;
mod ids;
mod operators;
mod packages;
pub(crate) mod requests;
mod sessions;
mod tokens;
mod waits;
mod work;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Arg, Result, Row, Sql};
use conduit_store::{Page, StoreError, Tx};

/// The rows of one transaction, on whichever engine runs it.
pub struct SqlTx<'a> {
    sql: &'a mut dyn Sql,
    /// Bytes charged to each Work's store quota and not yet written: a call charges its Work for
    /// each row it writes, and one statement per Work at the end costs less than one per row.
    charges: Vec<(String, u64)>,
}

impl SqlTx<'_> {
    /// Runs `body` on the transaction `sql` is in, then writes what it left pending (its quota
    /// charges), so the engine commits them with the rest.
    pub fn run(sql: &mut dyn Sql, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let mut tx = SqlTx {
            sql,
            charges: Vec::new(),
        };
        body(&mut tx)?;
        tx.write_charges()
    }
}

/// The keyset clause of an oldest-first page by `(time, id)`: rows within the first page's upper
/// bound and past the cursor's position, `limit` of them. Its four parameters start at `?first`, in
/// the order [`oldest_first_params`] gives them.
fn oldest_first(time: &str, first: usize) -> String {
    let (upper, at, id, limit) = (first, first + 1, first + 2, first + 3);
    // A row-value comparison, which SQLite seeks in a `(time, id)` index instead of scanning to it.
    format!("{time} <= ?{upper} AND ({time}, id) > (?{at}, ?{id}) ORDER BY {time}, id LIMIT CAST(?{limit} AS BIGINT)")
}

/// A filter's clause on `column` against parameter `?n`: the comparison `op` when the filter is set, else
/// a clause that holds (the parameter is then null). Each case is its own statement, so SQLite
/// plans it with the column's index; `(?n IS NULL OR column = ?n)` would scan the whole table.
fn matching(column: &str, op: &str, n: usize, set: bool) -> String {
    if set {
        format!("{column} {op} ?{n}")
    } else {
        // Typed, so PostgreSQL can tell what the lone parameter is.
        format!("CAST(?{n} AS TEXT) IS NULL")
    }
}

/// The parameters of [`oldest_first`]: the upper bound, the cursor's position, the limit.
fn oldest_first_params(page: &Page<(i64, String)>) -> (i64, i64, String, i64) {
    let (at, id) = page.after.clone().unwrap_or((i64::MIN, String::new()));
    (page.upper, at, id, page.limit as i64)
}

/// An insert of `columns` into `table` that replaces the row with the same `key` (its leading
/// columns): `INSERT OR REPLACE` in the SQL both engines speak.
fn upsert(table: &str, columns: &str, key: usize) -> String {
    let names: Vec<&str> = columns.split(',').map(str::trim).collect();
    let values: Vec<String> = (1..=names.len()).map(|n| format!("?{n}")).collect();
    let updates: Vec<String> = names[key..].iter().map(|c| format!("{c} = excluded.{c}")).collect();
    format!(
        "INSERT INTO {table} ({columns}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}",
        values.join(", "),
        names[..key].join(", "),
        updates.join(", ")
    )
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

impl SqlTx<'_> {
    /// Every row of a query, each mapped by `map`.
    fn query_all<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        mut map: impl FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut found = Vec::new();
        self.sql.query(sql, args, &mut |row| {
            found.push(map(row)?);
            Ok(())
        })?;
        Ok(found)
    }

    /// The first row of a query, if any, mapped by `map`.
    fn query_one<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        map: impl FnOnce(&dyn Row) -> Result<T>,
    ) -> Result<Option<T>> {
        let (mut map, mut found) = (Some(map), None);
        self.sql.query(sql, args, &mut |row| {
            if let Some(map) = map.take() {
                found = Some(map(row)?);
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Runs a statement; answers how many rows it changed.
    fn exec(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<usize> {
        Ok(self.sql.execute(sql, args)? as usize)
    }
}
