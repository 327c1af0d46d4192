//! Events already served, kept as the JSON a list answers them with.
//!
//! A committed event never changes: no statement updates or deletes one, and a committed sequence is
//! never given to another (SQLite gives a new row the rowid past the largest and no event is ever
//! deleted; PostgreSQL's is an identity column). Lists read committed rows only (a read transaction
//! on its own connection, after the writer committed what it held), so the bytes one list
//! serialized serve every later list that holds the event, on any daemon of a shared store, and a
//! page whose events are all kept costs the read of its sequences alone: no row decoded, no JSON
//! written. What is kept is bounded by its bytes; the oldest kept goes first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use conduit_core::Event;
use conduit_store::{EventFilter, Page, StoreError, Tx};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// The most JSON kept, in bytes: some 3,000 events of a few hundred bytes, many pages of the
/// recent log an operator follows, within the daemon's memory budget.
const KEPT_BYTES: usize = 1024 * 1024;

/// The JSON of events already served, by sequence; clones share it.
#[derive(Clone)]
pub struct KeptEvents {
    kept: Arc<Mutex<Kept>>,
    budget: usize,
}

struct Kept {
    by_sequence: HashMap<i64, Arc<RawValue>>,
    /// Kept sequences, the oldest kept first.
    order: VecDeque<i64>,
    /// The highest sequence ever kept (0 before any): a page past it holds nothing kept.
    newest: i64,
    bytes: usize,
}

/// An event as a list answers it: its JSON as written once, and its sequence (the list's key).
pub(crate) struct ServedEvent {
    pub(crate) sequence: i64,
    json: Arc<RawValue>,
}

impl Serialize for ServedEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl Default for KeptEvents {
    fn default() -> Self {
        KeptEvents::with_budget(KEPT_BYTES)
    }
}

impl KeptEvents {
    /// Keeps at most `budget` bytes of JSON.
    pub fn with_budget(budget: usize) -> KeptEvents {
        KeptEvents {
            kept: Arc::new(Mutex::new(Kept {
                by_sequence: HashMap::new(),
                order: VecDeque::new(),
                newest: 0,
                bytes: 0,
            })),
            budget,
        }
    }

    /// A page of events in `tx`: from what is kept when every event of it is, else read whole, and
    /// kept for the next. `tx` must be a read ([`conduit_store::Mode::Read`]), which sees committed
    /// rows only: a write's own transaction could see a row its rollback takes back, and a SQLite
    /// rowid taken back is given again.
    pub(crate) fn page(
        &self,
        tx: &mut dyn Tx,
        filter: &EventFilter,
        page: &Page<i64>,
    ) -> Result<Vec<ServedEvent>, StoreError> {
        if self.may_hold(page) {
            let sequences = tx.page_event_sequences(filter, page)?;
            if let Some(served) = self.all_kept(&sequences) {
                return Ok(served);
            }
        }
        let events = tx.page_events(filter, page)?;
        let served = events.iter().map(written).collect::<Result<Vec<_>, _>>()?;
        self.keep(&served);
        Ok(served)
    }

    /// Whether any event of `page` may be kept: not when the page starts past every sequence kept
    /// (a follower's next page, or any page when nothing is kept), which is then read whole at once.
    fn may_hold(&self, page: &Page<i64>) -> bool {
        page.after.unwrap_or(0) < self.lock().newest
    }

    /// Every one of `sequences`, when all are kept.
    fn all_kept(&self, sequences: &[i64]) -> Option<Vec<ServedEvent>> {
        let kept = self.lock();
        sequences
            .iter()
            .map(|&sequence| {
                let json = kept.by_sequence.get(&sequence)?.clone();
                Some(ServedEvent { sequence, json })
            })
            .collect()
    }

    fn keep(&self, served: &[ServedEvent]) {
        let mut kept = self.lock();
        for event in served {
            let size = event.json.get().len();
            if size > self.budget || kept.by_sequence.contains_key(&event.sequence) {
                continue;
            }
            while kept.bytes.saturating_add(size) > self.budget && !kept.order.is_empty() {
                kept.drop_oldest();
            }
            kept.by_sequence.insert(event.sequence, event.json.clone());
            kept.order.push_back(event.sequence);
            kept.newest = kept.newest.max(event.sequence);
            kept.bytes += size;
        }
    }

    /// A poisoned lock still holds whole entries: each is inserted or removed with its bytes.
    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Kept {
    fn drop_oldest(&mut self) {
        if let Some(json) = self.order.pop_front().and_then(|s| self.by_sequence.remove(&s)) {
            self.bytes -= json.get().len();
        }
    }
}

/// An event's JSON, written once.
fn written(event: &Event) -> Result<ServedEvent, StoreError> {
    Ok(ServedEvent {
        sequence: event.sequence,
        json: Arc::from(serde_json::value::to_raw_value(event)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::{Causation, NewEvent, Source, Timestamp};
    use conduit_store::Store;
    use serde_json::json;

    fn served(sequence: i64, size: usize) -> ServedEvent {
        let text = format!("\"{}\"", "x".repeat(size - 2));
        ServedEvent {
            sequence,
            json: Arc::from(RawValue::from_string(text).unwrap()),
        }
    }

    #[test]
    fn a_page_past_every_kept_sequence_is_known_to_hold_none() {
        let page = |after: Option<i64>| Page {
            after,
            upper: 100,
            limit: 10,
        };
        let kept = KeptEvents::with_budget(100);
        assert!(!kept.may_hold(&page(None)), "nothing kept");
        kept.keep(&[served(2, 10), served(3, 10)]);
        assert!(kept.may_hold(&page(None)));
        assert!(kept.may_hold(&page(Some(2))), "3 is past 2");
        assert!(!kept.may_hold(&page(Some(3))), "a follower's next page");
        let none = KeptEvents::with_budget(0);
        none.keep(&[served(4, 10)]);
        assert!(!none.may_hold(&page(None)), "a budget of 0 keeps nothing");
    }

    #[test]
    fn the_oldest_kept_goes_first_and_the_bytes_stay_within_the_budget() {
        let kept = KeptEvents::with_budget(100);
        kept.keep(&[served(1, 40), served(2, 40)]);
        kept.keep(&[served(3, 40)]);
        assert!(kept.all_kept(&[1]).is_none(), "the oldest went");
        assert_eq!(kept.all_kept(&[2, 3]).unwrap().len(), 2);
        assert_eq!(kept.lock().bytes, 80);
        // Kept again, an event is not counted twice.
        kept.keep(&[served(3, 40)]);
        assert_eq!(kept.lock().bytes, 80);
        // One larger than the whole budget is never kept, and evicts nothing.
        kept.keep(&[served(4, 101)]);
        assert!(kept.all_kept(&[4]).is_none());
        assert_eq!(kept.all_kept(&[2, 3]).unwrap().len(), 2);
    }

    /// A real store's page, through what is kept, written as the list writes its items.
    fn listed(kept: &KeptEvents, store: &dyn Store, upper: i64) -> String {
        let page = Page {
            after: None,
            upper,
            limit: 10,
        };
        let served = store.read(|tx| kept.page(tx, &EventFilter::default(), &page)).unwrap();
        serde_json::to_string(&served).unwrap()
    }

    #[test]
    fn a_kept_page_is_written_byte_for_byte_as_its_rows_and_never_hides_a_newer_event() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = conduit_store_sqlite::SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let store: &dyn Store = &sqlite;
        let insert = |id: &str| {
            let new = NewEvent {
                id: id.into(),
                event_type: "demo.listed".into(),
                source: Source::Execution("x1".into()),
                scope: "setup".into(),
                work_id: None,
                execution_id: Some("x1".into()),
                correlation_key: Some("k".into()),
                causation: Causation::root(id),
                actor: None,
                data: json!({"text": "quote \" and \u{1F600}, <tag>", "n": [1.5, -2]}),
                accepted_at: Timestamp(1_764_000_000_123),
                delivery_id: None,
            };
            store.write(|tx| tx.insert_event(new)).unwrap()
        };
        let (a, b) = (insert("a"), insert("b"));
        let rows = |upper| {
            let page = Page {
                after: None,
                upper,
                limit: 10,
            };
            let events = store.read(|tx| tx.page_events(&EventFilter::default(), &page)).unwrap();
            serde_json::to_string(&events).unwrap()
        };
        let kept = KeptEvents::default();
        assert_eq!(listed(&kept, store, b.sequence), rows(b.sequence), "read whole");
        assert_eq!(kept.lock().order, [a.sequence, b.sequence]);
        assert_eq!(listed(&kept, store, b.sequence), rows(b.sequence), "from what is kept");
        let c = insert("c");
        assert_eq!(
            listed(&kept, store, c.sequence),
            rows(c.sequence),
            "with the newer event"
        );
        assert_eq!(kept.lock().order, [a.sequence, b.sequence, c.sequence]);
        // The control: with no room, nothing is kept and every page is read whole.
        let none = KeptEvents::with_budget(0);
        assert_eq!(listed(&none, store, c.sequence), rows(c.sequence));
        assert!(none.lock().order.is_empty());
    }

    #[test]
    fn a_page_is_kept_only_when_every_event_of_it_is() {
        let kept = KeptEvents::with_budget(1000);
        kept.keep(&[served(1, 10)]);
        assert!(kept.all_kept(&[1, 2]).is_none());
        assert_eq!(kept.all_kept(&[]).unwrap().len(), 0);
    }
}
