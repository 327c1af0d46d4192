//! Reads' records held in the redo log: answered before their commit, never lost to `kill -9`,
//! never applied twice, and seen by the next read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use conduit_core::NewEvent;
use conduit_store::testing::event;
use conduit_store::{Store, Tx};
use conduit_store_sqlite::SqliteStore;

/// Long enough that only a read, a state change or closing the store commits a record.
const NEVER: Duration = Duration::from_secs(600);
const CHILD: &str = "OPEN_CONDUIT_REDO_DRILL_STORE";

fn charged(id: &str) -> NewEvent {
    NewEvent {
        work_id: Some("w1".into()),
        ..event(id)
    }
}

fn holding(path: &Path) -> SqliteStore {
    SqliteStore::open_holding_records(path, NEVER).unwrap()
}

/// In the child: a committed state change, a record, a read (which commits it), two more records;
/// prints their sequences and waits to be killed.
fn child_records_then_waits(path: &Path) -> ! {
    let store = holding(path);
    let store: &dyn Store = &store;
    store.write(|tx| tx.insert_event(charged("state"))).unwrap();
    let first = store.record(|tx| tx.insert_event(charged("r1"))).unwrap();
    store
        .read(|tx| tx.get_event("r1"))
        .unwrap()
        .expect("a read sees the record");
    let held: Vec<i64> = ["r2", "r3"]
        .iter()
        .map(|id| store.record(|tx| tx.insert_event(charged(id))).unwrap().sequence)
        .collect();
    println!("recorded {} {} {}", first.sequence, held[0], held[1]);
    std::thread::sleep(Duration::from_secs(60));
    std::process::exit(1)
}

/// Runs the child, kills it with SIGKILL once it has recorded, and answers the sequences it printed.
fn killed_after_recording(path: &Path) -> Vec<i64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "records_held_in_the_redo_log_survive_kill_9_and_are_applied_once",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD, path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let recorded = lines
        // libtest's `test NAME ... ` comes first on the line.
        .find_map(|line| line.unwrap().split_once("recorded ").map(|(_, n)| n.to_owned()))
        .expect("the child recorded");
    child.kill().unwrap();
    child.wait().unwrap();
    recorded.split(' ').map(|n| n.parse().unwrap()).collect()
}

/// What the database file holds without the redo log: `(id, sequence)` of the events, and the
/// bytes charged to the Work.
fn committed_rows(path: &Path) -> (Vec<(String, i64)>, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT id, sequence FROM events ORDER BY sequence")
        .unwrap();
    let events = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let charged = conn
        .query_row(
            "SELECT COALESCE(SUM(stored_bytes), 0) FROM work_usage WHERE work_id = 'w1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (events, charged)
}

#[test]
fn records_held_in_the_redo_log_survive_kill_9_and_are_applied_once() {
    if let Some(path) = std::env::var_os(CHILD) {
        child_records_then_waits(Path::new(&path));
    }
    let (dir, control) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = dir.path().join("store.db");
    let sequences = killed_after_recording(&path);
    let (before, charged_before) = committed_rows(&path);
    let ids: Vec<&str> = before.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["state", "r1"], "r2 and r3 were answered but never committed");
    drop(SqliteStore::open(&path).unwrap());
    let (after, charged_after) = committed_rows(&path);
    let expected: Vec<(String, i64)> = ["state", "r1", "r2", "r3"]
        .iter()
        .zip([before[0].1, sequences[0], sequences[1], sequences[2]])
        .map(|(id, sequence)| (id.to_string(), sequence))
        .collect();
    assert_eq!(
        after, expected,
        "each record once, with the sequence it was answered with"
    );
    assert_eq!(
        charged_after,
        charged_before * 2,
        "each of the four events charged once"
    );

    // Negative control: without the redo log, the held records are lost.
    let path = control.path().join("store.db");
    killed_after_recording(&path);
    std::fs::write(control.path().join("store.db-redo"), b"").unwrap();
    drop(SqliteStore::open(&path).unwrap());
    let ids: Vec<String> = committed_rows(&path).0.into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["state", "r1"]);
}

#[test]
fn a_read_sees_a_record_held_for_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = holding(&path);
    let store: &dyn Store = &store;
    store.record(|tx| tx.insert_event(charged("held"))).unwrap();
    assert!(committed_rows(&path).0.is_empty(), "the record is held, not committed");
    assert!(store.read(|tx| tx.get_event("held")).unwrap().is_some());
    assert_eq!(committed_rows(&path).0.len(), 1, "the read committed it");
}

#[test]
fn a_state_change_commits_the_records_held_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = holding(&path);
    let store: &dyn Store = &store;
    store.record(|tx| tx.insert_event(charged("before"))).unwrap();
    store
        .write(|tx: &mut dyn Tx| tx.insert_event(charged("change")))
        .unwrap();
    let ids: Vec<String> = committed_rows(&path).0.into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["before", "change"]);
}
