use super::check::sha256_check;
use super::repeats::REPEATS;
use super::*;
use conduit_store_sql::Arg;

fn statements(values: &[(&str, &[Arg<'_>])]) -> Statements {
    let mut s = Statements::default();
    for (sql, args) in values {
        s.push(sql, args);
    }
    s
}

fn decoded(bytes: &[u8], identity: &[u8]) -> Vec<(u64, Vec<u8>)> {
    Entries::new(bytes, identity).collect()
}

fn logged(entries: impl IntoIterator<Item = Statements>) -> Vec<u8> {
    logged_from(1, entries)
}

/// The log's bytes after `entries` are appended, numbered from `first`.
fn logged_from(first: u64, entries: impl IntoIterator<Item = Statements>) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&path, first, b"store");
    for entry in entries {
        log.append(&entry).unwrap();
    }
    std::fs::read(&path).unwrap()
}

/// A log in a new file at `path`, its next entry numbered `next`, checked with `identity`.
fn new_log(path: &std::path::Path, next: u64, identity: &[u8]) -> RedoLog {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap();
    RedoLog {
        file,
        len: 0,
        next,
        pending: Vec::new(),
        entry: Vec::new(),
        broken: false,
        known: HashMap::default(),
        identity: identity.to_vec(),
    }
}

/// Statements inserting the shared key `name`, one entry's worth.
fn key(name: &str) -> Statements {
    let sql = "INSERT INTO shared_keys (name, key) VALUES (?1, x'00')";
    statements(&[(sql, &[Arg::Text(name)][..])])
}

#[test]
fn an_entry_keeps_its_statements_and_every_kind_of_argument() {
    let args = [Arg::Null, Arg::Int(-7), Arg::Text("é"), Arg::Bytes(&[0, 255])];
    let bytes = logged([statements(&[("INSERT a", &args), ("UPDATE b", &[])])]);
    let entries = decoded(&bytes, b"store");
    assert_eq!(entries.len(), 1);
    let (sql, decoded, rest) = decode_statement(&entries[0].1).unwrap();
    assert_eq!(sql, "INSERT a");
    let expected = [
        Owned::Null,
        Owned::Integer(-7),
        Owned::Text("é".into()),
        Owned::Blob(vec![0, 255]),
    ];
    assert_eq!(decoded, expected);
    let (sql, decoded, rest) = decode_statement(rest).unwrap();
    assert_eq!((sql, decoded.len(), rest.len()), ("UPDATE b", 0, 0));
}

#[test]
fn a_torn_or_garbled_tail_ends_the_log_and_keeps_what_came_before() {
    let entries = [statements(&[("A", &[])]), statements(&[("B", &[Arg::Int(1)])])];
    let bytes = logged(entries);
    let first_len = 4 + u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let whole = decoded(&bytes, b"store");
    assert_eq!(whole.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2]);
    for cut in first_len..bytes.len() {
        assert_eq!(decoded(&bytes[..cut], b"store").len(), 1, "torn at {cut}");
    }
    assert!(decoded(&bytes, b"other").is_empty(), "another store's log");
    for flipped in first_len..bytes.len() {
        let mut garbled = bytes.clone();
        garbled[flipped] ^= 1;
        assert_eq!(decoded(&garbled, b"store").len(), 1, "byte {flipped} flipped");
    }
}

#[test]
fn a_statement_text_is_written_once_and_read_back_whole_in_every_entry() {
    let sql = "INSERT INTO events (id) VALUES (?1) RETURNING sequence";
    let one = |id| statements(&[(sql, &[Arg::Text(id)][..]), (sql, &[Arg::Text(id)][..])]);
    let bytes = logged([one("a"), one("b")]);
    let entries = decoded(&bytes, b"store");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].1, one("b").body, "the second entry reads back whole");
    let occurrences = bytes.windows(sql.len()).filter(|w| *w == sql.as_bytes()).count();
    assert_eq!(occurrences, 1, "the text is in the log once");
}

#[test]
fn an_id_an_entry_repeats_is_written_once_and_read_back_whole() {
    let id = "01a23c16-2c53-7186-aea9-9f77b5b7f906";
    let json = format!("{{\"data\":\"{}\"}}", "x".repeat(200));
    let args = [
        Arg::Text(id),
        Arg::Text("setup"),
        Arg::Text(&json),
        Arg::Int(3),
        Arg::Text(id),
    ];
    let entry = || {
        statements(&[
            ("INSERT a", &args[..]),
            ("INSERT b", &[Arg::Text("setup"), Arg::Text(id)][..]),
        ])
    };
    let bytes = logged([entry()]);
    let entries = decoded(&bytes, b"store");
    assert_eq!(entries[0].1, entry().body, "it reads back whole");
    let count = |text: &str| bytes.windows(text.len()).filter(|w| *w == text.as_bytes()).count();
    assert_eq!(count(id), 1, "the id is in the entry once");
    assert_eq!(count("setup"), 2, "a short text is not numbered");
    assert_eq!(count(&json), 1, "nor is a long one (here, once anyway)");
    assert!(bytes.len() < entry().body.len() - id.len());
}

/// A small deterministic generator, so the round trip below sees the same mixes every run.
struct Mixes(u64);

impl Mixes {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn every_mix_of_arguments_reads_back_whole() {
    let mut mixes = Mixes(17);
    // Few distinct texts, of lengths around the numbered range's bounds, so repeats are common.
    let texts: Vec<String> = [0, 7, 8, 9, 36, 127, 128, 129, 300]
        .iter()
        .flat_map(|len| ["a", "b"].map(|c| c.repeat(*len)))
        .collect();
    let entries: Vec<Vec<(String, Vec<Owned>)>> = (0..200)
        .map(|_| {
            (0..1 + mixes.below(4))
                .map(|s| {
                    let args = (0..mixes.below(12))
                        .map(|_| match mixes.below(5) {
                            0 => Owned::Null,
                            1 => Owned::Integer(mixes.below(1000) as i64),
                            2 => Owned::Blob(texts[mixes.below(texts.len() as u64) as usize].clone().into_bytes()),
                            _ => Owned::Text(texts[mixes.below(texts.len() as u64) as usize].clone()),
                        })
                        .collect();
                    (format!("STATEMENT {s}"), args)
                })
                .collect()
        })
        .collect();
    let built = |entry: &[(String, Vec<Owned>)]| {
        let mut s = Statements::default();
        for (sql, args) in entry {
            let args: Vec<Arg<'_>> = args
                .iter()
                .map(|a| match a {
                    Owned::Null => Arg::Null,
                    Owned::Integer(n) => Arg::Int(*n),
                    Owned::Text(t) => Arg::Text(t),
                    Owned::Blob(b) => Arg::Bytes(b),
                    Owned::Real(_) => unreachable!(),
                })
                .collect();
            s.push(sql, &args);
        }
        s
    };
    let bytes = logged(entries.iter().map(|e| built(e)));
    let read = decoded(&bytes, b"store");
    assert_eq!(read.len(), entries.len());
    for ((_, body), entry) in read.iter().zip(&entries) {
        assert_eq!(*body, built(entry).body);
    }
}

#[test]
fn past_the_last_number_texts_are_written_whole_and_read_back() {
    let texts: Vec<String> = (0..u16::MAX as usize + 3).map(|i| format!("text-{i:08}")).collect();
    let mut entry = Statements::default();
    for chunk in texts.chunks(1000) {
        entry.push("INSERT many", &chunk.iter().map(|t| Arg::Text(t)).collect::<Vec<_>>());
    }
    // The first text repeats by its number; the last is repeated whole (no number was left for it).
    let (first, last) = (&texts[0], &texts[texts.len() - 1]);
    entry.push("INSERT again", &[Arg::Text(first), Arg::Text(last)]);
    let whole = entry.body.clone();
    let bytes = logged([entry]);
    assert_eq!(decoded(&bytes, b"store")[0].1, whole);
    let count = |text: &str| bytes.windows(text.len()).filter(|w| *w == text.as_bytes()).count();
    assert_eq!((count(first), count(last)), (1, 2));
}

#[test]
fn a_repeat_of_a_text_the_entry_does_not_hold_ends_the_log() {
    let first = logged([statements(&[("A", &[])])]);
    // A well-checked entry whose one argument repeats text number 0, which it never numbered.
    let body = [&[0xff, 0xff, 1, 0, 0, 0, b'B'][..], &[1, 0], &[REPEATS, 0, 0]].concat();
    let mut entry = ((8 + body.len() + 8) as u32).to_le_bytes().to_vec();
    entry.extend_from_slice(&2u64.to_le_bytes());
    entry.extend_from_slice(&body);
    entry.extend_from_slice(&check(b"store", 2, &body));
    let bytes = [first, entry].concat();
    assert_eq!(decoded(&bytes, b"store").len(), 1, "the log ends before it");
}

#[test]
fn entries_that_do_not_follow_the_mark_without_a_gap_are_not_applied() {
    let bytes = logged_from(5, [key("five"), key("six")]);
    let mut conn = Connection::open_in_memory().unwrap();
    crate::migrations::migrate(&mut conn).unwrap();
    let keys = |conn: &Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM shared_keys", [], |r| r.get(0))
            .unwrap()
    };
    // The store's mark says 2: entries 3 and 4 are missing, as beside an older copy of the store.
    assert!(apply_unapplied(&mut conn, &bytes, 2, b"store").is_err());
    assert_eq!(keys(&conn), 0, "nothing of it applied");
    // Negative control: with the mark at 4, both follow it.
    assert_eq!(apply_unapplied(&mut conn, &bytes, 4, b"store").unwrap(), 6);
    assert_eq!(keys(&conn), 2);
}

#[test]
fn an_entry_too_long_for_its_length_fields_is_not_written() {
    let many = vec![Arg::Null; usize::from(u16::MAX) + 1];
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir.path().join("log"), 1, b"");
    assert!(log.append(&statements(&[("X", &many[..])])).is_err());
    assert!(
        log.append(&statements(&[("X", &many[..1])])).is_ok(),
        "negative control"
    );
}

/// An emptied log is written again from its start, over its preallocated zeros and the entries its
/// store's mark covers: until a new entry is written it holds none, and after one, only the new
/// entries are applied, whatever the earlier round left past them.
#[test]
fn an_emptied_log_is_overwritten_from_its_start_and_applies_only_its_newest_round() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&path, 1, b"store");
    reset(&log.file).unwrap();
    for name in ["k1", "k2", "k3"] {
        log.append(&key(name)).unwrap();
    }
    // A commit marking 1 to 3 is on disk: the log is emptied.
    log.committed();
    log.empty();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, PREALLOCATED, "the size stays");
    assert!(
        !holds_entries(&bytes) && decoded(&bytes, b"store").is_empty(),
        "no entry until the next"
    );
    log.append(&key("k4")).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes.windows(2).any(|w| w == b"k3"),
        "the first round's third entry is still there"
    );
    let numbers: Vec<u64> = decoded(&bytes, b"store").iter().map(|(n, _)| *n).collect();
    assert_eq!(
        numbers,
        [4],
        "what the first round left after the newest entry is not read"
    );
    let mut conn = Connection::open_in_memory().unwrap();
    crate::migrations::migrate(&mut conn).unwrap();
    assert_eq!(apply_unapplied(&mut conn, &bytes, 3, b"store").unwrap(), 4);
    let keys: Vec<String> = conn
        .prepare("SELECT name FROM shared_keys")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(keys, ["k4"], "the entries the mark covers are not applied again");
}

/// A whole entry an earlier round left where a hole of the newest one is (a page that never
/// reached the disk) ends the log there: it neither bridges the hole nor refuses the store.
#[test]
fn an_entry_that_does_not_follow_the_one_before_ends_the_log() {
    let bytes = [
        logged_from(4, [key("four")]),
        logged_from(2, [key("two")]),
        logged_from(6, [key("six")]),
    ]
    .concat();
    let numbers: Vec<u64> = decoded(&bytes, b"store").iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [4]);
    let mut conn = Connection::open_in_memory().unwrap();
    crate::migrations::migrate(&mut conn).unwrap();
    assert_eq!(
        apply_unapplied(&mut conn, &bytes, 3, b"store").unwrap(),
        4,
        "no gap refused"
    );
    let keys: i64 = conn
        .query_row("SELECT count(*) FROM shared_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(keys, 1, "the fourth alone");
}

/// Opening a store leaves nothing in its log it did not apply: an entry a crash left after a torn
/// one was never answered, and a later round's entries must not be able to reach it.
#[test]
fn a_recovered_log_keeps_nothing_it_did_not_apply() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let mut conn = Connection::open(&db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    crate::migrations::migrate(&mut conn).unwrap();
    conn.execute("UPDATE redo_applied SET identity = ?1", [b"store".to_vec()])
        .unwrap();
    let mut bytes = logged([key("k-one"), key("k-two"), key("k-three")]);
    let torn = bytes.windows(5).position(|w| w == b"k-two").unwrap();
    bytes[torn] ^= 1;
    assert!(
        bytes.windows(7).any(|w| w == b"k-three"),
        "a whole entry after the torn one"
    );
    let log = log_path(&db);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&log)
        .unwrap();
    std::io::Write::write_all(&mut file, &bytes).unwrap();
    let recovered = RedoLog::recover(&mut conn, &db).unwrap();
    assert_eq!(
        recovered.next, 2,
        "the first entry applied, the log ended at the torn one"
    );
    let after = std::fs::read(&log).unwrap();
    assert_eq!(after.len() as u64, PREALLOCATED);
    assert!(after.iter().all(|b| *b == 0), "nothing of the crashed round stays");
}

/// After a failed commit, the entries it held run again in order, each once, and a commit that
/// holds them leaves nothing to run again; a member's recorder is empty after it is cleared.
#[test]
fn the_entries_a_commit_holds_run_again_in_order_until_it_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir.path().join("log"), 1, b"store");
    let mut recorder = key("k1");
    log.append(&recorder).unwrap();
    recorder.clear();
    assert!(recorder.is_empty(), "cleared");
    let sql = "INSERT INTO shared_keys (name, key) VALUES (?1, x'00')";
    recorder.push(sql, &[Arg::Text("k2")]);
    log.append(&recorder).unwrap();
    let names = |conn: &Connection| -> Vec<String> {
        let mut names = conn.prepare("SELECT name FROM shared_keys ORDER BY rowid").unwrap();
        let rows = names.query_map([], |r| r.get::<_, String>(0)).unwrap();
        rows.map(|name| name.unwrap()).collect()
    };
    let mut conn = Connection::open_in_memory().unwrap();
    crate::migrations::migrate(&mut conn).unwrap();
    log.reapply(&conn).unwrap();
    assert_eq!(names(&conn), ["k1", "k2"], "each held entry once, in order");
    log.committed();
    log.reapply(&conn).unwrap();
    assert_eq!(names(&conn), ["k1", "k2"], "a made commit holds nothing to run again");
}

/// The checks of entry 2 of `an_entry_checked_as_before_...` on store `store`, computed apart
/// (Python's `xxhash.xxh3_64_intdigest`, and the first 8 bytes of `hashlib.sha256`, little-endian).
const XXH3_OF_ENTRY_2: u64 = 0xc89c_0224_6e6a_aa16;
const SHA256_START_OF_ENTRY_2: u64 = 0x6b67_5708_d63e_79cb;

/// An entry a log from before XXH3 checked with SHA-256 is read as it was written (a crash just
/// before an upgrade loses nothing); a check of neither kind, or one made for another store,
/// ends the log there.
#[test]
fn an_entry_checked_as_before_is_read_and_any_other_check_ends_the_log() {
    let body = [&[0xff, 0xff, 1, 0, 0, 0, b'A'][..], &[0, 0]].concat();
    let entry = |number: u64, check: [u8; 8]| {
        let mut entry = ((8 + body.len() + 8) as u32).to_le_bytes().to_vec();
        entry.extend_from_slice(&number.to_le_bytes());
        entry.extend_from_slice(&body);
        entry.extend_from_slice(&check);
        entry
    };
    let numbers = |bytes: &[u8]| -> Vec<u64> { decoded(bytes, b"store").iter().map(|(n, _)| *n).collect() };
    let before = entry(1, sha256_check(b"store", 1, &body));
    assert_eq!(numbers(&before), [1], "the earlier check");
    let now = [before.clone(), entry(2, check(b"store", 2, &body))].concat();
    assert_eq!(numbers(&now), [1, 2], "the earlier check, then XXH3");
    // Fixed values: the checks on disk do not change with a crate's version or an argument's order.
    assert_eq!(u64::from_le_bytes(check(b"store", 2, &body)), XXH3_OF_ENTRY_2);
    assert_eq!(
        u64::from_le_bytes(sha256_check(b"store", 2, &body)),
        SHA256_START_OF_ENTRY_2
    );
    let mut garbled = check(b"store", 2, &body);
    garbled[0] ^= 1;
    assert_eq!(numbers(&[before.clone(), entry(2, garbled)].concat()), [1], "neither");
    let other_store = entry(2, sha256_check(b"other", 2, &body));
    assert_eq!(numbers(&[before, other_store].concat()), [1], "another store's");
}

/// A burst's room for pending statements stays while its transactions fill it, goes back to a
/// usual transaction's after one that held less, and all of it once nothing is pending.
#[test]
fn the_room_for_pending_statements_follows_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir.path().join("log"), 1, b"store");
    let large = "x".repeat(64 * 1024);
    let sql = "INSERT INTO shared_keys (name, key) VALUES (?1, x'00')";
    for _ in 0..32 {
        log.append(&statements(&[(sql, &[Arg::Text(&large)][..])])).unwrap();
    }
    let burst = log.pending.capacity();
    assert!(burst >= 2 * 1024 * 1024);
    log.committed();
    assert_eq!(log.pending.capacity(), burst, "a full transaction's room stays");
    log.append(&key("k1")).unwrap();
    log.rest();
    assert_eq!(log.pending.capacity(), burst, "not while entries are pending");
    log.committed();
    assert!(
        log.pending.capacity() <= KEPT_PENDING,
        "a light one gives back the rest"
    );
    log.rest();
    assert_eq!(log.pending.capacity(), 0, "an idle store keeps none");
    assert_eq!(log.entry.capacity(), 0, "nor room for an entry");

    // One member far past a transaction's usual most: its entry's room goes right after its write,
    // and the pending statements keep no more than their cap after the commit.
    let huge = "y".repeat(MOST_KEPT_PENDING + 1024);
    log.append(&statements(&[(sql, &[Arg::Text(&huge)][..])])).unwrap();
    assert!(log.entry.capacity() <= 4 * USUAL_BODY, "the entry's room is let go");
    log.committed();
    assert!(log.pending.capacity() <= KEPT_PENDING, "past the cap it shrinks");
}

/// An entry that could not be written is not run again after a failed commit.
#[test]
fn an_entry_not_written_is_not_pending() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&path, 1, b"store");
    log.file = File::open(&path).unwrap(); // read-only: every write fails
    assert!(log.append(&key("k1")).is_err());
    assert!(!log.holds_pending(), "a failed write holds nothing to run again");
}

/// The writer's one recorder, cleared after a member too long for the log, records the next one
/// whole, in a usual member's room.
#[test]
fn a_cleared_recorder_forgets_a_too_long_member() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir.path().join("log"), 1, b"store");
    let many = vec![Arg::Null; usize::from(u16::MAX) + 1];
    let mut recorder = statements(&[("X", &many[..])]);
    assert!(log.append(&recorder).is_err());
    recorder.clear();
    assert!(
        recorder.body.capacity() <= 4 * USUAL_BODY,
        "a large member's room goes back"
    );
    recorder.push(
        "INSERT INTO shared_keys (name, key) VALUES (?1, x'00')",
        &[Arg::Text("k1")],
    );
    assert!(log.append(&recorder).is_ok());
}

/// Giving the room back leaves the log's numbering of texts alone: an entry after it reads back
/// whole.
#[test]
fn an_entry_after_rest_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&path, 1, b"store");
    log.append(&key("k1")).unwrap();
    log.committed();
    log.rest();
    log.append(&key("k2")).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let entries = decoded(&bytes, b"store");
    assert_eq!(entries.len(), 2);
    assert_eq!(decode_statement(&entries[1].1).unwrap().1, [Owned::Text("k2".into())]);
}
