//! The embedded store: [`conduit_store::Tx`] on one SQLite file (WAL, `synchronous=NORMAL`). Writes
//! go through one connection that commits many callers' transactions together ([`batch`]); each is
//! answered once its statements are in the redo log ([`redo`]), synced as far as its mode needs,
//! one fsync for all that wait together ([`durability`]); reads run on connections of their own
//! ([`readers`]); the WAL is checkpointed by a thread of its own ([`checkpoint`]). Only the daemon
//! and tests link it.

// The one `unsafe` item: the write connection with its statements moves between threads
// (`prepared.rs`).
#![deny(unsafe_code)]

mod batch;
mod checkpoint;
mod durability;
mod leases;
mod migrations;
mod periodic;
mod prepared;
mod readers;
mod redo;
mod sql;

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use conduit_store::{Mode, Store, StoreError, Tx};

type Result<T> = std::result::Result<T, StoreError>;

/// SQLite's own error, kept as text for the daemon's log.
fn sqlite_error(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// A SQLite file in WAL mode with durable commits: one writer, any number of readers.
pub struct SqliteStore {
    durability: Arc<durability::GroupSync>,
    writer: Arc<batch::Writer>,
    readers: readers::Readers,
    _committer: periodic::Periodic,
    _checkpointer: periodic::Periodic,
}

/// How long what the redo log holds may wait for a commit when nothing else commits it (a read on
/// another connection does): long enough that a busy writer fills its commits ([`batch`]'s
/// `MAX_MEMBERS`), short enough that a crash replays little.
const HELD_AT_MOST: Duration = Duration::from_millis(200);

impl SqliteStore {
    /// SQLite commits made so far: for tests that check writers shared commits.
    #[doc(hidden)]
    pub fn commits_made(&self) -> u64 {
        self.writer.commits()
    }

    /// Transactions rolled back whole so far (a member failed after writing, a commit failed, ...):
    /// for tests that check a failure took only its own work.
    #[doc(hidden)]
    pub fn rollbacks_made(&self) -> u64 {
        self.writer.rollbacks()
    }

    /// Opens (creating if needed) the store at `path` and applies pending migrations.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        Self::open_holding_records(path, HELD_AT_MOST)
    }

    /// [`SqliteStore::open`], with what the redo log holds left uncommitted for up to `at_most` when
    /// nothing else commits it: for tests that must find it still in the redo log.
    #[doc(hidden)]
    pub fn open_holding_records(path: &Path, at_most: Duration) -> Result<SqliteStore> {
        let mut conn = writer_connection(path)?;
        // The log's statements fit the schema they ran on: they are applied before migrations.
        migrations::supported_version(&conn)?;
        let mut redo = redo::RedoLog::recover(&mut conn, path)?;
        migrations::migrate(&mut conn)?;
        // SQLite makes the WAL file at the first write after opening (migrations wrote one).
        let wal = redo::open_wal(path)?;
        redo.bind(&conn, &wal)?;
        let durability = Arc::new(durability::GroupSync::new(redo.file()?));
        let writer = Arc::new(batch::Writer::new(conn, redo, durability.clone(), wal)?);
        let held = writer.clone();
        Ok(SqliteStore {
            _committer: periodic::Periodic::start("store-commit", at_most, move || {
                // A failure is the next read's or write's to report.
                let _ = held.commit_round();
            })?,
            writer,
            durability,
            readers: readers::Readers::new(path),
            _checkpointer: checkpoint::start(path)?,
        })
    }
}

/// The write connection, created owner-only, in WAL mode.
fn writer_connection(path: &Path) -> Result<Connection> {
    create_owner_only(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(sqlite_error)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(sqlite_error)?;
    // Commits do not fsync; a write waits for a (shared) fsync of the redo log before it returns.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite_error)?;
    conn.pragma_update(None, "foreign_keys", "ON").map_err(sqlite_error)?;
    conn.pragma_update(None, "wal_autocheckpoint", checkpoint::WRITER_FALLBACK_PAGES)
        .map_err(sqlite_error)?;
    // A log that grew (a migration, a burst) is truncated back once checkpointed.
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)
        .map_err(sqlite_error)?;
    place_temp_files(&conn, path)?;
    // A transaction's dirty pages stay in memory up to this many before SQLite writes them to the
    // WAL ahead of its commit (the cache's own size, 2 MiB, otherwise): one that spilled wrote many
    // of its pages twice, once early and again at its commit.
    conn.pragma_update(None, "cache_spill", SPILL_PAGES)
        .map_err(sqlite_error)?;
    configure(&conn)?;
    Ok(conn)
}

/// Dirty pages the writer's transaction keeps in memory before it spills (some 8 MiB of 4 KiB
/// pages): a commit of 1,024 calls from 32 executions on a store of some 300,000 events dirtied
/// about 1,000 pages. Past the commit, SQLite frees what its cache holds beyond its own 2 MiB.
/// (SQLite reads the pragma's value as a boolean too, from its low byte: 2048 would turn spilling
/// off altogether, and a transaction's memory with it.)
const SPILL_PAGES: i64 = 2000;

/// The spill size `.cargo/config.toml` builds SQLite with: a savepoint journal (a member's, after
/// a member failed having written: `batch`) is kept in memory in one chunk of this many bytes
/// before it goes to a temp file.
const ONE_CHUNK_SPILL: &str = "STMTJRNL_SPILL=1048576";

/// Where the writer's savepoint journals and sorts are kept. With `temp_store = MEMORY`, SQLite
/// keeps a member's savepoint journal in 1 KiB chunks, a malloc and a free for each (about 70 a
/// call, 10% of a call's instructions under callgrind); without it, in one chunk of the spill
/// size. So a SQLite built with the 1 MiB spill leaves `temp_store` at its default, and what
/// spills past it (a sweep's journal, a migration's sort) goes to a temp file in the store's own
/// directory, the state directory, which is owner-only and hidden from every execution, never to
/// `TMPDIR`. A SQLite built without it keeps everything in memory, as before.
fn place_temp_files(conn: &Connection, path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match dir.to_str() {
        Some(dir) if built_with(conn, ONE_CHUNK_SPILL)? => temp_files_in(conn, dir),
        _ => conn.pragma_update(None, "temp_store", "MEMORY").map_err(sqlite_error),
    }
}

/// Whether SQLite was compiled with `option` (as `PRAGMA compile_options` lists it).
fn built_with(conn: &Connection, option: &str) -> Result<bool> {
    let mut options = conn.prepare("PRAGMA compile_options").map_err(sqlite_error)?;
    let mut rows = options.query([]).map_err(sqlite_error)?;
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        if row.get_ref(0).map_err(sqlite_error)?.as_str().ok() == Some(option) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// SQLite's temp directory is one setting for the whole process, and changing it while another
/// thread runs SQLite is not safe: the first store opened sets it (the daemon opens one).
static TEMP_DIRECTORY: OnceLock<()> = OnceLock::new();

fn temp_files_in(conn: &Connection, dir: &str) -> Result<()> {
    let mut set = Ok(());
    TEMP_DIRECTORY.get_or_init(|| {
        set = conn
            .pragma_update(None, "temp_store_directory", dir)
            .map_err(sqlite_error);
    });
    set
}

/// What every connection of the store sets, writer and readers alike.
fn configure(conn: &Connection) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sqlite_error)?;
    // Every statement the store runs stays prepared.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(())
}

/// Creates a store file at an older schema version, as an earlier release left it: for tests of
/// the migrations that follow.
#[doc(hidden)]
pub fn create_at_schema_version(path: &Path, version: usize) -> Result<()> {
    create_owner_only(path)?;
    let mut conn = Connection::open(path).map_err(sqlite_error)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(sqlite_error)?;
    migrations::migrate_to(&mut conn, version)
}

/// Creates the database file owner-only (0600) when it does not exist yet: SQLite gives the `-wal`
/// and `-shm` files it creates the database file's mode, so all three stay private.
fn create_owner_only(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map(drop)
        .map_err(|e| StoreError::Backend(format!("create {}: {e}", path.display())))
}

impl Store for SqliteStore {
    fn transact(&self, mode: Mode, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let _inside = conduit_store::InTransaction::enter()?;
        match mode {
            Mode::Read => {
                // A read sees every record already answered.
                self.writer.commit_held()?;
                self.readers.transact(body)?;
                // What it read (a record's event sequence, say) is on disk before it is answered.
                self.durability.wait_durable(self.durability.latest())
            }
            Mode::ReadState => self.writer.read_state(body),
            Mode::Write | Mode::Record => self.writer.transact(mode, body),
        }
    }

    fn writes_one_at_a_time(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer's savepoint journals stay in memory in one chunk: SQLite is built with the
    /// options `.cargo/config.toml` gives it, and the writer leaves `temp_store` at its default
    /// (`MEMORY` would mean 1 KiB chunks).
    #[test]
    fn the_writer_journals_a_member_in_one_chunk_of_memory() {
        let dir = tempfile::tempdir().unwrap();
        let conn = writer_connection(&dir.path().join("store.db")).unwrap();
        for option in [ONE_CHUNK_SPILL, "DEFAULT_MEMSTATUS=0"] {
            assert!(built_with(&conn, option).unwrap(), "SQLite is built without {option}");
        }
        assert!(!built_with(&conn, "STMTJRNL_SPILL=65536").unwrap(), "the control");
        let temp_store: i64 = conn.query_row("PRAGMA temp_store", [], |r| r.get(0)).unwrap();
        assert_eq!(temp_store, 0, "the writer's temp_store is the default");
    }

    /// Inside `deferring`, a write returns before its fsync and leaves it to its caller's wait; a
    /// read of what it wrote waits for it the same way. Outside, each is on disk when it returns.
    #[test]
    fn a_deferred_write_is_flushed_by_its_callers_wait_and_not_before() {
        use conduit_store::flush::deferring;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let on_disk = || store.durability.synced() >= store.durability.latest();
        let db: &dyn Store = &store;
        let (written, unflushed) = deferring(|| db.write(|tx| tx.insert_event(conduit_store::testing::event("e1"))));
        written.unwrap();
        assert!(!on_disk(), "answered before its fsync");
        let (read, then_read) = deferring(|| db.read(|tx| tx.get_event("e1")));
        assert!(read.unwrap().is_some());
        assert!(!then_read.on_disk(), "a read of it waits for its flush too");
        unflushed.wait().unwrap();
        assert!(on_disk(), "the caller's wait flushed it");
        then_read.wait().unwrap();
        db.write(|tx| tx.insert_event(conduit_store::testing::event("e2")))
            .unwrap();
        assert!(
            on_disk(),
            "the control: outside deferring, a write is on disk when it returns"
        );
    }

    /// A commit's dirty pages stay in memory up to `SPILL_PAGES`, past the cache's own size.
    #[test]
    fn the_writer_spills_a_transaction_only_past_its_own_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let spill = |conn: &Connection| -> i64 { conn.query_row("PRAGMA cache_spill", [], |r| r.get(0)).unwrap() };
        let writer = writer_connection(&dir.path().join("store.db")).unwrap();
        assert_eq!(spill(&writer), SPILL_PAGES);
        let plain = Connection::open(dir.path().join("store.db")).unwrap();
        assert!(
            spill(&plain) < SPILL_PAGES,
            "the control: SQLite's own threshold is lower"
        );
    }
}
