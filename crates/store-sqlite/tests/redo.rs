//! Writes held in the redo log: answered before their commit, never lost to `kill -9`, never
//! applied twice, and seen by the next read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use conduit_core::NewEvent;
use conduit_store::testing::event;
use conduit_store::{Store, StoreError, Tx};
use conduit_store_sqlite::SqliteStore;

/// Long enough that only a read or closing the store commits what the log holds.
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

/// A store that holds its records ([`holding`]) in a temp dir of its own: the dir, the store's
/// path and the store.
fn held_in_a_temp_dir() -> (tempfile::TempDir, PathBuf, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = holding(&path);
    (dir, path, store)
}

/// In the child: a state change and a record, a read (which commits them), then another state
/// change and two records; prints the last three's sequences and waits to be killed.
fn child_records_then_waits(path: &Path) -> ! {
    let store = holding(path);
    let store: &dyn Store = &store;
    store.write(|tx| tx.insert_event(charged("state"))).unwrap();
    store.record(|tx| tx.insert_event(charged("r1"))).unwrap();
    let read = store.read(|tx| tx.get_event("r1")).unwrap();
    assert!(read.is_some(), "a read sees the record");
    let changed = store.write(|tx| tx.insert_event(charged("w2"))).unwrap();
    let held: Vec<i64> = ["r2", "r3"]
        .iter()
        .map(|id| store.record(|tx| tx.insert_event(charged(id))).unwrap().sequence)
        .collect();
    println!("recorded {} {} {}", changed.sequence, held[0], held[1]);
    std::thread::sleep(Duration::from_secs(60));
    std::process::exit(1)
}

/// Runs the child, kills it with SIGKILL once it has recorded, and answers the sequences it printed.
fn killed_after_recording(path: &Path) -> Vec<i64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "writes_held_in_the_redo_log_survive_kill_9_and_are_applied_once",
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
        .query_row("SELECT COALESCE(SUM(stored_bytes), 0) FROM work_usage", [], |r| {
            r.get(0)
        })
        .unwrap();
    (events, charged)
}

#[test]
fn writes_held_in_the_redo_log_survive_kill_9_and_are_applied_once() {
    if let Some(path) = std::env::var_os(CHILD) {
        child_records_then_waits(Path::new(&path));
    }
    let (dir, control) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = dir.path().join("store.db");
    let sequences = killed_after_recording(&path);
    let (before, charged_before) = committed_rows(&path);
    let ids: Vec<&str> = before.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["state", "r1"], "w2, r2 and r3 were answered but never committed");
    drop(SqliteStore::open(&path).unwrap());
    let (after, charged_after) = committed_rows(&path);
    let answered = [before[0].1, before[1].1, sequences[0], sequences[1], sequences[2]];
    let expected: Vec<(String, i64)> = ["state", "r1", "w2", "r2", "r3"]
        .iter()
        .zip(answered)
        .map(|(id, sequence)| (id.to_string(), sequence))
        .collect();
    assert_eq!(
        after, expected,
        "each change once, with the sequence it was answered with"
    );
    assert_eq!(
        charged_after,
        charged_before / 2 * 5,
        "each of the five events charged once"
    );

    // Negative control: without the redo log, what it held is lost.
    let path = control.path().join("store.db");
    killed_after_recording(&path);
    std::fs::write(control.path().join("store.db-redo"), b"").unwrap();
    drop(SqliteStore::open(&path).unwrap());
    let ids: Vec<String> = committed_rows(&path).0.into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["state", "r1"]);
}

#[test]
fn a_read_sees_a_record_held_for_a_commit() {
    let (_dir, path, store) = held_in_a_temp_dir();
    let store: &dyn Store = &store;
    store.record(|tx| tx.insert_event(charged("held"))).unwrap();
    assert!(committed_rows(&path).0.is_empty(), "the record is held, not committed");
    assert!(store.read(|tx| tx.get_event("held")).unwrap().is_some());
    assert_eq!(committed_rows(&path).0.len(), 1, "the read committed it");
}

#[test]
fn a_read_of_state_sees_what_is_held_and_commits_nothing() {
    let (_dir, path, store) = held_in_a_temp_dir();
    let store: &dyn Store = &store;
    store.write(|tx| tx.insert_event(charged("change"))).unwrap();
    store.record(|tx| tx.insert_event(charged("held"))).unwrap();
    for id in ["change", "held"] {
        assert!(store.read_state(|tx| tx.get_event(id)).unwrap().is_some(), "{id}");
    }
    assert!(committed_rows(&path).0.is_empty(), "still held, not committed");
    // The control: a read on another connection commits them first.
    assert!(store.read(|tx| tx.get_event("held")).unwrap().is_some());
    assert_eq!(committed_rows(&path).0.len(), 2);
}

#[test]
fn a_read_or_a_write_that_holds_nothing_leaves_no_transaction_open() {
    let (_dir, path, owned) = held_in_a_temp_dir();
    let store: &dyn Store = &owned;
    let other = rusqlite::Connection::open(&path).unwrap();
    other.busy_timeout(Duration::ZERO).unwrap();
    let can_write = || {
        let began = other.execute_batch("BEGIN IMMEDIATE").is_ok();
        let _ = other.execute_batch("ROLLBACK");
        began
    };
    assert!(store.read_state(|tx| tx.get_event("none")).unwrap().is_none());
    assert!(can_write(), "the read's transaction was ended");
    store.write(|tx| tx.get_event("none")).unwrap();
    assert!(can_write(), "so was the transaction of a write that changed nothing");
    // The control: a write that changed something is held in its transaction, open until a commit.
    store.write(|tx| tx.insert_event(charged("held"))).unwrap();
    assert!(!can_write());
    assert!(store.read_state(|tx| tx.get_event("held")).unwrap().is_some());
    assert!(!can_write(), "a read of state does not end what it did not open");
}

#[test]
fn a_read_of_state_that_writes_is_refused_and_keeps_nothing_it_wrote() {
    let (_dir, path, owned) = held_in_a_temp_dir();
    let store: &dyn Store = &owned;
    store.write(|tx| tx.insert_event(charged("before"))).unwrap();
    let wrote = store.read_state(|tx| tx.insert_event(charged("sneaked")));
    assert!(wrote.is_err(), "a read of state may not write");
    assert!(store.read(|tx| tx.get_event("sneaked")).unwrap().is_none());
    assert!(
        store.read(|tx| tx.get_event("before")).unwrap().is_some(),
        "what was held before is applied again"
    );
    drop(owned);
    let reopened: &dyn Store = &SqliteStore::open(&path).unwrap();
    assert!(reopened.read(|tx| tx.get_event("sneaked")).unwrap().is_none());
}

#[test]
fn a_state_change_is_answered_from_the_synced_log_and_committed_when_read() {
    let (dir, path, store) = held_in_a_temp_dir();
    let store: &dyn Store = &store;
    let log = dir.path().join("store.db-redo");
    let opened = std::fs::read(&log).unwrap();
    assert!(
        opened.len() >= 4 << 20 && opened.iter().all(|b| *b == 0),
        "written with zeros at its open"
    );
    store
        .write(|tx: &mut dyn Tx| tx.insert_event(charged("change")))
        .unwrap();
    assert!(committed_rows(&path).0.is_empty(), "answered before its commit");
    let logged = std::fs::read(&log).unwrap();
    assert_eq!(
        logged.len(),
        opened.len(),
        "written over its zeros, not appended: its size stays"
    );
    assert!(logged[..4] != [0; 4], "the log holds it");
    assert!(store.read(|tx| tx.get_event("change")).unwrap().is_some());
    assert_eq!(committed_rows(&path).0.len(), 1, "the read committed it");
}

#[test]
fn a_second_process_cannot_open_a_store_whose_log_is_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let first = SqliteStore::open(&path).unwrap();
    // The same process stands in for a second one: the lock is on the log's open file.
    let second = SqliteStore::open(&path).err().expect("refused while the first is open");
    assert!(second.to_string().contains("open in another process"), "{second}");
    drop(first);
    assert!(
        SqliteStore::open(&path).is_ok(),
        "negative control: once closed, it opens"
    );
}

#[test]
fn a_log_written_for_another_store_is_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let killed = dir.path().join("killed");
    std::fs::create_dir(&killed).unwrap();
    killed_after_recording(&killed.join("store.db"));
    drop(SqliteStore::open(&path).unwrap());
    // The other store's log beside this one, as a restored backup would find it.
    let log = std::fs::read(killed.join("store.db-redo")).unwrap();
    assert!(
        log[..4] != [0; 4],
        "the killed store's log holds what it was not committed"
    );
    std::fs::write(dir.path().join("store.db-redo"), &log).unwrap();
    drop(SqliteStore::open(&path).unwrap());
    assert!(committed_rows(&path).0.is_empty(), "none of it applied here");
    // Negative control: beside its own store, the same log is applied.
    drop(SqliteStore::open(&killed.join("store.db")).unwrap());
    assert_eq!(committed_rows(&killed.join("store.db")).0.len(), 5);
}

#[test]
fn the_log_is_never_opened_through_a_link_nor_when_others_may_read_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let log = dir.path().join("store.db-redo");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, b"").unwrap();
    // Owner-only, so only not following the link refuses it.
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &log).unwrap();
    assert!(SqliteStore::open(&path).is_err(), "a link in the log's place");
    std::fs::remove_file(&log).unwrap();
    std::fs::write(&log, b"").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(SqliteStore::open(&path).is_err(), "a log others may read");
    // Negative control: owner-only, it opens.
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(SqliteStore::open(&path).is_ok());
}

#[test]
fn a_log_beside_a_store_from_before_the_log_is_refused_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    conduit_store_sqlite::create_at_schema_version(&path, 24).unwrap();
    // Anything at all in the log's place: such a store never wrote one.
    let log = dir.path().join("store.db-redo");
    std::fs::write(&log, b"forged").unwrap();
    std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let refused = SqliteStore::open(&path).err().expect("refused");
    assert!(
        refused.to_string().contains("does not apply to this store"),
        "{refused}"
    );
    // Negative control: without it, the store opens and migrates.
    std::fs::write(&log, b"").unwrap();
    assert!(SqliteStore::open(&path).is_ok());
}

/// A transaction commits once it holds 1,024 members, or 4 MiB of their statements (which memory
/// holds too, until the commit), whichever comes first, even when nothing else commits it.
#[test]
fn a_transaction_commits_at_its_member_count_or_its_held_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let record = |store: &SqliteStore, id: String, data: serde_json::Value| {
        let store: &dyn Store = store;
        let new = NewEvent { data, ..event(&id) };
        store.record(|tx| tx.insert_event(new)).unwrap();
    };
    let small = holding(&dir.path().join("small.db"));
    for i in 0..1023 {
        record(&small, format!("s{i}"), serde_json::Value::Null);
    }
    assert_eq!(small.commits_made(), 0, "1,023 members are held");
    record(&small, "s1023".into(), serde_json::Value::Null);
    assert_eq!(small.commits_made(), 1, "the 1,024th commits them");

    // 600 KiB a member: a guarded member's savepoint journal would stay within its 1 MiB in memory (the temp
    // directory a spill would use is the first store's of this process, another test's).
    let large = holding(&dir.path().join("large.db"));
    let data = serde_json::Value::String("x".repeat(600 * 1024));
    for i in 0..6 {
        record(&large, format!("l{i}"), data.clone());
    }
    assert_eq!(large.commits_made(), 0, "3.5 MiB of statements are held");
    record(&large, "l6".into(), data.clone());
    assert_eq!(large.commits_made(), 1, "past 4 MiB they are committed");
    record(&large, "l7".into(), data);
    assert_eq!(large.commits_made(), 1, "the next transaction counts its own bytes");
}

/// A member runs straight in the open transaction. One that fails having changed nothing leaves it
/// as it was; one that fails after writing takes it with it, and the next transaction applies the
/// others' entries again, so only its own rows are lost. The members after it run inside
/// savepoints: another failure takes back only its own rows, and nothing is applied again, until
/// the stretch runs out.
#[test]
fn a_member_that_fails_after_writing_loses_only_its_own_rows_and_guards_the_next() {
    let (_dir, path, sqlite) = held_in_a_temp_dir();
    let store: &dyn Store = &sqlite;
    let refused = || StoreError::Backend("refused".into());
    let fails_after_writing = |id: &str| {
        let failed = store.write(|tx| -> Result<(), StoreError> {
            tx.insert_event(charged(id))?;
            Err(refused())
        });
        assert!(failed.is_err(), "{id} failed");
    };
    store.record(|tx| tx.insert_event(charged("r1"))).unwrap();
    store.write(|tx| tx.insert_event(charged("w1"))).unwrap();
    assert!(store.write(|_| -> Result<(), StoreError> { Err(refused()) }).is_err());
    assert_eq!(
        sqlite.rollbacks_made(),
        0,
        "a failure that wrote nothing keeps the transaction"
    );

    fails_after_writing("lost1");
    assert_eq!(
        sqlite.rollbacks_made(),
        1,
        "a failure after writing takes the transaction"
    );
    store.write(|tx| tx.insert_event(charged("w2"))).unwrap();
    fails_after_writing("lost2");
    assert_eq!(
        sqlite.rollbacks_made(),
        1,
        "the next failure takes back only its own rows"
    );

    let seen = |id: &str| store.read_state(|tx| tx.get_event(id)).unwrap().is_some();
    assert!(
        ["r1", "w1", "w2"].iter().all(|id| seen(id)),
        "the others' rows are held"
    );
    assert!(!seen("lost1") && !seen("lost2"));
    assert!(committed_rows(&path).0.is_empty(), "held, not committed");

    // The stretch (16,384 members from the last failure) runs out: the member after it runs in
    // place again, and its failure takes the transaction.
    let stretch: Vec<String> = (0..16 * 1024).map(|i| format!("g{i}")).collect();
    for id in &stretch {
        store.record(|tx| tx.insert_event(event(id))).unwrap();
    }
    fails_after_writing("lost3");
    assert_eq!(sqlite.rollbacks_made(), 2, "past the stretch, a failure takes it again");
    assert!(!seen("lost3") && seen("g16383"));
    drop(sqlite);
    drop(SqliteStore::open(&path).unwrap());
    let ids: Vec<String> = committed_rows(&path).0.into_iter().map(|(id, _)| id).collect();
    let answered: Vec<String> = ["r1", "w1", "w2"]
        .map(String::from)
        .into_iter()
        .chain(stretch)
        .collect();
    assert_eq!(ids, answered, "what was answered is what a reopened store has");
}

/// A store a newer release migrated is refused before its redo log is read, so a release that
/// could not read that log's entries never empties it (schema version 27 is such a fence: its
/// entries are checked with XXH3, which version 26 would read as torn).
#[test]
fn a_store_a_newer_release_migrated_is_refused_and_its_log_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let supported: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    // An entry this release cannot read, as an older one cannot read a newer one's.
    let log = dir.path().join("store.db-redo");
    std::fs::write(&log, [0xff; 64]).unwrap();
    conn.pragma_update(None, "user_version", supported + 1).unwrap();
    let refused = SqliteStore::open(&path).err().expect("refused");
    assert!(refused.to_string().contains("newer"), "{refused}");
    assert_eq!(std::fs::read(&log).unwrap(), [0xff; 64], "the log is left as it was");
    // Negative control: at the version this release knows, the log is read, and what it could not
    // read is gone.
    conn.pragma_update(None, "user_version", supported).unwrap();
    drop(SqliteStore::open(&path).unwrap());
    assert_ne!(std::fs::read(&log).unwrap(), [0xff; 64]);
}
