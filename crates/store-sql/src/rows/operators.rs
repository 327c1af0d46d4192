//! Operator credentials (digests only), what operators changed, and the keys daemons share: the
//! statements and row mapping of [`OperatorRows`].

use crate::{args, Row};
use conduit_core::{OperatorAction, OperatorRecord, Role, Timestamp};
use conduit_store::{OperatorRows, Page};

use super::{corrupt, digest, from_json, matching, oldest_first, oldest_first_params, to_json, SqlTx};
use crate::Result;

const OPERATOR_COLUMNS: &str = "id, name, role, digest, created_at, revoked_at, revoked_by";

fn operator_row(r: &dyn Row) -> Result<OperatorRecord> {
    let role: String = r.get(2)?;
    let digest_bytes: Vec<u8> = r.get(3)?;
    let build = || -> Result<OperatorRecord> {
        Ok(OperatorRecord {
            id: r.get(0)?,
            name: r.get(1)?,
            role: Role::parse(&role).ok_or_else(|| corrupt("operator role"))?,
            digest: digest(digest_bytes)?,
            created_at: Timestamp(r.get(4)?),
            revoked_at: r.get::<Option<i64>>(5)?.map(Timestamp),
            revoked_by: r.get(6)?,
        })
    };
    build()
}

const ACTION_COLUMNS: &str = "id, at, principal, route, path, status, detail";

fn action_row(r: &dyn Row) -> Result<OperatorAction> {
    let detail: String = r.get(6)?;
    Ok(OperatorAction {
        id: r.get(0)?,
        at: Timestamp(r.get(1)?),
        principal: r.get(2)?,
        route: r.get(3)?,
        path: r.get(4)?,
        status: u16::try_from(r.get::<i64>(5)?).map_err(|_| corrupt("operator action status"))?,
        detail: from_json(&detail)?,
    })
}

impl OperatorRows for SqlTx<'_> {
    fn get_operator(&mut self, id: &str) -> Result<Option<OperatorRecord>> {
        self.query_one(
            &format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE id = ?1"),
            args![id],
            operator_row,
        )
    }

    fn page_operators(&mut self, page: &Page<(String, String)>) -> Result<Vec<OperatorRecord>> {
        let (name, id) = page.after.clone().unwrap_or_default();
        let sql = format!(
            "SELECT {OPERATOR_COLUMNS} FROM operators WHERE created_at <= ?1
             AND (name > ?2 OR (name = ?2 AND id < ?3)) ORDER BY name, id DESC LIMIT CAST(?4 AS BIGINT)"
        );
        self.query_all(&sql, args![page.upper, name, id, page.limit as i64], operator_row)
    }

    fn record_operator_action(&mut self, a: &OperatorAction) -> Result<()> {
        self.exec(
            &format!(
                "INSERT INTO operator_actions ({ACTION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                 ON CONFLICT (id) DO NOTHING"
            ),
            args![
                a.id,
                a.at.0,
                a.principal,
                a.route,
                a.path,
                a.status as i64,
                to_json(&a.detail)?
            ],
        )?;
        Ok(())
    }

    fn page_operator_actions(
        &mut self,
        principal: Option<&str>,
        page: &Page<(i64, String)>,
    ) -> Result<Vec<OperatorAction>> {
        let of_principal = matching("principal", "=", 1, principal.is_some());
        let sql = format!(
            "SELECT {ACTION_COLUMNS} FROM operator_actions WHERE {of_principal} AND {}",
            oldest_first("at", 2)
        );
        let (upper, at, id, limit) = oldest_first_params(page);
        self.query_all(&sql, args![principal, upper, at, id, limit], action_row)
    }

    fn shared_key(&mut self, name: &str, fresh: &[u8]) -> Result<Vec<u8>> {
        self.exec(
            "INSERT INTO shared_keys (name, key) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
            args![name, fresh],
        )?;
        self.query_one("SELECT key FROM shared_keys WHERE name = ?1", args![name], |r| r.get(0))?
            .ok_or_else(|| corrupt("shared key"))
    }

    fn insert_operator(&mut self, o: &OperatorRecord) -> Result<()> {
        self.exec(
            &format!("INSERT INTO operators ({OPERATOR_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            args![
                o.id,
                o.name,
                o.role.as_str(),
                &o.digest[..],
                o.created_at.0,
                o.revoked_at.map(|t| t.0),
                o.revoked_by
            ],
        )?;
        Ok(())
    }

    fn operator_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<OperatorRecord>> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE digest = ?1");
        self.query_one(&sql, args![&digest[..]], operator_row)
    }

    fn active_operator(&mut self, name: &str) -> Result<Option<OperatorRecord>> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE name = ?1 AND revoked_at IS NULL");
        self.query_one(&sql, args![name], operator_row)
    }

    fn revoke_operator(&mut self, id: &str, at: Timestamp, by: &str) -> Result<()> {
        self.exec(
            "UPDATE operators SET revoked_at = ?2, revoked_by = ?3 WHERE id = ?1 AND revoked_at IS NULL",
            args![id, at.0, by],
        )?;
        Ok(())
    }
}
