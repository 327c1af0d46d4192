//! Declared artifacts: the SQLite statements and row mapping of [`ArtifactRows`].

use conduit_core::{ArtifactRecord, ArtifactRefusal, Timestamp};
use conduit_store::ArtifactRows;
use rusqlite::{params, Row};

use super::{corrupt, SqliteTx};
use crate::{sqlite_error, Result};

const ARTIFACT_COLUMNS: &str = "execution_id, idx, name, size, sha256, refusal, created_at";

fn artifact_row(r: &Row) -> rusqlite::Result<Result<ArtifactRecord>> {
    let kept = match (
        r.get::<_, Option<i64>>(3)?,
        r.get::<_, Option<String>>(4)?,
        r.get::<_, Option<String>>(5)?,
    ) {
        (Some(size), Some(sha256), None) => Ok(Ok((size as u64, sha256))),
        (None, None, Some(code)) => ArtifactRefusal::parse(&code)
            .map(Err)
            .ok_or_else(|| corrupt("artifact refusal")),
        _ => Err(corrupt("artifact")),
    };
    let build = |kept| -> Result<ArtifactRecord> {
        Ok(ArtifactRecord {
            execution_id: r.get(0).map_err(sqlite_error)?,
            index: r.get(1).map_err(sqlite_error)?,
            name: r.get(2).map_err(sqlite_error)?,
            kept,
            created_at: Timestamp(r.get(6).map_err(sqlite_error)?),
        })
    };
    Ok(kept.and_then(build))
}

impl ArtifactRows for SqliteTx<'_> {
    fn put_artifact(&mut self, a: &ArtifactRecord) -> Result<()> {
        let (size, sha256, refusal) = match &a.kept {
            Ok((size, sha256)) => (Some(*size as i64), Some(sha256.as_str()), None),
            Err(refusal) => (None, None, Some(refusal.as_str())),
        };
        self.exec(
            &format!("INSERT OR REPLACE INTO artifacts ({ARTIFACT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            params![a.execution_id, a.index, a.name, size, sha256, refusal, a.created_at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn get_artifact(&mut self, execution_id: &str, index: u32) -> Result<Option<ArtifactRecord>> {
        let sql = format!("SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE execution_id = ?1 AND idx = ?2");
        self.query_one(&sql, params![execution_id, index], artifact_row)
    }

    fn list_artifacts(&mut self, execution: Option<&str>) -> Result<Vec<ArtifactRecord>> {
        let sql = format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE (?1 IS NULL OR execution_id = ?1) ORDER BY execution_id, idx"
        );
        self.query_all(&sql, params![execution], artifact_row)
    }
}
