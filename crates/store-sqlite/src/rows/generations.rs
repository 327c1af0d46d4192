//! Configuration generations and the scopes each published: the SQLite statements and row mapping of [`GenerationRows`].

use conduit_core::Timestamp;
use conduit_store::{GenerationRows, Page, ScopeRecord};
use rusqlite::params;

use super::SqliteTx;
use crate::{sqlite_error, Result};

impl GenerationRows for SqliteTx<'_> {
    fn latest_generation(&mut self) -> Result<Option<(i64, String, String)>> {
        let sql = "SELECT generation, hash, config FROM config_generations ORDER BY generation DESC LIMIT 1";
        self.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    }

    fn generation_hash(&mut self, generation: i64) -> Result<Option<String>> {
        let sql = "SELECT hash FROM config_generations WHERE generation = ?1";
        self.query_row(sql, [generation], |r| r.get(0))
    }

    fn insert_generation(&mut self, generation: i64, hash: &str, config_json: &str, at: Timestamp) -> Result<()> {
        self.exec(
            "INSERT INTO config_generations (generation, hash, config, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![generation, hash, config_json, at.0],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn upsert_scope(&mut self, id: &str, generation: i64, parent: Option<&str>, enabled: bool) -> Result<()> {
        self.exec(
            "INSERT INTO scopes (id, generation, parent, enabled) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET generation = ?2, parent = ?3, enabled = ?4, removed_in = NULL",
            params![id, generation, parent, enabled],
        )
        .map_err(sqlite_error)?;
        Ok(())
    }

    fn tombstone_scopes(&mut self, kept: &[String], generation: i64) -> Result<()> {
        let live: Vec<String> = {
            let mut stmt = self
                .tx
                .prepare_cached("SELECT id FROM scopes WHERE removed_in IS NULL")
                .map_err(sqlite_error)?;
            let ids = stmt
                .query_map([], |r| r.get(0))
                .map_err(sqlite_error)?
                .collect::<rusqlite::Result<Vec<String>>>()
                .map_err(sqlite_error)?;
            ids
        };
        for id in live.iter().filter(|id| !kept.contains(id)) {
            self.exec(
                "UPDATE scopes SET removed_in = ?2, enabled = 0 WHERE id = ?1",
                params![id, generation],
            )
            .map_err(sqlite_error)?;
        }
        Ok(())
    }

    fn page_scopes(&mut self, page: &Page<String>) -> Result<Vec<ScopeRecord>> {
        let after = page.after.clone().unwrap_or_default();
        let mut stmt = self
            .tx
            .prepare_cached(
                "SELECT id, generation, parent, enabled, removed_in FROM scopes WHERE id > ?1 ORDER BY id LIMIT ?2",
            )
            .map_err(sqlite_error)?;
        let rows = stmt
            .query_map(params![after, page.limit as i64], |r| {
                Ok(ScopeRecord {
                    id: r.get(0)?,
                    generation: r.get(1)?,
                    parent: r.get(2)?,
                    enabled: r.get(3)?,
                    removed_in: r.get(4)?,
                })
            })
            .map_err(sqlite_error)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sqlite_error)
    }
}
