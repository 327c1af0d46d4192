//! Declared artifacts: the statements and row mapping of [`ArtifactRows`].

use crate::{args, Row};
use conduit_core::{ArtifactRecord, ArtifactRefusal, Timestamp};
use conduit_store::{ArtifactEntry, ArtifactKey, ArtifactRows, Page};

use super::{corrupt, upsert, SqlTx};
use crate::Result;

const ARTIFACT_COLUMNS: &str = "execution_id, idx, name, size, sha256, refusal, created_at";

fn artifact_row(r: &dyn Row) -> Result<ArtifactRecord> {
    artifact_row_at(r, 0)
}

/// The artifact whose columns start at `at`.
fn artifact_row_at(r: &dyn Row, at: usize) -> Result<ArtifactRecord> {
    let kept = match (
        r.get::<Option<i64>>(at + 3)?,
        r.get::<Option<String>>(at + 4)?,
        r.get::<Option<String>>(at + 5)?,
    ) {
        (Some(size), Some(sha256), None) => Ok(Ok((size as u64, sha256))),
        (None, None, Some(code)) => ArtifactRefusal::parse(&code)
            .map(Err)
            .ok_or_else(|| corrupt("artifact refusal")),
        _ => Err(corrupt("artifact")),
    };
    Ok(ArtifactRecord {
        execution_id: r.get(at)?,
        index: r.get(at + 1)?,
        name: r.get(at + 2)?,
        kept: kept?,
        created_at: Timestamp(r.get(at + 6)?),
    })
}

fn artifact_entry(r: &dyn Row) -> Result<ArtifactEntry> {
    let declared = match r.get::<i64>(2)? {
        -1 => None,
        _ => Some(artifact_row_at(r, 3)?),
    };
    Ok(ArtifactEntry {
        started_at: r.get(0)?,
        execution_id: r.get(1)?,
        declared,
    })
}

impl ArtifactRows for SqlTx<'_> {
    fn put_artifact(&mut self, a: &ArtifactRecord) -> Result<()> {
        let (size, sha256, refusal) = match &a.kept {
            Ok((size, sha256)) => (Some(*size as i64), Some(sha256.as_str()), None),
            Err(refusal) => (None, None, Some(refusal.as_str())),
        };
        self.exec(
            &upsert("artifacts", ARTIFACT_COLUMNS, 2),
            args![a.execution_id, a.index, a.name, size, sha256, refusal, a.created_at.0],
        )?;
        Ok(())
    }

    fn get_artifact(&mut self, execution_id: &str, index: u32) -> Result<Option<ArtifactRecord>> {
        let sql = format!("SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE execution_id = ?1 AND idx = ?2");
        self.query_one(&sql, args![execution_id, index], artifact_row)
    }

    fn page_artifacts(&mut self, execution: Option<&str>, page: &Page<ArtifactKey>) -> Result<Vec<ArtifactEntry>> {
        let (at, id, index) = page.after.clone().unwrap_or((i64::MIN, String::new(), i64::MIN));
        // Each execution's log is the row at index -1, before its declared files.
        let sql = format!(
            "SELECT started_at, id, idx, {ARTIFACT_COLUMNS} FROM (
                 SELECT x.started_at, x.id, -1 AS idx, NULL AS execution_id, NULL AS name, NULL AS size,
                        NULL AS sha256, NULL AS refusal, NULL AS created_at
                   FROM executions x WHERE (CAST(?1 AS TEXT) IS NULL OR x.id = ?1) AND x.started_at <= ?2
                 UNION ALL
                 SELECT x.started_at, x.id, a.idx, a.execution_id, a.name, a.size, a.sha256, a.refusal, a.created_at
                   FROM artifacts a JOIN executions x ON x.id = a.execution_id
                  WHERE (CAST(?1 AS TEXT) IS NULL OR x.id = ?1) AND x.started_at <= ?2) AS entries
             WHERE (started_at, id, idx) > (?3, ?4, ?5) ORDER BY started_at, id, idx LIMIT CAST(?6 AS BIGINT)"
        );
        self.query_all(
            &sql,
            args![execution, page.upper, at, id, index, page.limit as i64],
            artifact_entry,
        )
    }
}
