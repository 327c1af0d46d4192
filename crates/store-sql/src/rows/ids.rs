//! Abbreviated ids: the statement of [`IdRows`].

use conduit_core::id_prefix::IdKind;
use conduit_store::IdRows;

use super::SqlTx;
use crate::{args, Dialect, Result};

/// The table holding each kind's ids, each with an index on `id`.
fn table(kind: IdKind) -> &'static str {
    match kind {
        IdKind::Work => "work",
        IdKind::Execution => "executions",
        IdKind::Event => "events",
        IdKind::Approval => "approvals",
    }
}

/// Every id of the table that starts with `?1` sorts in `[?1, ?2)` where `?2` is `?1` followed by
/// `~` (ids are hexadecimal digits and hyphens, all below it), when text compares byte by byte:
/// always in SQLite, and in PostgreSQL under the "C" collation (a database's own collation may
/// ignore hyphens). There, unless the database's collation is "C", the id index cannot serve the
/// range and the lookup scans the table.
fn range(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "id >= ?1 AND id < ?2",
        Dialect::Postgres => r#"id COLLATE "C" >= ?1 AND id COLLATE "C" < ?2"#,
    }
}

impl IdRows for SqlTx<'_> {
    fn ids_starting_with(&mut self, kind: IdKind, prefix: &str, limit: usize) -> Result<Vec<String>> {
        let sql = format!(
            "SELECT id FROM {} WHERE {} ORDER BY id LIMIT CAST(?3 AS BIGINT)",
            table(kind),
            range(self.sql.dialect())
        );
        let past = format!("{prefix}~");
        self.query_all(&sql, args![prefix, past, limit as i64], |row| row.get(0))
    }
}
