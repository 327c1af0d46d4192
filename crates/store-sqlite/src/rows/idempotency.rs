//! Operators' idempotency keys: the SQLite statements and row mapping of [`IdempotencyRows`].

use conduit_core::Timestamp;
use conduit_store::{IdempotencyRows, IdempotentRecord};
use rusqlite::params;

use super::{from_json, to_json, SqliteTx};
use crate::{sqlite_error, Result};

impl IdempotencyRows for SqliteTx<'_> {
    fn get_idempotent(&mut self, principal: &str, key: &str) -> Result<Option<IdempotentRecord>> {
        let sql = "SELECT principal, key, method, path, body_hash, status, response, created_at FROM idempotency
                   WHERE principal = ?1 AND key = ?2";
        self.query_one(sql, params![principal, key], |r| {
            let response: String = r.get(6)?;
            let build = || -> Result<IdempotentRecord> {
                Ok(IdempotentRecord {
                    principal: r.get(0).map_err(sqlite_error)?,
                    key: r.get(1).map_err(sqlite_error)?,
                    method: r.get(2).map_err(sqlite_error)?,
                    path: r.get(3).map_err(sqlite_error)?,
                    body_hash: r.get(4).map_err(sqlite_error)?,
                    status: r.get(5).map_err(sqlite_error)?,
                    response: from_json(&response)?,
                    created_at: Timestamp(r.get(7).map_err(sqlite_error)?),
                })
            };
            Ok(build())
        })
    }

    fn insert_idempotent(&mut self, i: &IdempotentRecord) -> Result<()> {
        self.exec(
            "INSERT INTO idempotency (principal, key, method, path, body_hash, status, response, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                i.principal,
                i.key,
                i.method,
                i.path,
                i.body_hash,
                i.status,
                to_json(&i.response)?,
                i.created_at.0
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn delete_idempotent_before(&mut self, cutoff: Timestamp) -> Result<usize> {
        self.exec("DELETE FROM idempotency WHERE created_at < ?1", [cutoff.0])
            .map_err(sqlite_error)
    }
}
