//! Configuration generations and the scopes each published: the statements and row mapping of [`GenerationRows`].

use crate::args;
use conduit_core::Timestamp;
use conduit_store::{GenerationRows, Page, ScopeRecord};

use super::SqlTx;
use crate::Result;

impl GenerationRows for SqlTx<'_> {
    fn latest_generation(&mut self) -> Result<Option<(i64, String, String)>> {
        let sql = "SELECT generation, hash, config FROM config_generations ORDER BY generation DESC LIMIT 1";
        self.query_one(sql, &[], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    }

    fn latest_generation_number(&mut self) -> Result<Option<i64>> {
        let sql = "SELECT generation FROM config_generations ORDER BY generation DESC LIMIT 1";
        self.query_one(sql, &[], |r| r.get(0))
    }

    fn generation(&mut self, generation: i64) -> Result<Option<(String, String)>> {
        let sql = "SELECT hash, config FROM config_generations WHERE generation = ?1";
        self.query_one(sql, args![generation], |r| Ok((r.get(0)?, r.get(1)?)))
    }

    fn insert_generation(&mut self, generation: i64, hash: &str, config_json: &str, at: Timestamp) -> Result<()> {
        self.exec(
            "INSERT INTO config_generations (generation, hash, config, created_at) VALUES (?1, ?2, ?3, ?4)",
            args![generation, hash, config_json, at.0],
        )?;
        Ok(())
    }

    fn upsert_scope(&mut self, id: &str, generation: i64, parent: Option<&str>, enabled: bool) -> Result<()> {
        self.exec(
            "INSERT INTO scopes (id, generation, parent, enabled) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET generation = ?2, parent = ?3, enabled = ?4, removed_in = NULL",
            args![id, generation, parent, enabled],
        )?;
        Ok(())
    }

    fn tombstone_scopes(&mut self, kept: &[String], generation: i64) -> Result<()> {
        let live: Vec<String> = self.query_all("SELECT id FROM scopes WHERE removed_in IS NULL", &[], |r| r.get(0))?;
        for id in live.iter().filter(|id| !kept.contains(id)) {
            self.exec(
                "UPDATE scopes SET removed_in = ?2, enabled = 0 WHERE id = ?1",
                args![id, generation],
            )?;
        }
        Ok(())
    }

    fn page_scopes(&mut self, page: &Page<String>) -> Result<Vec<ScopeRecord>> {
        let after = page.after.clone().unwrap_or_default();
        self.query_all(
            "SELECT id, generation, parent, enabled, removed_in FROM scopes WHERE id > ?1 ORDER BY id LIMIT CAST(?2 AS BIGINT)",
            args![after, page.limit as i64],
            |r| {
                Ok(ScopeRecord {
                    id: r.get(0)?,
                    generation: r.get(1)?,
                    parent: r.get(2)?,
                    enabled: r.get(3)?,
                    removed_in: r.get(4)?,
                })
            },
        )
    }
}
