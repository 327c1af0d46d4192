//! Installed packages: the statements and row mapping of [`PackageRows`].

use crate::{args, Row};
use conduit_core::Timestamp;
use conduit_store::{PackageRecord, PackageRows, Page};

use super::{from_json, to_json, upsert, SqlTx};
use crate::Result;

const PACKAGE_COLUMNS: &str = "name, version, manifest, approved_grant, approved_gating, installed_at";

fn package_row(r: &dyn Row) -> Result<PackageRecord> {
    let grant: String = r.get(3)?;
    let build = |approved_grant| -> Result<PackageRecord> {
        Ok(PackageRecord {
            name: r.get(0)?,
            version: r.get(1)?,
            manifest: r.get(2)?,
            approved_grant,
            approved_gating: r.get(4)?,
            installed_at: Timestamp(r.get(5)?),
        })
    };
    from_json(&grant).and_then(build)
}

impl PackageRows for SqlTx<'_> {
    fn put_package(&mut self, p: &PackageRecord) -> Result<()> {
        self.exec(
            &upsert("packages", PACKAGE_COLUMNS, 1),
            args![
                p.name,
                p.version,
                p.manifest,
                to_json(&p.approved_grant)?,
                p.approved_gating,
                p.installed_at.0
            ],
        )?;
        Ok(())
    }

    fn get_package(&mut self, name: &str) -> Result<Option<PackageRecord>> {
        let sql = format!("SELECT {PACKAGE_COLUMNS} FROM packages WHERE name = ?1");
        self.query_one(&sql, args![name], package_row)
    }

    fn page_packages(&mut self, page: &Page<String>) -> Result<Vec<PackageRecord>> {
        let after = page.after.clone().unwrap_or_default();
        let sql =
            format!("SELECT {PACKAGE_COLUMNS} FROM packages WHERE name > ?1 ORDER BY name LIMIT CAST(?2 AS BIGINT)");
        self.query_all(&sql, args![after, page.limit as i64], package_row)
    }

    fn delete_package(&mut self, name: &str) -> Result<bool> {
        Ok(self.exec("DELETE FROM packages WHERE name = ?1", args![name])? > 0)
    }
}
