//! The `Tx` vocabulary of `conduit-store`, written once in SQL: every statement and row mapping,
//! over [`Sql`], the small interface each engine's adapter implements (SQLite now, PostgreSQL for
//! several daemons on one store).
//!
//! Statements are written with `?N` placeholders and in the SQL both engines share (`ON CONFLICT`,
//! `RETURNING`, row values, partial indexes, window functions); an adapter rewrites placeholders
//! for its engine. Where the engines truly differ, a statement asks [`Sql::dialect`].
//!
//! A `LIMIT` takes its parameter as `LIMIT CAST(?N AS BIGINT)`, never a bare `LIMIT ?N`: SQLite plans
//! a bare one with the value bound, so every run of the cached statement would prepare it again.
//!
//! Architecture invariants: no engine is linked here; every integer column is read and written as
//! `i64`, every text as UTF-8, every digest as bytes.
#![forbid(unsafe_code)]

mod rows;

pub use rows::SqlTx;

use conduit_store::{StoreError, TokenLease};

pub type Result<T> = std::result::Result<T, StoreError>;

/// The engine an adapter runs statements on, for the few statements that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// One engine's side of a transaction: run a statement with its arguments, read typed columns.
pub trait Sql {
    fn dialect(&self) -> Dialect;

    /// Runs a statement; answers how many rows it changed.
    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64>;

    /// Runs a query, handing each row to `each` in order until it errs.
    fn query(&mut self, sql: &str, args: &[Arg<'_>], each: &mut dyn FnMut(&dyn Row) -> Result<()>) -> Result<()>;

    /// Runs an `INSERT` of one row (`sql` has no `RETURNING`, no `OR IGNORE` and no `ON CONFLICT`)
    /// and answers the integer key the engine gave it, in column `key`. On SQLite `key` must be
    /// the rowid (an `INTEGER PRIMARY KEY` of a table with rowids and no triggers): its answer is
    /// the connection's last rowid.
    fn insert_keyed(&mut self, sql: &str, key: &'static str, args: &[Arg<'_>]) -> Result<i64>;

    /// A lease this connection read and kept ([`Sql::keep_lease`]), if it keeps them and nothing a
    /// lease is made of (a token, an execution, a Work, a Work's keys) has changed since.
    fn kept_lease(&mut self, _digest: &[u8; 32]) -> Option<TokenLease> {
        None
    }

    /// Keeps a lease just read, for [`Sql::kept_lease`].
    fn keep_lease(&mut self, _digest: &[u8; 32], _lease: &TokenLease) {}
}

/// A value as the engine holds it: a statement's argument, or a column of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Bytes(&'a [u8]),
}

/// A statement's argument.
pub type Arg<'a> = Value<'a>;

/// One column of a row.
pub type Column<'a> = Value<'a>;

/// A value a statement can take as an argument.
pub trait ToArg {
    fn to_arg(&self) -> Arg<'_>;
}

/// The arguments of a statement, in placeholder order: `args![id, work.epoch, key]`.
#[macro_export]
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        &[$($crate::ToArg::to_arg(&$x)),*][..]
    };
}

impl ToArg for str {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}

impl ToArg for String {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}

impl ToArg for [u8] {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Bytes(self)
    }
}

impl ToArg for i64 {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Int(*self)
    }
}

impl ToArg for u32 {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Int(i64::from(*self))
    }
}

impl ToArg for u16 {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Int(i64::from(*self))
    }
}

impl ToArg for i32 {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Int(i64::from(*self))
    }
}

impl ToArg for bool {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Int(i64::from(*self))
    }
}

impl<T: ToArg + ?Sized> ToArg for &T {
    fn to_arg(&self) -> Arg<'_> {
        (**self).to_arg()
    }
}

impl<T: ToArg> ToArg for Option<T> {
    fn to_arg(&self) -> Arg<'_> {
        self.as_ref().map_or(Arg::Null, ToArg::to_arg)
    }
}

/// A row of a query's answer.
pub trait Row {
    fn column(&self, index: usize) -> Result<Column<'_>>;
}

impl dyn Row + '_ {
    /// Column `index` as a `T`.
    pub fn get<T: FromColumn>(&self, index: usize) -> Result<T> {
        T::from_column(self.column(index)?)
    }
}

/// A type a column reads as.
pub trait FromColumn: Sized {
    fn from_column(column: Column<'_>) -> Result<Self>;
}

fn mistyped(expected: &str) -> StoreError {
    StoreError::Corrupt(format!("a column is not {expected}"))
}

impl FromColumn for String {
    fn from_column(column: Column<'_>) -> Result<Self> {
        match column {
            Column::Text(text) => Ok(text.to_owned()),
            _ => Err(mistyped("text")),
        }
    }
}

impl FromColumn for Vec<u8> {
    fn from_column(column: Column<'_>) -> Result<Self> {
        match column {
            Column::Bytes(bytes) => Ok(bytes.to_vec()),
            _ => Err(mistyped("bytes")),
        }
    }
}

impl FromColumn for i64 {
    fn from_column(column: Column<'_>) -> Result<Self> {
        match column {
            Column::Int(n) => Ok(n),
            _ => Err(mistyped("an integer")),
        }
    }
}

/// Integer columns narrower than `i64`, refused when the stored value does not fit.
macro_rules! narrow_from_column {
    ($($t:ty),*) => {$(
        impl FromColumn for $t {
            fn from_column(column: Column<'_>) -> Result<Self> {
                <$t>::try_from(i64::from_column(column)?).map_err(|_| mistyped(stringify!($t)))
            }
        }
    )*};
}

narrow_from_column!(i32, u32, u16, u64);

impl FromColumn for bool {
    fn from_column(column: Column<'_>) -> Result<Self> {
        Ok(i64::from_column(column)? != 0)
    }
}

impl<T: FromColumn> FromColumn for Option<T> {
    fn from_column(column: Column<'_>) -> Result<Self> {
        match column {
            Column::Null => Ok(None),
            other => T::from_column(other).map(Some),
        }
    }
}

/// Statement builders the adapters' tests read query plans of.
pub mod statements {
    pub use crate::rows::events::{
        page_event_sequences_sql, page_events_sql, CAUSAL_BOUNDS, CAUSAL_TIME_BACK, INSERT_EVENT,
    };
    pub use crate::rows::requests::page_audit_sql;
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Each `LIMIT` of a statement in `text`, with what follows it.
    fn bare_limits(text: &str) -> Vec<String> {
        text.match_indices("LIMIT ?")
            .map(|(at, _)| text[at..].chars().take(12).collect())
            .collect()
    }

    fn sources(dir: &Path, found: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }

    #[test]
    fn no_statement_limits_by_a_bare_parameter() {
        assert_eq!(
            bare_limits("ORDER BY id LIMIT ?3"),
            ["LIMIT ?3"],
            "the control: a bare one is found"
        );
        let mut files = Vec::new();
        sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rows"), &mut files);
        assert!(files.len() > 5);
        for (path, text) in files {
            assert!(bare_limits(&text).is_empty(), "{path}: {:?}", bare_limits(&text));
        }
    }
}
