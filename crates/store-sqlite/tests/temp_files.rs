//! Where SQLite puts what spills out of memory: the store's own directory, never `TMPDIR`. A binary
//! of its own, since SQLite's temp directory is one setting for the whole process and the first
//! store opened sets it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_store::Store;
use conduit_store_sqlite::SqliteStore;

#[test]
fn what_the_writer_spills_goes_to_the_stores_own_directory() {
    let dir = tempfile::tempdir().unwrap();
    let _store: Box<dyn Store> = Box::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let temp: String = conn.query_row("PRAGMA temp_store_directory", [], |r| r.get(0)).unwrap();
    assert_eq!(temp, dir.path().to_str().unwrap());
}
