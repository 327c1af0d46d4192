//! Installed packages: the SQLite statements and row mapping of [`PackageRows`].

use conduit_core::Timestamp;
use conduit_store::{PackageRecord, PackageRows, Page};
use rusqlite::{params, Row};

use super::{from_json, to_json, SqliteTx};
use crate::{sqlite_error, Result};

const PACKAGE_COLUMNS: &str = "name, version, manifest, approved_grant, approved_gating, installed_at";

fn package_row(r: &Row) -> rusqlite::Result<Result<PackageRecord>> {
    let grant: String = r.get(3)?;
    let build = |approved_grant| -> Result<PackageRecord> {
        Ok(PackageRecord {
            name: r.get(0).map_err(sqlite_error)?,
            version: r.get(1).map_err(sqlite_error)?,
            manifest: r.get(2).map_err(sqlite_error)?,
            approved_grant,
            approved_gating: r.get(4).map_err(sqlite_error)?,
            installed_at: Timestamp(r.get(5).map_err(sqlite_error)?),
        })
    };
    Ok(from_json(&grant).and_then(build))
}

impl PackageRows for SqliteTx<'_> {
    fn put_package(&mut self, p: &PackageRecord) -> Result<()> {
        self.exec(
            &format!("INSERT OR REPLACE INTO packages ({PACKAGE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
            params![
                p.name,
                p.version,
                p.manifest,
                to_json(&p.approved_grant)?,
                p.approved_gating,
                p.installed_at.0
            ],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn get_package(&mut self, name: &str) -> Result<Option<PackageRecord>> {
        let sql = format!("SELECT {PACKAGE_COLUMNS} FROM packages WHERE name = ?1");
        self.query_one(&sql, [name], package_row)
    }

    fn page_packages(&mut self, page: &Page<String>) -> Result<Vec<PackageRecord>> {
        let after = page.after.clone().unwrap_or_default();
        let sql = format!("SELECT {PACKAGE_COLUMNS} FROM packages WHERE name > ?1 ORDER BY name LIMIT ?2");
        self.query_all(&sql, params![after, page.limit as i64], package_row)
    }

    fn delete_package(&mut self, name: &str) -> Result<bool> {
        Ok(self
            .exec("DELETE FROM packages WHERE name = ?1", [name])
            .map_err(sqlite_error)?
            > 0)
    }
}
