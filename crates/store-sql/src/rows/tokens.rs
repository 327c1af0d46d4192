//! Execution tokens (digests only): the statements and row mapping of [`TokenRows`].

use crate::{args, Row};
use conduit_core::{Timestamp, TokenRecord};
use conduit_store::{Page, TokenRows};

use super::{digest, from_json, oldest_first, oldest_first_params, to_json, SqlTx};
use crate::Result;

const TOKEN_COLUMNS: &str = "id, digest, execution_id, work_id, scope, binding, epoch, owner, generation, operations, \
     issued_at, expires_at, revoked_at";

fn token_row(r: &dyn Row) -> Result<TokenRecord> {
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
