//! [`Sql`] on a PostgreSQL connection: the shared statements, their `?N` placeholders rewritten to
//! `$N` once and prepared once per connection; arguments and columns converted by the types the
//! server inferred for them, refusing a mismatch instead of sending bytes of the wrong type. Each
//! statement runs on the connection's thread ([`crate::worker`]), so arguments and rows travel owned.

use std::error::Error;

use bytes::BytesMut;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::Statement;

use conduit_store::StoreError;
use conduit_store_sql::{Arg, Column, Dialect, Row, Sql};

use crate::worker::{Conn, Worker};
use crate::{backend, Result};

/// One transaction's side of [`Sql`], on the connection that runs it.
pub struct PgSql<'c> {
    conn: &'c mut Conn,
    /// A statement the server refused: the transaction is aborted from then on.
    pub refused: bool,
}

impl<'c> PgSql<'c> {
    pub fn new(conn: &'c mut Conn) -> PgSql<'c> {
        PgSql { conn, refused: false }
    }

    /// Runs `job` on the connection, remembering a refusal.
    fn run<T: Send + 'static>(&mut self, job: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static) -> Result<T> {
        let ran = self.conn.on(job);
        self.refused |= ran.is_err();
        ran
    }
}

impl Worker {
    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(prepared) = self.statements.0.get(sql) {
            return Ok(prepared.clone());
        }
        let prepared = self.client.prepare(&dollar_placeholders(sql)).map_err(backend)?;
        self.statements.0.insert(sql.to_owned(), prepared.clone());
        Ok(prepared)
    }

    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        let statement = self.statement(sql)?;
        self.client.execute(&statement, &refs(args)).map_err(backend)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Vec<Value>>> {
        let statement = self.statement(sql)?;
        let rows = self.client.query(&statement, &refs(args)).map_err(backend)?;
        rows.iter().map(owned_row).collect()
    }
}

/// `?N` as PostgreSQL writes it, `$N`. The shared statements have no `?` inside a literal.
fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        let numbered = c == '?' && chars.peek().is_some_and(char::is_ascii_digit);
        out.push(if numbered { '$' } else { c });
    }
    out
}

impl Sql for PgSql<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64> {
        let (sql, args) = (sql.to_owned(), owned(args));
        self.run(move |worker| worker.execute(&sql, &args))
    }

    fn query(&mut self, sql: &str, args: &[Arg<'_>], each: &mut dyn FnMut(&dyn Row) -> Result<()>) -> Result<()> {
        let (sql, args) = (sql.to_owned(), owned(args));
        for row in self.run(move |worker| worker.query(&sql, &args))? {
            each(&OwnedRow(row))?;
        }
        Ok(())
    }

    fn insert_keyed(&mut self, sql: &str, key: &'static str, args: &[Arg<'_>]) -> Result<i64> {
        let mut inserted = None;
        self.query(&format!("{sql} RETURNING {key}"), args, &mut |row| {
            inserted = Some(row.get(0)?);
            Ok(())
        })?;
        inserted.ok_or_else(|| StoreError::Backend("an insert answered no key".into()))
    }
}

/// An argument or a column, owned. Its `Debug` (which `ToSql` requires) never shows the value.
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Value(..)")
    }
}

fn owned(args: &[Arg<'_>]) -> Vec<Value> {
    let value = |arg: &Arg<'_>| match *arg {
        Arg::Null => Value::Null,
        Arg::Int(n) => Value::Int(n),
        Arg::Text(text) => Value::Text(text.to_owned()),
        Arg::Bytes(bytes) => Value::Bytes(bytes.to_vec()),
    };
    args.iter().map(value).collect()
}

fn refs(args: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|arg| arg as &(dyn ToSql + Sync)).collect()
}

type BoxError = Box<dyn Error + Sync + Send>;

/// `value` as `ty`, when `T` is sent as `ty`.
fn checked<T: ToSql>(value: T, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
    if !T::accepts(ty) {
        return Err(format!("an argument does not fit a parameter of type {ty}").into());
    }
    value.to_sql(ty, out)
}

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) => match *ty {
                Type::INT4 => checked(i32::try_from(*n)?, ty, out),
                Type::INT2 => checked(i16::try_from(*n)?, ty, out),
                _ => checked(*n, ty, out),
            },
            Value::Text(text) => checked(text.as_str(), ty, out),
            Value::Bytes(bytes) => checked(bytes.as_slice(), ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Each value is checked against its parameter's type in `to_sql`.
        true
    }

    to_sql_checked!();
}

/// A row's columns, read by their types.
fn owned_row(row: &postgres::Row) -> Result<Vec<Value>> {
    (0..row.len()).map(|index| owned_column(row, index)).collect()
}

fn owned_column(row: &postgres::Row, index: usize) -> Result<Value> {
    fn get<'a, T: postgres::types::FromSql<'a>>(row: &'a postgres::Row, index: usize) -> Result<Option<T>> {
        row.try_get(index).map_err(backend)
    }
    let ty = row.columns()[index].type_();
    let found = match *ty {
        Type::INT8 => get::<i64>(row, index)?.map(Value::Int),
        Type::INT4 => get::<i32>(row, index)?.map(|n| Value::Int(n.into())),
        Type::INT2 => get::<i16>(row, index)?.map(|n| Value::Int(n.into())),
        Type::BOOL => get::<bool>(row, index)?.map(|b| Value::Int(b.into())),
        Type::TEXT | Type::VARCHAR | Type::NAME => get::<String>(row, index)?.map(Value::Text),
        Type::BYTEA => get::<Vec<u8>>(row, index)?.map(Value::Bytes),
        _ => return Err(StoreError::Corrupt(format!("a column is of type {ty}"))),
    };
    Ok(found.unwrap_or(Value::Null))
}

struct OwnedRow(Vec<Value>);

impl Row for OwnedRow {
    fn column(&self, index: usize) -> Result<Column<'_>> {
        Ok(match self.0.get(index) {
            Some(Value::Null) => Column::Null,
            Some(Value::Int(n)) => Column::Int(*n),
            Some(Value::Text(text)) => Column::Text(text),
            Some(Value::Bytes(bytes)) => Column::Bytes(bytes),
            None => return Err(StoreError::Corrupt("a query has fewer columns than its reader".into())),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbered_placeholders_become_dollars_and_nothing_else_changes() {
        let cases = [
            (
                "SELECT a FROM t WHERE b = ?1 AND c > ?12",
                "SELECT a FROM t WHERE b = $1 AND c > $12",
            ),
            ("SELECT '?' , x ? y", "SELECT '?' , x ? y"),
            ("CAST(?3 AS TEXT) IS NULL", "CAST($3 AS TEXT) IS NULL"),
        ];
        for (sql, expected) in cases {
            assert_eq!(super::dollar_placeholders(sql), expected);
        }
    }
}
