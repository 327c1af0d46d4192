//! Operators' idempotency keys: the statements and row mapping of [`IdempotencyRows`].

use crate::args;
use conduit_core::Timestamp;
use conduit_store::{IdempotencyRows, IdempotentRecord};

use super::{from_json, to_json, SqlTx};
use crate::Result;

impl IdempotencyRows for SqlTx<'_> {
    fn get_idempotent(&mut self, principal: &str, key: &str) -> Result<Option<IdempotentRecord>> {
        let sql = "SELECT principal, key, method, path, body_hash, status, response, created_at FROM idempotency
                   WHERE principal = ?1 AND key = ?2";
        self.query_one(sql, args![principal, key], |r| {
            let response: String = r.get(6)?;
            let build = || -> Result<IdempotentRecord> {
                Ok(IdempotentRecord {
                    principal: r.get(0)?,
                    key: r.get(1)?,
                    method: r.get(2)?,
                    path: r.get(3)?,
                    body_hash: r.get(4)?,
                    status: r.get(5)?,
                    response: from_json(&response)?,
                    created_at: Timestamp(r.get(7)?),
                })
            };
            build()
        })
    }

    fn insert_idempotent(&mut self, i: &IdempotentRecord) -> Result<()> {
        self.exec(
            "INSERT INTO idempotency (principal, key, method, path, body_hash, status, response, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            args![
                i.principal,
                i.key,
                i.method,
                i.path,
                i.body_hash,
                i.status,
                to_json(&i.response)?,
                i.created_at.0
            ],
        )?;
        Ok(())
    }

    fn delete_idempotent_before(&mut self, cutoff: Timestamp) -> Result<usize> {
        self.exec("DELETE FROM idempotency WHERE created_at < ?1", args![cutoff.0])
    }
}
