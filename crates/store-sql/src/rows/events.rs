//! Accepted events and the causal pins of their roots: the statements and row mapping of [`EventRows`].

use crate::{args, Row};
use conduit_core::{quota, CausalPin, Causation, Event, NewEvent, NewRecord, Source, Timestamp};
use conduit_store::{EventFilter, EventRows, Page};

use super::{corrupt, from_json, matching, to_json, SqlTx};
use crate::Result;

/// The latest chain ordinal of root `?1`: each causal event (any but the toolbelt's call records) is
/// numbered in its root's chain as it is stored, so the per-minute bound is one index seek.
macro_rules! latest_chain_ordinal {
    () => {
        "SELECT MAX(chain_ordinal) FROM events WHERE root_id = ?1 AND chain_ordinal IS NOT NULL"
    };
}

pub const INSERT_EVENT: &str = concat!(
    "INSERT INTO events (root_id, id, type, source, scope, work_id, execution_id, correlation_key, parent_id,
         depth, actor, data, accepted_at, delivery_id, chain_ordinal)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
         CASE WHEN ?4 = 'core.toolbelt' THEN NULL ELSE COALESCE((",
    latest_chain_ordinal!(),
    "), 0) + 1 END)"
);

pub const CAUSAL_TIME_BACK: &str = concat!(
    "SELECT accepted_at FROM events WHERE root_id = ?1 AND chain_ordinal = (",
    latest_chain_ordinal!(),
    ") - ?2 + 1"
);

/// A root's pin and [`CAUSAL_TIME_BACK`] for its `per_minute`, in one statement: every causal event
/// reads both.
pub const CAUSAL_BOUNDS: &str = concat!(
    "SELECT p.max_depth, p.per_minute, (SELECT accepted_at FROM events WHERE root_id = ?1 AND chain_ordinal = (",
    latest_chain_ordinal!(),
    ") - p.per_minute + 1) FROM causal_pins p WHERE p.root_id = ?1"
);

pub(super) const EVENT_COLUMNS: &str =
    "sequence, id, type, source, scope, work_id, execution_id, correlation_key, parent_id, \
     root_id, depth, actor, data, accepted_at";

pub(super) fn event_row(r: &dyn Row) -> Result<Event> {
    let source: String = r.get(3)?;
    let data: String = r.get(12)?;
    let build = || -> Result<Event> {
        Ok(Event {
            sequence: r.get(0)?,
            id: r.get(1)?,
            event_type: r.get(2)?,
            source: Source::from_wire(&source).ok_or_else(|| corrupt("event source"))?,
            scope: r.get(4)?,
            work_id: r.get(5)?,
            execution_id: r.get(6)?,
            correlation_key: r.get(7)?,
            causation: Causation {
                parent: r.get(8)?,
                root: r.get(9)?,
                depth: r.get(10)?,
            },
            actor: r.get(11)?,
            data: from_json(&data)?,
            accepted_at: Timestamp(r.get(13)?),
        })
    };
    build()
}

/// A page of the events `filter` picks: `?1` the Work, `?5` the type and `?6` the earliest
/// acceptance time (each matched only when the filter gives it), `?2`..`?4` the page.
pub fn page_events_sql(filter: &EventFilter) -> String {
    page_sql(EVENT_COLUMNS, filter)
}

/// The sequences alone of the page [`page_events_sql`] reads.
pub fn page_event_sequences_sql(filter: &EventFilter) -> String {
    page_sql("sequence", filter)
}

fn page_sql(columns: &str, filter: &EventFilter) -> String {
    let of_work = matching("work_id", "=", 1, filter.work.is_some());
    let of_type = matching("type", "=", 5, filter.event_type.is_some());
    let since = if filter.since.is_some() {
        "accepted_at >= ?6"
    } else {
        "CAST(?6 AS BIGINT) IS NULL"
    };
    format!(
        "SELECT {columns} FROM events WHERE {of_work} AND {of_type} AND {since} \
         AND sequence > ?2 AND sequence <= ?3 ORDER BY sequence LIMIT CAST(?4 AS BIGINT)"
    )
}

impl SqlTx<'_> {
    /// Runs a page statement built by [`page_sql`] with the filter's and the page's arguments.
    fn page_rows<T>(
        &mut self,
        sql: &str,
        filter: &EventFilter,
        page: &Page<i64>,
        map: impl FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let (after, since, limit) = (page.after.unwrap_or(0), filter.since.map(|t| t.0), page.limit as i64);
        let params = args![filter.work, after, page.upper, limit, filter.event_type, since];
        self.query_all(sql, params, map)
    }
}

/// One row of `events`, its data JSON text already.
struct EventRow<'a> {
    id: &'a str,
    event_type: &'a str,
    source: &'a str,
    scope: &'a str,
    work_id: Option<&'a str>,
    execution_id: Option<&'a str>,
    correlation_key: Option<&'a str>,
    causation: &'a Causation,
    actor: Option<&'a str>,
    data: &'a str,
    accepted_at: Timestamp,
    delivery_id: Option<&'a str>,
}

impl SqlTx<'_> {
    /// Inserts `e`, charging its data to its Work; answers its acceptance sequence.
    fn insert_row(&mut self, e: &EventRow<'_>) -> Result<i64> {
        if let Some(work) = e.work_id {
            self.charge_work(work, quota::charge(e.data.len()));
        }
        self.sql.insert_keyed(
            INSERT_EVENT,
            "sequence",
            args![
                e.causation.root,
                e.id,
                e.event_type,
                e.source,
                e.scope,
                e.work_id,
                e.execution_id,
                e.correlation_key,
                e.causation.parent,
                e.causation.depth,
                e.actor,
                e.data,
                e.accepted_at.0,
                e.delivery_id
            ],
        )
    }
}

impl EventRows for SqlTx<'_> {
    fn insert_event(&mut self, e: NewEvent) -> Result<Event> {
        let data = to_json(&e.data)?;
        let source = e.source.to_wire();
        let sequence = self.insert_row(&EventRow {
            id: &e.id,
            event_type: &e.event_type,
            source: &source,
            scope: &e.scope,
            work_id: e.work_id.as_deref(),
            execution_id: e.execution_id.as_deref(),
            correlation_key: e.correlation_key.as_deref(),
            causation: &e.causation,
            actor: e.actor.as_deref().filter(|_| e.source.keeps_actor()),
            data: &data,
            accepted_at: e.accepted_at,
            delivery_id: e.delivery_id.as_deref(),
        })?;
        Ok(e.into_event(sequence))
    }

    fn insert_record(&mut self, r: &NewRecord<'_>) -> Result<i64> {
        self.insert_row(&EventRow {
            id: r.id,
            event_type: r.event_type,
            source: &Source::Toolbelt.to_wire(),
            scope: r.scope,
            work_id: Some(r.work_id),
            execution_id: Some(r.execution_id),
            correlation_key: None,
            causation: r.causation,
            actor: None,
            data: r.data,
            accepted_at: r.accepted_at,
            delivery_id: None,
        })
    }

    fn get_event(&mut self, id: &str) -> Result<Option<Event>> {
        self.query_one(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ?1"),
            args![id],
            event_row,
        )
    }

    fn list_events(&mut self, work: Option<&str>, limit: usize) -> Result<Vec<Event>> {
        let of_work = matching("work_id", "=", 1, work.is_some());
        let sql =
            format!("SELECT {EVENT_COLUMNS} FROM events WHERE {of_work} ORDER BY sequence LIMIT CAST(?2 AS BIGINT)");
        self.query_all(&sql, args![work, limit as i64], event_row)
    }

    fn page_events(&mut self, filter: &EventFilter, page: &Page<i64>) -> Result<Vec<Event>> {
        self.page_rows(&page_events_sql(filter), filter, page, event_row)
    }

    fn page_event_sequences(&mut self, filter: &EventFilter, page: &Page<i64>) -> Result<Vec<i64>> {
        self.page_rows(&page_event_sequences_sql(filter), filter, page, |r| r.get(0))
    }

    fn events_between_for_keys(&mut self, after: i64, through: i64, keys: &[String]) -> Result<Vec<Event>> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE correlation_key = ?1 AND sequence > ?2 AND sequence <= ?3 \
             ORDER BY sequence"
        );
        let mut found = Vec::new();
        for key in keys {
            found.extend(self.query_all(&sql, args![key, after, through], event_row)?);
        }
        found.sort_by_key(|e| e.sequence);
        Ok(found)
    }

    fn max_sequence(&mut self) -> Result<i64> {
        let sql = "SELECT COALESCE(MAX(sequence), 0) FROM events";
        Ok(self.query_one(sql, &[], |r| r.get(0))?.unwrap_or(0))
    }

    fn event_by_delivery(&mut self, delivery_id: &str) -> Result<Option<Event>> {
        self.query_one(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE delivery_id = ?1"),
            args![delivery_id],
            event_row,
        )
    }

    fn causal_event_time_back(&mut self, root: &str, back: u32) -> Result<Option<Timestamp>> {
        Ok(self
            .query_one(CAUSAL_TIME_BACK, args![root, back], |r| r.get(0))?
            .map(Timestamp))
    }

    fn causal_bounds(&mut self, root: &str) -> Result<Option<(CausalPin, Option<Timestamp>)>> {
        self.query_one(CAUSAL_BOUNDS, args![root], |r| {
            let pin = CausalPin {
                max_depth: r.get(0)?,
                per_minute: r.get(1)?,
            };
            Ok((pin, r.get::<Option<i64>>(2)?.map(Timestamp)))
        })
    }

    fn insert_causal_pin(&mut self, root: &str, pin: CausalPin, at: Timestamp) -> Result<()> {
        self.exec(
            "INSERT INTO causal_pins (root_id, max_depth, per_minute, pinned_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
            args![root, pin.max_depth, pin.per_minute, at.0],
        )
        ?;
        Ok(())
    }
}
