//! [`Sql`] on a SQLite connection: the shared statements run here, the write connection's from the
//! statements it keeps ([`crate::prepared`]), a reader's through rusqlite's statement cache.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, Statement};

use conduit_store::{StoreError, TokenLease};
use conduit_store_sql::{Arg, Column, Dialect, Row, Sql};

use crate::leases::KeptLeases;
use crate::prepared::KeptStatements;
use crate::redo::Statements as RedoStatements;
use crate::{sqlite_error, Result};

/// One connection's side of a transaction the caller opened on it, and what becomes of the
/// statements in it that write.
pub struct SqliteSql<'a> {
    conn: &'a Connection,
    /// The write connection's kept statements; none on a reader connection.
    kept: Option<&'a dyn KeptStatements>,
    writes: Writes<'a>,
    /// The write connection's kept leases; none on a reader connection.
    leases: Option<&'a mut KeptLeases>,
}

/// What a statement that writes does on a connection.
enum Writes<'a> {
    /// It runs (a reader connection's `query_only` refuses it there).
    Run,
    /// It runs and is recorded, with its arguments, for the redo log.
    Record(&'a mut RedoStatements),
    /// It is refused before it runs: a read inside the write transaction.
    Refuse,
}

impl<'a> SqliteSql<'a> {
    pub fn new(conn: &'a Connection) -> SqliteSql<'a> {
        SqliteSql {
            conn,
            kept: None,
            writes: Writes::Run,
            leases: None,
        }
    }

    pub fn recording(
        conn: &'a Connection,
        kept: &'a dyn KeptStatements,
        redo: &'a mut RedoStatements,
        leases: &'a mut KeptLeases,
    ) -> SqliteSql<'a> {
        SqliteSql {
            conn,
            kept: Some(kept),
            writes: Writes::Record(redo),
            leases: Some(leases),
        }
    }

    /// Reads inside the write transaction, which must not change what it holds.
    pub fn reading(conn: &'a Connection, kept: &'a dyn KeptStatements, leases: &'a mut KeptLeases) -> SqliteSql<'a> {
        SqliteSql {
            conn,
            kept: Some(kept),
            writes: Writes::Refuse,
            leases: Some(leases),
        }
    }

    /// Runs `f` on the prepared statement for `sql`: the write connection's kept one, else
    /// rusqlite's cached one.
    fn on_statement(&self, sql: &str, f: &mut dyn FnMut(&mut Statement<'_>) -> Result<()>) -> Result<()> {
        match self.kept {
            Some(kept) => kept.with(sql, f),
            None => {
                let mut cached = self.conn.prepare_cached(sql).map_err(sqlite_error)?;
                f(&mut cached)
            }
        }
    }

    /// A recorded statement runs only inside the write transaction: after SQLite rolled that back
    /// (a full disk, say), one more statement would commit on its own, outside the log.
    fn refuse_outside_transaction(&self) -> Result<()> {
        if matches!(self.writes, Writes::Record(_)) && self.conn.is_autocommit() {
            return Err(StoreError::RolledBack);
        }
        Ok(())
    }

    /// Whether a statement that writes must be kept; refuses one when reading only.
    fn recording_writes(&self, stmt: &rusqlite::Statement<'_>) -> Result<bool> {
        match (&self.writes, stmt.readonly()) {
            (_, true) | (Writes::Run, false) => Ok(false),
            (Writes::Record(_), false) => Ok(true),
            (Writes::Refuse, false) => Err(StoreError::Backend("a read of state may not write".into())),
        }
    }

    /// Whether a statement that writes ran and was recorded.
    pub fn recorded_any(&self) -> bool {
        matches!(&self.writes, Writes::Record(redo) if !redo.is_empty())
    }

    /// Records a statement that ran, and so did all it does, for the redo log.
    fn record(&mut self, sql: &str, args: &[Arg<'_>]) {
        if let Writes::Record(redo) = &mut self.writes {
            redo.push(sql, args);
        }
    }
}

fn bound<'a>(args: &'a [Arg<'a>]) -> impl Iterator<Item = ToSqlOutput<'a>> + 'a {
    args.iter().map(|arg| {
        ToSqlOutput::Borrowed(match *arg {
            Arg::Null => ValueRef::Null,
            Arg::Int(n) => ValueRef::Integer(n),
            Arg::Text(text) => ValueRef::Text(text.as_bytes()),
            Arg::Bytes(bytes) => ValueRef::Blob(bytes),
        })
    })
}

impl Sql for SqliteSql<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64> {
        self.refuse_outside_transaction()?;
        let (mut writes, mut changed) = (false, 0);
        self.on_statement(sql, &mut |stmt| {
            writes = self.recording_writes(stmt)?;
            changed = stmt
                .execute(rusqlite::params_from_iter(bound(args)))
                .map_err(sqlite_error)?;
            Ok(())
        })?;
        if writes {
            self.record(sql, args);
        }
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &str, args: &[Arg<'_>], each: &mut dyn FnMut(&dyn Row) -> Result<()>) -> Result<()> {
        self.refuse_outside_transaction()?;
        let (mut writes, mut stepped) = (false, false);
        let read = self.on_statement(sql, &mut |stmt| {
            writes = self.recording_writes(stmt)?;
            let mut rows = stmt
                .query(rusqlite::params_from_iter(bound(args)))
                .map_err(sqlite_error)?;
            let mut row = rows.next().map_err(sqlite_error)?;
            stepped = true;
            while let Some(found) = row {
                each(&SqliteRow(found))?;
                row = rows.next().map_err(sqlite_error)?;
            }
            Ok(())
        });
        // A write (`INSERT ... RETURNING`) has done all it does by its first step, whatever the
        // rows' reading did after it.
        if writes && stepped {
            self.record(sql, args);
        }
        read
    }

    fn kept_lease(&mut self, digest: &[u8; 32]) -> Option<TokenLease> {
        // After SQLite rolled the transaction back on its own (a full disk), no kept lease holds.
        if self.conn.is_autocommit() {
            return None;
        }
        self.leases.as_mut()?.get(digest)
    }

    fn keep_lease(&mut self, digest: &[u8; 32], lease: &TokenLease) {
        if let Some(leases) = &mut self.leases {
            leases.keep(digest, lease);
        }
    }

    /// The connection's last rowid: SQLite's `RETURNING` would collect the row in a temporary
    /// table of its own, which cost more than the insert's index entries.
    fn insert_keyed(&mut self, sql: &str, _key: &'static str, args: &[Arg<'_>]) -> Result<i64> {
        match self.execute(sql, args)? {
            1 => Ok(self.conn.last_insert_rowid()),
            _ => Err(StoreError::Backend(
                "an insert of one row changed another number of rows".into(),
            )),
        }
    }
}

struct SqliteRow<'r, 's>(&'r rusqlite::Row<'s>);

impl Row for SqliteRow<'_, '_> {
    fn column(&self, index: usize) -> Result<Column<'_>> {
        Ok(match self.0.get_ref(index).map_err(sqlite_error)? {
            ValueRef::Null => Column::Null,
            ValueRef::Integer(n) => Column::Int(n),
            ValueRef::Text(text) => Column::Text(
                std::str::from_utf8(text).map_err(|_| StoreError::Corrupt("a text column is not UTF-8".into()))?,
            ),
            ValueRef::Blob(bytes) => Column::Bytes(bytes),
            ValueRef::Real(_) => return Err(StoreError::Corrupt("a column is a float".into())),
        })
    }
}

#[cfg(test)]
mod tests {
    use conduit_store::{AuditFilter, EventFilter};
    use conduit_store_sql::statements;
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

    /// How many times SQLite prepared `sql` again over three runs of the cached statement.
    fn reprepared(sql: &str) -> i32 {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::migrations::migrate(&mut conn).unwrap();
        let mut stmt = conn.prepare_cached(sql).unwrap();
        for limit in [10, 20, 10] {
            let args: Vec<i64> = vec![limit; stmt.parameter_count()];
            let mut rows = stmt.query(rusqlite::params_from_iter(args)).unwrap();
            while rows.next().unwrap().is_some() {}
        }
        stmt.get_status(rusqlite::StatementStatus::RePrepare)
    }

    #[test]
    fn a_page_runs_from_the_statement_cache_without_being_prepared_again() {
        let events = statements::page_events_sql(&EventFilter::default());
        let sequences = statements::page_event_sequences_sql(&EventFilter::default());
        let audit = statements::page_audit_sql(&AuditFilter::default());
        for sql in [&events, &sequences, &audit] {
            assert_eq!(reprepared(sql), 0, "{sql}");
        }
        // The control: the same page limited by a bare parameter is prepared on every run.
        let bare = events.replace("LIMIT CAST(?4 AS BIGINT)", "LIMIT ?4");
        assert_ne!(bare, events);
        assert!(reprepared(&bare) > 0, "{bare}");
    }

    #[test]
    fn one_works_events_are_read_through_its_index() {
        let of_work = plan(&statements::page_events_sql(&EventFilter::of_work("w")));
        assert!(of_work.contains("USING INDEX events_by_work"), "{of_work}");
        let all = plan(&statements::page_events_sql(&EventFilter::default()));
        assert!(all.contains("INTEGER PRIMARY KEY"), "{all}");
        // A page's sequences alone need no row of the Work's events: the index holds them.
        let sequences = plan(&statements::page_event_sequences_sql(&EventFilter::of_work("w")));
        assert!(sequences.contains("USING COVERING INDEX events_by_work"), "{sequences}");
        assert!(!of_work.contains("COVERING"), "the control: {of_work}");
    }

    #[test]
    fn the_per_minute_bound_seeks_the_chain_index_and_counts_nothing() {
        for sql in [
            statements::CAUSAL_BOUNDS,
            statements::CAUSAL_TIME_BACK,
            statements::INSERT_EVENT,
        ] {
            let steps = plan(sql);
            assert!(steps.contains("USING COVERING INDEX events_chain"), "{steps}");
            assert!(!steps.contains("SCAN"), "{steps}");
        }
    }

    #[test]
    fn an_audit_filter_reads_the_index_of_what_it_names() {
        let cases = [
            (Some("x"), None, "toolbelt_audit_by_execution"),
            // A Work's page is its executions' pages, each read with the Work named too.
            (Some("x"), Some("w"), "toolbelt_audit_by_execution"),
            (None, None, "PRIMARY KEY"),
        ];
        for (execution, work, index) in cases {
            let filter = AuditFilter {
                execution: execution.map(str::to_owned),
                work: work.map(str::to_owned),
                ..AuditFilter::default()
            };
            let steps = plan(&statements::page_audit_sql(&filter));
            assert!(steps.contains(index), "{index}: {steps}");
        }
    }
}
