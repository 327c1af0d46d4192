//! Execution tokens (digests only): the statements and row mapping of [`TokenRows`].

use std::sync::{Arc, LazyLock};

use crate::{args, Column, Row};
use conduit_core::{Timestamp, TokenRecord};
use conduit_store::{Page, StoreError, TokenLease, TokenRows};

use super::events::{event_row, EVENT_COLUMNS};
use super::executions::{execution_row, EXECUTION_COLUMNS};
use super::work::{work_row, WORK_COLUMNS};
use super::{digest, from_json, oldest_first, oldest_first_params, to_json, SqlTx};
use crate::Result;

pub(super) const TOKEN_COLUMNS: &str =
    "id, digest, execution_id, work_id, scope, binding, epoch, owner, generation, operations, \
     issued_at, expires_at, revoked_at";

pub(super) fn token_row(r: &dyn Row) -> Result<TokenRecord> {
    let digest_bytes: Vec<u8> = r.get(1)?;
    let operations: String = r.get(9)?;
    let build = || -> Result<TokenRecord> {
        Ok(TokenRecord {
            id: r.get(0)?,
            digest: digest(digest_bytes)?,
            execution_id: r.get(2)?,
            work_id: r.get(3)?,
            scope: r.get(4)?,
            binding: r.get(5)?,
            epoch: r.get(6)?,
            owner: r.get(7)?,
            generation: r.get(8)?,
            operations: from_json(&operations)?,
            issued_at: Timestamp(r.get(10)?),
            expires_at: Timestamp(r.get(11)?),
            revoked_at: r.get::<Option<i64>>(12)?.map(Timestamp),
        })
    };
    build()
}

/// A token's row, its execution's, its Work's and its segment's cause event's, side by side: one
/// statement where there were four lookups (a toolbelt call's first read; the Work's keys are a
/// second statement, as they are for every Work).
struct LeaseQuery {
    sql: String,
    /// Where each table's columns start in the joined row (the token's start at 0), and how many.
    execution: (usize, usize),
    work: (usize, usize),
    cause: (usize, usize),
}

static TOKEN_LEASE: LazyLock<LeaseQuery> = LazyLock::new(|| {
    let count = |columns: &str| columns.split(',').count();
    let execution_at = count(TOKEN_COLUMNS);
    let work_at = execution_at + count(EXECUTION_COLUMNS);
    let (executions, works, events) = (count(EXECUTION_COLUMNS), count(WORK_COLUMNS), count(EVENT_COLUMNS));
    LeaseQuery {
        sql: format!(
            "SELECT {}, {}, {}, {} FROM tokens t \
             LEFT JOIN executions x ON x.id = t.execution_id \
             LEFT JOIN work w ON w.id = t.work_id \
             LEFT JOIN events c ON c.id = x.cause_event \
             WHERE t.digest = ?1",
            of("t", TOKEN_COLUMNS),
            of("x", EXECUTION_COLUMNS),
            of("w", WORK_COLUMNS),
            of("c", EVENT_COLUMNS)
        ),
        execution: (execution_at, executions),
        work: (work_at, works),
        cause: (work_at + works, events),
    }
});

/// `columns` (a comma-separated list) as columns of the table named `alias` in a join.
fn of(alias: &str, columns: &str) -> String {
    let named: Vec<String> = columns.split(',').map(|c| format!("{alias}.{}", c.trim())).collect();
    named.join(", ")
}

/// One table's part of a joined row: its `len` columns from `first` on, and no others.
struct Part<'r> {
    row: &'r dyn Row,
    first: usize,
    len: usize,
}

impl Row for Part<'_> {
    fn column(&self, index: usize) -> Result<Column<'_>> {
        if index >= self.len {
            return Err(StoreError::Corrupt("a joined row read past its table's columns".into()));
        }
        self.row.column(self.first + index)
    }
}

impl Part<'_> {
    /// The part's row, or `None` when the outer join found none (its first column, a key, is NULL).
    fn read<T>(&self, decode: fn(&dyn Row) -> Result<T>) -> Result<Option<T>> {
        match self.column(0)? {
            Column::Null => Ok(None),
            _ => decode(self).map(Some),
        }
    }
}

/// What [`TOKEN_LEASE`] reads: the token and its lease's rows, each `None` when the join found none
/// (the Work's keys are read after).
fn token_lease_row(r: &dyn Row) -> Result<TokenLease> {
    let q = &*TOKEN_LEASE;
    let part = |(first, len)| Part { row: r, first, len };
    Ok(TokenLease {
        token: Arc::new(token_row(r)?),
        execution: part(q.execution).read(execution_row)?.map(Arc::new),
        work: part(q.work).read(work_row)?.map(Arc::new),
        cause: part(q.cause).read(event_row)?.map(Arc::new),
    })
}

impl TokenRows for SqlTx<'_> {
    fn insert_token(&mut self, t: &TokenRecord) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
            ),
            args![
                t.id,
                &t.digest[..],
                t.execution_id,
                t.work_id,
                t.scope,
                t.binding,
                t.epoch,
                t.owner,
                t.generation,
                to_json(&t.operations)?,
                t.issued_at.0,
                t.expires_at.0,
                t.revoked_at.map(|r| r.0)
            ],
        )?;
        Ok(())
    }

    fn token_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<TokenRecord>> {
        self.query_one(
            &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE digest = ?1"),
            args![&digest[..]],
            token_row,
        )
    }

    fn token_lease_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<TokenLease>> {
        if let Some(kept) = self.sql.kept_lease(digest) {
            return Ok(Some(kept));
        }
        let Some(mut lease) = self.query_one(&TOKEN_LEASE.sql, args![&digest[..]], token_lease_row)? else {
            return Ok(None);
        };
        if let Some(work) = &mut lease.work {
            // Just read, so not shared yet: no copy is made.
            let work = Arc::make_mut(work);
            work.keys = self.work_keys(&work.id)?;
        }
        self.sql.keep_lease(digest, &lease);
        Ok(Some(lease))
    }

    fn revoke_tokens_below(&mut self, work_id: &str, epoch: u32, at: Timestamp) -> Result<()> {
        self.exec(
            "UPDATE tokens SET revoked_at = ?3 WHERE work_id = ?1 AND epoch < ?2 AND revoked_at IS NULL",
            args![work_id, epoch, at.0],
        )?;
        Ok(())
    }

    fn revoke_execution_tokens(&mut self, execution_id: &str, at: Timestamp) -> Result<()> {
        self.exec(
            "UPDATE tokens SET revoked_at = ?2 WHERE execution_id = ?1 AND revoked_at IS NULL",
            args![execution_id, at.0],
        )?;
        Ok(())
    }

    fn delete_tokens_settled_before(&mut self, cutoff: Timestamp) -> Result<usize> {
        self.exec(
            "DELETE FROM tokens WHERE revoked_at < ?1 OR expires_at < ?1",
            args![cutoff.0],
        )
    }

    fn revoke_token(&mut self, id: &str, at: Timestamp) -> Result<bool> {
        let changed = self.exec(
            "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            args![id, at.0],
        )?;
        Ok(changed > 0)
    }

    fn page_tokens_of_execution(&mut self, execution_id: &str, page: &Page<(i64, String)>) -> Result<Vec<TokenRecord>> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE execution_id = ?1 AND {}",
            oldest_first("issued_at", 2)
        );
        let (upper, at, id, limit) = oldest_first_params(page);
        self.query_all(&sql, args![execution_id, upper, at, id, limit], token_row)
    }
}
