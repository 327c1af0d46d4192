//! The SQLite store against a real file: migrations, round trips, ownership and durability.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_core::{Causation, NewEvent, Timestamp, Wait, WaitState};
use conduit_store::testing::{self, event, work};
use conduit_store::{new_id, Store, StoreError, Tx};
use conduit_store_sqlite::SqliteStore;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn open(dir: &tempfile::TempDir) -> Box<dyn Store> {
    Box::new(SqliteStore::open(&dir.path().join("store.db")).unwrap())
}

/// The cases every adapter passes, each on a fresh file: as the daemon opens it, and holding what
/// it writes until a read commits it (so a case sees one long transaction, as a busy daemon's
/// calls do).
#[test]
fn the_shared_store_cases_hold() {
    for case in testing::CASES {
        let dir = tempfile::tempdir().unwrap();
        case(&*open(&dir));
        let dir = tempfile::tempdir().unwrap();
        case(&SqliteStore::open_holding_records(&dir.path().join("store.db"), Duration::from_secs(3600)).unwrap());
    }
}

/// A lease the writer kept is not served past the end of its transaction: another connection
/// may change the store between two of the writer's transactions (here a revocation behind the
/// store's back, as a restored backup or a second tool might).
#[test]
fn a_kept_lease_does_not_outlive_its_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open_holding_records(&path, Duration::from_secs(3600)).unwrap();
    let store: &dyn Store = &store;
    store
        .write(|tx| {
            tx.insert_work(&work("w1", &[]))?;
            tx.insert_event(event("e1"))?;
            tx.insert_execution(&testing::execution("x1", "e1"))?;
            tx.insert_token(&testing::token(1, "x1"))
        })
        .unwrap();
    let lease = || store.write(|tx| tx.token_lease_by_digest(&[1; 32])).unwrap().unwrap();
    assert!(lease().token.revoked_at.is_none());
    assert!(lease().token.revoked_at.is_none(), "kept");
    // A read commits what the writer holds and ends its transaction.
    store.read(|tx| tx.get_event("e1")).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute("UPDATE tokens SET revoked_at = 60 WHERE id = 't1'", [])
        .unwrap();
    assert_eq!(
        lease().token.revoked_at,
        Some(Timestamp(60)),
        "read again in the next transaction"
    );
}

#[test]
fn committed_writes_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let id = new_id();
    {
        let store = open(&dir);
        store.write(|tx| tx.insert_event(event(&id))).unwrap();
    }
    let store = open(&dir);
    assert!(store.read(|tx| tx.get_event(&id)).unwrap().is_some());
}

#[test]
fn ids_are_time_ordered() {
    let a = new_id();
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert!(new_id() > a);
}

#[test]
fn removed_scopes_become_tombstones_and_a_returning_id_revives_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    store
        .write(|tx| {
            tx.upsert_scope("a", 1, None, true)?;
            tx.upsert_scope("b", 1, Some("a"), true)?;
            tx.tombstone_scopes(&["a".into(), "b".into()], 1)
        })
        .unwrap();
    store.write(|tx| tx.tombstone_scopes(&["a".into()], 2)).unwrap();
    let scopes = store.read(|tx| tx.page_scopes(&every())).unwrap();
    assert_eq!(
        (scopes[1].id.as_str(), scopes[1].removed_in, scopes[1].enabled),
        ("b", Some(2), false)
    );
    assert_eq!(scopes[0].removed_in, None);
    store.write(|tx| tx.upsert_scope("b", 3, None, true)).unwrap();
    let b = store.read(|tx| tx.page_scopes(&every())).unwrap().remove(1);
    assert_eq!((b.generation, b.removed_in, b.parent), (3, None, None));
}

/// A page of everything.
fn every() -> conduit_store::Page<String> {
    conduit_store::Page {
        after: None,
        upper: i64::MAX,
        limit: 1000,
    }
}

fn wait(id: &str, work: &str, keys: &[&str], timeout_at: Option<i64>) -> Wait {
    Wait {
        id: id.into(),
        work_id: work.into(),
        execution_id: "x1".into(),
        types: vec!["demo.*".into()],
        keys: keys.iter().map(|k| k.to_string()).collect(),
        watermark: 0,
        timeout_at: timeout_at.map(Timestamp),
        state: WaitState::Armed,
        satisfied_by: None,
        created_at: Timestamp(1),
    }
}

#[test]
fn armed_waits_are_found_by_key_by_work_and_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    store
        .write(|tx| {
            tx.insert_work(&work("work1", &[]))?;
            tx.insert_work(&work("work2", &[]))?;
            tx.insert_wait(&wait("w1", "work1", &["a", "b"], Some(100)))?;
            tx.insert_wait(&wait("w2", "work2", &["b"], None))
        })
        .unwrap();
    let ids = |waits: Vec<Wait>| waits.into_iter().map(|w| w.id).collect::<Vec<_>>();
    store
        .read(|tx| {
            assert_eq!(ids(tx.armed_waits_for_key("a")?), ["w1"]);
            assert_eq!(ids(tx.armed_waits_for_key("b")?), ["w1", "w2"]);
            assert!(tx.armed_waits_for_key("c")?.is_empty());
            assert_eq!(ids(tx.armed_waits_of_work("work2")?), ["w2"]);
            // A timer fires at its instant, not before.
            assert!(tx.armed_waits_due(Timestamp(99))?.is_empty());
            assert_eq!(ids(tx.armed_waits_due(Timestamp(100))?), ["w1"]);
            Ok::<_, StoreError>(())
        })
        .unwrap();
    store
        .write(|tx| {
            let mut satisfied = wait("w1", "work1", &["a", "b"], Some(100));
            satisfied.state = WaitState::Satisfied;
            tx.update_wait(&satisfied)
        })
        .unwrap();
    store
        .read(|tx| {
            assert!(tx.armed_waits_for_key("a")?.is_empty());
            assert_eq!(ids(tx.armed_waits_for_key("b")?), ["w2"]);
            assert!(tx.armed_waits_due(Timestamp(100))?.is_empty());
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

#[test]
fn the_key_index_migration_indexes_waits_armed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        // A store as the release before the key index left it: schema version 12, one armed wait.
        let store = SqliteStore::open(&path).unwrap();
        let store: &dyn Store = &store;
        store
            .write(|tx| {
                tx.insert_work(&work("work1", &[]))?;
                tx.insert_wait(&wait("w1", "work1", &["a"], None))
            })
            .unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    // Undo migrations 13 (the key index), 14 (who revoked an operator), 15 (audit by time), 16
    // (what each Work wrote), 17 (retry counts and backoff), 18 (agent sessions), 21 (shared keys),
    // 22 (operators' actions), 23 (Work's grants), 24 (approvals' input) and 25 (the redo mark) by
    // hand; 19 and 20 rebuild what they change, so they run again over their own result, and 28
    // drops the audit index by Work that 15 and 19 make again.
    conn.execute_batch(
        "DROP TABLE wait_keys; DROP INDEX waits_by_work; ALTER TABLE operators DROP COLUMN revoked_by; \
         DROP TABLE work_usage; \
         ALTER TABLE work DROP COLUMN failed_attempts; ALTER TABLE work DROP COLUMN not_before; \
         ALTER TABLE executions DROP COLUMN agent_session; ALTER TABLE executions DROP COLUMN agent_usage; \
         DROP TABLE shared_keys; DROP TABLE operator_actions; ALTER TABLE work DROP COLUMN grants; \
         ALTER TABLE approvals DROP COLUMN input; DROP TABLE redo_applied; \
         PRAGMA user_version = 12;",
    )
    .unwrap();
    drop(conn);
    let store = open(&dir);
    let found = store.read(|tx| tx.armed_waits_for_key("a")).unwrap();
    assert_eq!(found.len(), 1);
}

#[test]
fn a_works_events_and_replay_records_are_charged_to_it_as_written() {
    use conduit_core::{quota, Execution, RequestRecord};
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let data = json!({"a": [1, 2]});
    let response = json!({"operation": "emit", "output": {"id": "e9"}});
    let execution = Execution {
        work_id: "work1".into(),
        ..testing::execution("x1", "e0")
    };
    let stored = store
        .write(|tx| {
            tx.insert_work(&work("work1", &[]))?;
            tx.insert_work(&work("work2", &[]))?;
            tx.insert_execution(&execution)?;
            tx.insert_event(NewEvent {
                work_id: Some("work1".into()),
                ..event("e1")
            })?;
            tx.insert_event(event("e2"))?;
            tx.insert_request(&RequestRecord {
                execution_id: "x1".into(),
                operation: "emit".into(),
                request_id: "r1".into(),
                body_hash: "h".into(),
                status: 200,
                response: response.clone(),
                created_at: Timestamp(2),
            })?;
            Ok::<_, StoreError>((tx.work_stored_bytes("work1")?, tx.work_stored_bytes("work2")?))
        })
        .unwrap();
    let text = |v: &serde_json::Value| v.to_string().len();
    assert_eq!(stored, (quota::charge(text(&data)) + quota::charge(text(&response)), 0));
    // What the transaction charged as it went is what it committed.
    let committed = store.read(|tx| tx.work_stored_bytes("work1")).unwrap();
    assert_eq!(committed, stored.0);
}

/// Runs `writers` write transactions at once, each inserting its own event, holding the writer a
/// moment so the rest queue behind it and join its batch; writer `i` then ends as `end(i)` says.
fn write_together(store: &Arc<dyn Store>, writers: usize, end: fn(usize) -> Result<(), StoreError>) -> Vec<bool> {
    let start = Arc::new(std::sync::Barrier::new(writers));
    let threads: Vec<_> = (0..writers)
        .map(|i| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                store
                    .write(|tx: &mut dyn Tx| {
                        tx.insert_event(event(&format!("batched-{i}")))?;
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        end(i)
                    })
                    .is_ok()
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap_or(false)).collect()
}

fn stored(store: &Arc<dyn Store>, id: &str) -> bool {
    store.read(|tx| tx.get_event(id)).unwrap().is_some()
}

#[test]
fn writers_that_share_a_commit_keep_their_own_work_and_lose_only_their_own_failure() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
    let store: Arc<dyn Store> = sqlite.clone();
    let before = sqlite.commits_made();
    let odd_fails = |i: usize| {
        if i % 2 == 1 {
            Err(StoreError::RolledBack)
        } else {
            Ok(())
        }
    };
    let answered = write_together(&store, 16, odd_fails);
    let commits = sqlite.commits_made() - before;
    assert!(
        commits < 8,
        "8 successful writers queued together shared commits: {commits}"
    );
    for (i, ok) in answered.iter().enumerate() {
        assert_eq!(*ok, i % 2 == 0, "writer {i} answered {ok}");
        assert_eq!(
            stored(&store, &format!("batched-{i}")),
            i % 2 == 0,
            "writer {i}'s event"
        );
    }
    // What was answered is what a reopened store has.
    drop((store, sqlite));
    let reopened: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
    assert!((0..16).step_by(2).all(|i| stored(&reopened, &format!("batched-{i}"))));
}

#[test]
fn a_writer_that_panics_inside_a_shared_commit_loses_only_its_own_work() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
    let third_panics = |i: usize| if i == 3 { panic!("a body panics") } else { Ok(()) };
    let answered = write_together(&store, 8, third_panics);
    for (i, ok) in answered.iter().enumerate() {
        assert_eq!(*ok, i != 3, "writer {i}");
        assert_eq!(stored(&store, &format!("batched-{i}")), i != 3, "writer {i}'s event");
    }
    store.write(|tx| tx.insert_event(event("after"))).unwrap();
    assert!(stored(&store, "after"), "the store is usable after the panic");
}

#[test]
fn a_read_never_sees_a_write_that_has_not_been_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
    let (asked, answered) = (std::sync::mpsc::channel(), std::sync::mpsc::channel());
    let reader = {
        let store = store.clone();
        let (asked, answered_tx) = (asked.1, answered.0);
        std::thread::spawn(move || {
            asked.recv().unwrap();
            answered_tx.send(stored(&store, "pending")).unwrap();
        })
    };
    // While the write is still inside its transaction, another thread reads: on its own connection,
    // without waiting for the writer, and without seeing the write.
    let seen_inside = store
        .write(|tx: &mut dyn Tx| {
            tx.insert_event(event("pending"))?;
            asked.0.send(()).unwrap();
            Ok::<_, StoreError>(answered.1.recv_timeout(std::time::Duration::from_secs(10)))
        })
        .unwrap();
    reader.join().unwrap();
    assert_eq!(
        seen_inside,
        Ok(false),
        "the read ran beside the open write and saw none of it"
    );
    assert!(stored(&store, "pending"), "once committed, it is seen");
}

#[test]
fn a_record_is_committed_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
    store.record(|tx| tx.insert_event(event("noted"))).unwrap();
    assert!(stored(&store, "noted"));
    drop(store);
    let reopened: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
    assert!(stored(&reopened, "noted"), "a closed store kept it");
}

#[test]
fn the_narrower_call_records_keep_every_event_and_audit_record_of_an_older_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // A store as release 18 left it, with events (one with a delivery identity) and audit records.
    conduit_store_sqlite::create_at_schema_version(&path, 18).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "INSERT INTO events (id, type, source, scope, work_id, correlation_key, root_id, depth, data, delivery_id,
             accepted_at) VALUES
             ('e1', 'demo.a', 'core.manual', 'setup', NULL, 'k', 'e1', 0, '{}', NULL, 1),
             ('e2', 'demo.b', 'core.manual', 'setup', 'w1', NULL, 'e1', 1, '{\"n\":2}', 'd1', 2);
         INSERT INTO toolbelt_audit (id, kind, operation, execution_id, work_id, result, input_hash, duration_ms, at)
             VALUES ('a1', 'toolbelt.called', 'emit', 'x1', 'w1', 'ok', 'h', 0, 3);",
    )
    .unwrap();
    drop(conn);
    let store = open(&dir);
    let kept = store.read(|tx| tx.list_events(None, 10)).unwrap();
    let ids: Vec<_> = kept.iter().map(|e| (e.sequence, e.id.as_str())).collect();
    assert_eq!(ids, [(1, "e1"), (2, "e2")]);
    assert_eq!(store.read(|tx| tx.list_events(Some("w1"), 10)).unwrap().len(), 1);
    assert_eq!(store.read(|tx| tx.event_by_delivery("d1")).unwrap().unwrap().id, "e2");
    assert_eq!(store.read(|tx| tx.list_audit(Some("x1"), 10)).unwrap().len(), 1);
    // Sequences go on from the last, and a delivery identity is still taken once.
    assert_eq!(store.write(|tx| tx.insert_event(event("e3"))).unwrap().sequence, 3);
    let again = NewEvent {
        delivery_id: Some("d1".into()),
        ..event("e4")
    };
    assert!(store.write(|tx| tx.insert_event(again)).is_err());
}

#[test]
fn chains_numbered_by_the_migration_go_on_from_their_last_causal_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // Root r's chain as release 19 left it: two causal events around a toolbelt call record, and
    // another root's event between them.
    conduit_store_sqlite::create_at_schema_version(&path, 19).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "INSERT INTO events (id, type, source, scope, root_id, depth, data, accepted_at) VALUES
             ('r', 'demo.a', 'core.manual', 'setup', 'r', 0, '{}', 10),
             ('t', 'agent.toolCalled', 'core.toolbelt', 'setup', 'r', 1, '{}', 20),
             ('o', 'demo.o', 'core.manual', 'setup', 'o', 0, '{}', 25),
             ('r2', 'demo.b', 'core.manual', 'setup', 'r', 1, '{}', 30);",
    )
    .unwrap();
    drop(conn);
    let store = open(&dir);
    let back = |n| store.read(|tx| tx.causal_event_time_back("r", n)).unwrap();
    assert_eq!(
        [back(1), back(2), back(3)],
        [Some(Timestamp(30)), Some(Timestamp(10)), None]
    );
    let next = NewEvent {
        causation: Causation::root("r"),
        accepted_at: Timestamp(40),
        ..event("r3")
    };
    store.write(|tx| tx.insert_event(next)).unwrap();
    assert_eq!([back(1), back(3)], [Some(Timestamp(40)), Some(Timestamp(10))]);
    assert_eq!(
        store.read(|tx| tx.causal_event_time_back("o", 1)).unwrap(),
        Some(Timestamp(25))
    );
}

#[test]
fn committed_pages_reach_the_database_file_without_a_call_paying_for_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = open(&dir);
    // The migrations' pages reach the file first; then the calls' pages do.
    let created = std::fs::read(&path).unwrap();
    changed_from(&path, &created);
    let before = std::fs::read(&path).unwrap();
    // Far fewer pages than the writer's own fallback checkpoint threshold.
    for i in 0..200 {
        store.write(|tx| tx.insert_event(event(&format!("e{i}")))).unwrap();
    }
    changed_from(&path, &before);
}

/// Waits (at most 20 s) until the database file no longer holds `content`: pages were copied into
/// it from the log.
fn changed_from(path: &std::path::Path, content: &[u8]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read(path).unwrap() == content {
        assert!(
            std::time::Instant::now() < deadline,
            "the log was never checkpointed into the database"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
