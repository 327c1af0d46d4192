//! Declared artifacts: the SQLite statements and row mapping of [`ArtifactRows`].

use conduit_core::{ArtifactRecord, ArtifactRefusal, Timestamp};
use conduit_store::{ArtifactEntry, ArtifactKey, ArtifactRows, Page};
use rusqlite::{params, Row};

use super::{corrupt, SqliteTx};
use crate::{sqlite_error, Result};

const ARTIFACT_COLUMNS: &str = "execution_id, idx, name, size, sha256, refusal, created_at";

fn artifact_row(r: &Row) -> rusqlite::Result<Result<ArtifactRecord>> {
    artifact_row_at(r, 0)
}

/// The artifact whose columns start at `at`.
fn artifact_row_at(r: &Row, at: usize) -> rusqlite::Result<Result<ArtifactRecord>> {
    let kept = match (
        r.get::<_, Option<i64>>(at + 3)?,
        r.get::<_, Option<String>>(at + 4)?,
        r.get::<_, Option<String>>(at + 5)?,
    ) {
        (Some(size), Some(sha256), None) => Ok(Ok((size as u64, sha256))),
        (None, None, Some(code)) => ArtifactRefusal::parse(&code)
            .map(Err)
            .ok_or_else(|| corrupt("artifact refusal")),
        _ => Err(corrupt("artifact")),
    };
    let build = |kept| -> Result<ArtifactRecord> {
        Ok(ArtifactRecord {
            execution_id: r.get(at).map_err(sqlite_error)?,
            index: r.get(at + 1).map_err(sqlite_error)?,
            name: r.get(at + 2).map_err(sqlite_error)?,
            kept,
            created_at: Timestamp(r.get(at + 6).map_err(sqlite_error)?),
        })
    };
    Ok(kept.and_then(build))
}

fn artifact_entry(r: &Row) -> rusqlite::Result<Result<ArtifactEntry>> {
    let declared = match r.get::<_, i64>(2)? {
        -1 => None,
        _ => Some(artifact_row_at(r, 3)?),
    };
    let build = |declared: Option<Result<ArtifactRecord>>| -> Result<ArtifactEntry> {
        Ok(ArtifactEntry {
            started_at: r.get(0).map_err(sqlite_error)?,
            execution_id: r.get(1).map_err(sqlite_error)?,
            declared: declared.transpose()?,
        })
    };
    Ok(build(declared))
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

    fn page_artifacts(&mut self, execution: Option<&str>, page: &Page<ArtifactKey>) -> Result<Vec<ArtifactEntry>> {
        let (at, id, index) = page.after.clone().unwrap_or((i64::MIN, String::new(), i64::MIN));
        // Each execution's log is the row at index -1, before its declared files.
        let sql = format!(
            "SELECT started_at, id, idx, {ARTIFACT_COLUMNS} FROM (
                 SELECT x.started_at, x.id, -1 AS idx, NULL AS execution_id, NULL AS name, NULL AS size,
                        NULL AS sha256, NULL AS refusal, NULL AS created_at
                   FROM executions x WHERE (?1 IS NULL OR x.id = ?1) AND x.started_at <= ?2
                 UNION ALL
                 SELECT x.started_at, x.id, a.idx, a.execution_id, a.name, a.size, a.sha256, a.refusal, a.created_at
                   FROM artifacts a JOIN executions x ON x.id = a.execution_id
                  WHERE (?1 IS NULL OR x.id = ?1) AND x.started_at <= ?2)
             WHERE (started_at, id, idx) > (?3, ?4, ?5) ORDER BY started_at, id, idx LIMIT ?6"
        );
        self.query_all(
            &sql,
            params![execution, page.upper, at, id, index, page.limit as i64],
            artifact_entry,
        )
    }
}
