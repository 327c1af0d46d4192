//! Waits a Work parks on: the statements and row mapping of [`WaitRows`].

use crate::{args, Row};
use conduit_core::{Timestamp, Wait, WaitState};
use conduit_store::{Page, WaitRows};

use super::{corrupt, from_json, oldest_first, oldest_first_params, to_json, SqlTx};
use crate::Result;

const WAIT_COLUMNS: &str =
    "id, work_id, execution_id, types, keys, watermark, timeout_at, state, satisfied_by, created_at";

fn wait_row(r: &dyn Row) -> Result<Wait> {
    let types: String = r.get(3)?;
    let keys: String = r.get(4)?;
    let state: String = r.get(7)?;
    let build = || -> Result<Wait> {
        Ok(Wait {
            id: r.get(0)?,
            work_id: r.get(1)?,
            execution_id: r.get(2)?,
            types: from_json(&types)?,
            keys: from_json(&keys)?,
            watermark: r.get(5)?,
            timeout_at: r.get::<Option<i64>>(6)?.map(Timestamp),
            state: WaitState::parse(&state).ok_or_else(|| corrupt("wait state"))?,
            satisfied_by: r.get(8)?,
            created_at: Timestamp(r.get(9)?),
        })
    };
    build()
}

impl WaitRows for SqlTx<'_> {
    fn insert_wait(&mut self, w: &Wait) -> Result<()> {
        self.exec(
            &format!("INSERT INTO waits ({WAIT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
            args![
                w.id,
                w.work_id,
                w.execution_id,
                to_json(&w.types)?,
                to_json(&w.keys)?,
                w.watermark,
                w.timeout_at.map(|t| t.0),
                w.state.as_str(),
                w.satisfied_by,
                w.created_at.0
            ],
        )?;
        self.subscribe(w)
    }

    fn resubscribe_wait(&mut self, w: &Wait) -> Result<()> {
        self.exec(
            "UPDATE waits SET keys = ?2 WHERE id = ?1",
            args![w.id, to_json(&w.keys)?],
        )?;
        self.subscribe(w)
    }

    fn armed_waits_for_key(&mut self, key: &str) -> Result<Vec<Wait>> {
        let sql = format!(
            "SELECT {WAIT_COLUMNS} FROM waits WHERE state = 'armed' \
             AND id IN (SELECT wait_id FROM wait_keys WHERE key = ?1) ORDER BY created_at, id"
        );
        self.query_all(&sql, args![key], wait_row)
    }

    fn armed_waits_of_work(&mut self, work_id: &str) -> Result<Vec<Wait>> {
        let sql =
            format!("SELECT {WAIT_COLUMNS} FROM waits WHERE work_id = ?1 AND state = 'armed' ORDER BY created_at, id");
        self.query_all(&sql, args![work_id], wait_row)
    }

    fn armed_waits_due(&mut self, now: Timestamp) -> Result<Vec<Wait>> {
        let sql = format!(
            "SELECT {WAIT_COLUMNS} FROM waits WHERE state = 'armed' AND timeout_at <= ?1 ORDER BY created_at, id"
        );
        self.query_all(&sql, args![now.0], wait_row)
    }

    fn page_waits(&mut self, work: Option<&str>, page: &Page<(i64, String)>) -> Result<Vec<Wait>> {
        let sql = format!(
            "SELECT {WAIT_COLUMNS} FROM waits WHERE (CAST(?1 AS TEXT) IS NULL OR work_id = ?1) AND {}",
            oldest_first("created_at", 2)
        );
        let (upper, at, id, limit) = oldest_first_params(page);
        self.query_all(&sql, args![work, upper, at, id, limit], wait_row)
    }

    fn update_wait(&mut self, w: &Wait) -> Result<()> {
        self.exec(
            "UPDATE waits SET state = ?2, satisfied_by = ?3 WHERE id = ?1",
            args![w.id, w.state.as_str(), w.satisfied_by],
        )?;
        if w.state != WaitState::Armed {
            // Only armed waits are found by key; each row goes by its primary key.
            for key in &w.keys {
                self.exec(
                    "DELETE FROM wait_keys WHERE key = ?1 AND wait_id = ?2",
                    args![key, w.id],
                )?;
            }
        }
        Ok(())
    }
}

impl SqlTx<'_> {
    /// Subscribes an armed wait on each of its keys (those it already has are kept).
    fn subscribe(&mut self, w: &Wait) -> Result<()> {
        for key in &w.keys {
            self.exec(
                "INSERT INTO wait_keys (key, wait_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                args![key, w.id],
            )?;
        }
        Ok(())
    }
}
