//! The redo log: every write transaction's statements, safe on disk before their commit.
//!
//! No caller waits for a SQLite commit. The statements a member's body ran that wrote, with their
//! arguments, are appended to `<store>-redo` as one entry in one `write`: once that returns, a
//! process crash cannot lose them, and once the log is synced, a power loss cannot either. The
//! open transaction commits later, and the same commit sets `redo_applied` to the last entry it
//! holds. Opening the store runs the statements of every entry past that mark again, in order, on
//! the commit they followed, so they make the very rows they made the first time.
//!
//! An entry is `len: u32 | number: u64 | body | check: 8 bytes` (little-endian; `check` is the
//! XXH3-64 of the store's random identity, the number and the body, so a log beside another store
//! is not applied to it; entries past the store's mark must follow it without a gap, so one beside
//! an older copy of its own store is refused). A log written before the check was XXH3 (schema
//! version 26) checked each entry with the start of its SHA-256; an entry with that check is read
//! too, so a crash just before an upgrade loses nothing, and schema version 27 fences the store
//! from a release that would read an XXH3 entry as torn. An entry's body is statements, each
//! `sql | args: u16 | args`, an argument a tag byte (0 null, 1 integer, 2 text, 3 bytes) and its
//! value. A statement's text is written once per log: `sql` is the number of a text an earlier
//! entry defined, or [`DEFINES`] followed by `len: u32 | text`, which takes the next number. Within
//! an entry, a text argument of [`repeats::SHARED`] bytes equal to an earlier one (an id the entry's
//! rows repeat) is tag 4 and that one's number, `u16`, counting such arguments from the entry's
//! start (the first 65,535 distinct ones; texts after them are written whole). A torn or garbled
//! tail, which only an entry nobody was answered about can leave, ends the log.
//!
//! The file is [`PREALLOCATED`] bytes of zeros from each open, and entries overwrite it from its
//! start: syncing an entry then writes its data alone, where an append also commits the file's new
//! size to the filesystem's journal (`fsync rewrite` against `fsync append` in the toolbelt bench).
//! Emptying the log starts the next entries at its start again, once a commit marking every entry
//! so far is on disk. What an earlier round of this open left past the newest entry is zeros, a
//! torn entry, or whole entries numbered at or below that mark, so below the newest round's: the
//! log ends at the first entry whose number does not follow the one before it, and no such entry
//! is read. Opening the store applies the log, puts the store's mark on disk, then writes the log
//! with zeros again: nothing a crash left unapplied (an entry after a torn one) outlives the open.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use rusqlite::types::Value as Owned;
use rusqlite::Connection;

use conduit_store::StoreError;

use crate::{sqlite_error, Result};

/// Past this many bytes the log is emptied, once a commit that applied it all is on disk.
const EMPTY_PAST: u64 = 1024 * 1024;
/// The log's size from each open, written with zeros (and grown past when entries wait long for
/// their commit): the emptying threshold and a transaction's worth of entries after it.
const PREALLOCATED: u64 = 4 * 1024 * 1024;
/// A statement's text follows, and takes the next number.
const DEFINES: u16 = u16::MAX;
/// A statement's text follows (every number is taken).
const INLINE: u16 = u16::MAX - 1;
/// The longest statement text an entry holds.
const MAX_TEXT: usize = 1024 * 1024;
/// The most bytes one entry's statements take with their whole texts (a request body is at most
/// 1 MiB and a delivery 4 MiB): a longer entry is not written, and not read back.
const MAX_ENTRY: usize = 64 * 1024 * 1024;
/// An entry's length field, before its number.
const LEN_BYTES: usize = 4;
/// The room the pending statements keep after a commit that held less: a few hundred calls' worth,
/// so a burst's room (up to [`MOST_KEPT_PENDING`]) goes back once it ends.
const KEPT_PENDING: usize = 1024 * 1024;
/// The most room the pending statements keep after any commit: twice what a transaction holds before
/// it commits (`batch::MAX_HELD_BYTES`), which its last member's entry may pass by up to
/// [`MAX_ENTRY`].
const MOST_KEPT_PENDING: usize = 8 * 1024 * 1024;

/// Room for a toolbelt call's statements with their whole texts (3 to 5 KiB): what the writer's one
/// recorder takes at its first statement and keeps from one member to the next, and what the
/// buffer an entry is built in keeps.
const USUAL_BODY: usize = 8 * 1024;

/// Empties `bytes`, keeping room for [`USUAL_BODY`] bytes but not for much more.
fn clear_to_usual(bytes: &mut Vec<u8>) {
    bytes.clear();
    if bytes.capacity() > 4 * USUAL_BODY {
        bytes.shrink_to(USUAL_BODY);
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The log file, and the entries appended since the last commit.
pub struct RedoLog {
    file: File,
    /// Where the next entry is written: the end of the newest one.
    len: u64,
    next: u64,
    /// The statements of the entries appended since the last commit, one after another with their
    /// whole texts: run again when that commit fails.
    pending: Vec<u8>,
    /// The entry being written, kept for its room.
    entry: Vec<u8>,
    /// A failed append could not be cut off again: nothing more may follow it.
    broken: bool,
    /// The numbers of the statement texts the log has defined, by their bytes (`Statements::push`
    /// took them as text); looked up for every statement, so hashed with foldhash, not SipHash.
    known: HashMap<Box<[u8]>, u16, foldhash::fast::RandomState>,
    /// The store's random identity, in every entry's check.
    identity: Vec<u8>,
}

impl RedoLog {
    /// Opens the log beside the store at `db` (one process at a time), applies what the store's
    /// last commit did not hold, and empties it. Runs before migrations, on the schema the log's
    /// statements ran on.
    pub fn recover(conn: &mut Connection, db: &Path) -> Result<RedoLog> {
        let path = log_path(db);
        let mut file = open_private(&path)?;
        // Two processes applying one log would apply it twice.
        file.try_lock()
            .map_err(|_| StoreError::Backend(format!("{} is open in another process", db.display())))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| redo_error("read", &e))?;
        let (applied, identity) = match applied_mark(conn)? {
            Some(mark) => mark,
            // A store from before the log wrote none: a log beside it is not its.
            None if !holds_entries(&bytes) => Default::default(),
            None => return Err(misfit(&path)),
        };
        let last = apply_unapplied(conn, &bytes, applied as u64, &identity).map_err(|e| match e {
            StoreError::Corrupt(_) => misfit(&path),
            other => other,
        })?;
        if holds_entries(&bytes) {
            // What marks the log applied is on disk before the log goes.
            sync_wal(&open_wal(db)?)?;
        }
        // Zeros again, whole: entries past a torn one, never answered, are gone with the rest.
        reset(&file).map_err(|e| redo_error("empty", &e))?;
        Ok(RedoLog {
            file,
            len: 0,
            next: last + 1,
            pending: Vec::new(),
            entry: Vec::new(),
            broken: false,
            known: HashMap::default(),
            identity,
        })
    }

    /// After migrations: puts what they committed on disk (entries will rest on it), then takes
    /// the identity this store's entries are checked with from now on (a store from before the log
    /// has one only once migrated).
    pub fn bind(&mut self, conn: &Connection, wal: &File) -> Result<()> {
        sync_wal(wal)?;
        let (_, identity) = applied_mark(conn)?.ok_or_else(|| StoreError::Corrupt("redo_applied".into()))?;
        self.identity = identity;
        Ok(())
    }

    /// A second handle on the log file, for syncing it.
    pub fn file(&self) -> Result<File> {
        self.file.try_clone().map_err(|e| redo_error("open", &e))
    }

    /// Appends one member's statements as the next entry; once this returns, a crash cannot lose them.
    pub fn append(&mut self, statements: &Statements) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::other("an earlier append could not be undone"));
        }
        if statements.too_long {
            return Err(std::io::Error::other("an entry too long for the redo log"));
        }
        let number = self.next;
        let mut entry = std::mem::take(&mut self.entry);
        let written = self.write_entry(&mut entry, number, &statements.body);
        // Let go of a large entry's room now, not at the next write.
        clear_to_usual(&mut entry);
        self.entry = entry;
        written?;
        self.next += 1;
        self.pending.extend_from_slice(&statements.body);
        Ok(())
    }

    /// Writes `body` as the entry numbered `number` at the log's end, built in `entry`.
    fn write_entry(&mut self, entry: &mut Vec<u8>, number: u64, body: &[u8]) -> std::io::Result<()> {
        entry.clear();
        // The length goes first once known: the number, the body and the check.
        entry.extend_from_slice(&[0; LEN_BYTES]);
        entry.extend_from_slice(&number.to_le_bytes());
        let body_at = entry.len();
        let mut defined = Vec::new();
        if self.interned(body, &mut defined, entry).is_none() {
            self.forget(&defined);
            return Err(std::io::Error::other("an entry the log could not read back"));
        }
        let check = check(&self.identity, number, &entry[body_at..]);
        entry.extend_from_slice(&check);
        let len = (entry.len() - LEN_BYTES) as u32;
        entry[..LEN_BYTES].copy_from_slice(&len.to_le_bytes());
        if let Err(e) = self.file.write_all_at(entry, self.len) {
            // Whatever part of the entry was written, a zero length in its place ends the log
            // there (or, on a full disk, the file cut back to it); and the texts it defined are
            // not defined.
            let undone = self.end_at(self.len).is_ok() || self.file.set_len(self.len).is_ok();
            self.broken = !undone;
            self.forget(&defined);
            return Err(e);
        }
        self.len += entry.len() as u64;
        Ok(())
    }

    /// Whether entries wait for a commit (an entry is never empty: `Writer::log` refuses one).
    pub fn holds_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// In the commit's transaction: the mark that says every entry so far is in it.
    pub fn mark_applied(&self, conn: &Connection) -> Result<()> {
        mark(conn, self.next - 1)
    }

    /// After a transaction was rolled back (its commit failed, or a member failed after writing in
    /// it): the pending entries again, in the transaction just opened.
    pub fn reapply(&self, conn: &Connection) -> Result<()> {
        apply(conn, &self.pending)
    }

    /// After a commit that held every pending entry: nothing is pending. Answers whether the log is
    /// long enough to empty once that commit is on disk.
    pub fn committed(&mut self) -> bool {
        // A burst's room stays while the burst lasts (fresh pages each transaction cost a page
        // fault a call); a transaction that held less than [`KEPT_PENDING`] gives the rest back.
        let light = self.pending.len() < KEPT_PENDING;
        self.pending.clear();
        if light || self.pending.capacity() > MOST_KEPT_PENDING {
            self.pending.shrink_to(KEPT_PENDING);
        }
        self.len > EMPTY_PAST
    }

    /// With nothing pending, gives back the room pending statements and entries took: an idle
    /// store keeps none.
    pub fn rest(&mut self) {
        if self.pending.is_empty() {
            self.pending = Vec::new();
            self.entry = Vec::new();
        }
    }

    /// Writes a zero length at `at`: the log reads as ending there.
    fn end_at(&self, at: u64) -> std::io::Result<()> {
        self.file.write_all_at(&[0; 4], at)
    }

    /// Empties the log: the next entry is written at its start. Call it only once a commit marking
    /// every entry is on disk.
    pub fn empty(&mut self) {
        if self.pending.is_empty() {
            // The first entry's length, zero, says the log holds none until the next is written
            // (should it stay, the entries there are all marked applied). A log a long wait for a
            // commit grew goes back to its size.
            let _ = self.end_at(0);
            if self.len > PREALLOCATED {
                let _ = self.file.set_len(PREALLOCATED);
            }
            self.len = 0;
            self.known.clear();
        }
    }

    /// A member's statements as the log writes them, after `out`: each text it has not defined yet
    /// is defined (and named in `defined`), the rest by number.
    fn interned(&mut self, whole: &[u8], defined: &mut Vec<Box<[u8]>>, out: &mut Vec<u8>) -> Option<()> {
        out.reserve(whole.len());
        let mut shared = repeats::Numbers::for_entry();
        let mut rest = whole;
        while !rest.is_empty() {
            let (sql, args) = take_bytes(rest)?;
            match self.known.get(sql) {
                Some(n) => out.extend_from_slice(&n.to_le_bytes()),
                None => {
                    let n = self.known.len() as u16;
                    let code = if n < INLINE { DEFINES } else { INLINE };
                    if code == DEFINES {
                        self.known.insert(sql.into(), n);
                        defined.push(sql.into());
                    }
                    out.extend_from_slice(&code.to_le_bytes());
                    put_bytes(out, sql);
                }
            }
            rest = repeats::share(args, &mut shared, out)?;
        }
        Some(())
    }

    /// Texts an entry that was not written defined are not defined.
    fn forget(&mut self, defined: &[Box<[u8]>]) {
        for sql in defined {
            self.known.remove(sql);
        }
    }

    /// Whether the store's mark says every entry appended is applied (a commit that reported an
    /// error may still have been made).
    pub fn all_marked(&self, conn: &Connection) -> bool {
        applied_mark(conn).is_ok_and(|mark| mark.is_some_and(|(through, _)| through as u64 == self.next - 1))
    }
}

/// An entry's statements with their whole texts, from the texts the log defined before it; the
/// texts it defines are added.
fn expanded(mut body: &[u8], known: &mut Vec<String>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len() * 2);
    let mut shared = repeats::Numbers::for_entry();
    while !body.is_empty() {
        if out.len() > MAX_ENTRY {
            return None;
        }
        let (code, rest) = body.split_first_chunk::<2>()?;
        let (sql, rest) = match u16::from_le_bytes(*code) {
            code @ (DEFINES | INLINE) => {
                let (text, rest) = take_bytes(rest).filter(|(text, _)| text.len() <= MAX_TEXT)?;
                let text = std::str::from_utf8(text).ok()?.to_owned();
                if code == DEFINES {
                    known.push(text.clone());
                }
                (text, rest)
            }
            n => (known.get(n as usize)?.clone(), rest),
        };
        put_bytes(&mut out, sql.as_bytes());
        body = repeats::unshare(rest, &mut shared, &mut out)?;
    }
    Some(out)
}

pub fn log_path(db: &Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-redo");
    name.into()
}

/// Applies, in one transaction, the entries past `applied` (which must follow it without a gap:
/// a log with an older or newer store file beside it fails); answers the last entry's number.
fn apply_unapplied(conn: &mut Connection, bytes: &[u8], applied: u64, identity: &[u8]) -> Result<u64> {
    let tx = conn.transaction().map_err(sqlite_error)?;
    let mut last = applied;
    for (number, body) in Entries::new(bytes, identity) {
        if number <= applied {
            continue;
        }
        if number != last + 1 {
            return Err(StoreError::Corrupt("a gap in the redo log".into()));
        }
        apply(&tx, &body)?;
        last = number;
    }
    if last > applied {
        mark(&tx, last)?;
        tx.commit().map_err(sqlite_error)?;
    }
    Ok(last)
}

/// The log's whole entries in order, each with its statements' whole texts, up to the first torn
/// or garbled one (as SQLite's own WAL ends at its first frame whose checksum fails) or the first
/// that does not follow the one before it; decoded one at a time, so no more than one entry is
/// held whole.
struct Entries<'a> {
    bytes: &'a [u8],
    identity: &'a [u8],
    known: Vec<String>,
    /// The number of the entry read last.
    last: Option<u64>,
}

impl<'a> Entries<'a> {
    fn new(bytes: &'a [u8], identity: &'a [u8]) -> Entries<'a> {
        Entries {
            bytes,
            identity,
            known: Vec::new(),
            last: None,
        }
    }
}

impl Iterator for Entries<'_> {
    type Item = (u64, Vec<u8>);

    fn next(&mut self) -> Option<(u64, Vec<u8>)> {
        let (len, rest) = take_u32(self.bytes)?;
        let len = len as usize;
        if len < 16 || rest.len() < len {
            return None;
        }
        let (entry, after) = rest.split_at(len);
        let (number, body) = entry[..len - 8].split_at(8);
        let number = u64::from_le_bytes(number.try_into().ok()?);
        // An entry that does not follow the one before it is an earlier round's (see the top).
        if self.last.is_some_and(|last| number != last + 1)
            || !checks_out(self.identity, number, body, &entry[len - 8..])
        {
            return None;
        }
        let whole = expanded(body, &mut self.known)?;
        (self.bytes, self.last) = (after, Some(number));
        Some((number, whole))
    }
}

/// Whether a log's bytes begin with an entry (whole or torn): an emptied log begins with a zero
/// length, and what follows it is covered by the store's mark, on disk.
fn holds_entries(bytes: &[u8]) -> bool {
    take_u32(bytes).is_some_and(|(len, _)| len != 0)
}

/// Makes the log [`PREALLOCATED`] bytes of zeros, on disk with its size: written over in place, so
/// an existing log needs no new room.
///
/// The zeros go a page at a time into a page cache that holds none of the log. Linux sizes a file's
/// cached pages (its folios) by the write or the read-ahead that brings them in, and a small write
/// into a large one walks every block of it: entries written over one 4 MiB write's folios, or
/// over the read-ahead of the log read at open, cost the store thread up to 6 µs a call more in the
/// kernel (`ext4_block_write_begin`, `block_commit_write`; docs/performance.md, tenth pass). What
/// the read at open cached is synced first, so it is clean and can be dropped; should the kernel
/// keep some of it, the log only writes slower.
fn reset(file: &File) -> std::io::Result<()> {
    file.sync_data()?;
    // Advice only: a filesystem that takes none still gets its zeros.
    #[cfg(target_os = "linux")]
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
    // A page at a time, so no cached page of the log starts larger.
    let page = vec![0; rustix::param::page_size()];
    for at in (0..PREALLOCATED).step_by(page.len()) {
        file.write_all_at(&page, at)?;
    }
    file.set_len(PREALLOCATED)?;
    file.sync_all()
}

/// Opens (creating owner-only) the log, never through a link, and refuses anything but a regular
/// file of this user's that no one else may read.
fn open_private(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| redo_error("open", &e))?;
    let meta = file.metadata().map_err(|e| redo_error("inspect", &e))?;
    let ours = meta.uid() == rustix::process::geteuid().as_raw();
    if !meta.is_file() || !ours || meta.mode() & 0o077 != 0 {
        return Err(StoreError::Backend(format!(
            "{} must be a regular file of this user's that only it can read",
            path.display()
        )));
    }
    // Its name survives a power loss with what is appended to it.
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| redo_error("sync the directory of", &e))?;
    }
    Ok(file)
}

fn apply(conn: &Connection, body: &[u8]) -> Result<()> {
    let mut rest = body;
    while !rest.is_empty() {
        let (sql, args, after) = decode_statement(rest).ok_or_else(|| StoreError::Corrupt("a redo entry".into()))?;
        let mut stmt = conn.prepare_cached(sql).map_err(replay_error)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args)).map_err(replay_error)?;
        while rows.next().map_err(replay_error)?.is_some() {}
        rest = after;
    }
    Ok(())
}

/// A statement that cannot run on this store (a constraint, a table or column it lacks) says the
/// log is not this store's; anything else (busy, full, an I/O error) is the store's trouble.
fn replay_error(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{ConstraintViolation, Unknown};
    match e.sqlite_error_code() {
        Some(ConstraintViolation | Unknown) => StoreError::Corrupt("a redo entry does not apply".into()),
        _ => sqlite_error(e),
    }
}

fn decode_statement(bytes: &[u8]) -> Option<(&str, Vec<Owned>, &[u8])> {
    let (sql, rest) = take_bytes(bytes)?;
    let (args, rest) = take_args(rest)?;
    Some((std::str::from_utf8(sql).ok()?, args, rest))
}

fn take_args(bytes: &[u8]) -> Option<(Vec<Owned>, &[u8])> {
    let (count, mut rest) = bytes.split_first_chunk::<2>()?;
    let count = u16::from_le_bytes(*count) as usize;
    // Each argument takes a byte at least: a count the bytes cannot hold allocates nothing.
    let mut args = Vec::with_capacity(count.min(rest.len()));
    for _ in 0..count {
        let (tag, after) = rest.split_first()?;
        let (arg, after) = match tag {
            0 => (Owned::Null, after),
            1 => {
                let (n, after) = after.split_first_chunk::<8>()?;
                (Owned::Integer(i64::from_le_bytes(*n)), after)
            }
            2 => {
                let (text, after) = take_bytes(after)?;
                (Owned::Text(std::str::from_utf8(text).ok()?.to_owned()), after)
            }
            3 => {
                let (bytes, after) = take_bytes(after)?;
                (Owned::Blob(bytes.to_vec()), after)
            }
            _ => return None,
        };
        args.push(arg);
        rest = after;
    }
    Some((args, rest))
}

fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (n, rest) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*n), rest))
}

fn take_bytes(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = take_u32(bytes)?;
    (rest.len() >= len as usize).then(|| rest.split_at(len as usize))
}

/// How far the log is applied and the store's identity, or `None` on a store from before the log.
fn applied_mark(conn: &Connection) -> Result<Option<(i64, Vec<u8>)>> {
    let kept: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'redo_applied'",
            [],
            |r| r.get(0),
        )
        .map_err(sqlite_error)?;
    if !kept {
        return Ok(None);
    }
    conn.query_row("SELECT through, identity FROM redo_applied", [], |r| {
        Ok(Some((r.get(0)?, r.get(1)?)))
    })
    .map_err(sqlite_error)
}

fn mark(conn: &Connection, through: u64) -> Result<()> {
    conn.execute("UPDATE redo_applied SET through = ?1", [through as i64])
        .map(drop)
        .map_err(sqlite_error)
}

/// Puts the commit that applied the log on disk before the log is emptied.
/// The store's WAL file, for syncing it.
pub fn open_wal(db: &Path) -> Result<File> {
    File::open(format!("{}-wal", db.display())).map_err(|e| StoreError::Wal(e.to_string()))
}

fn sync_wal(wal: &File) -> Result<()> {
    wal.sync_data().map_err(|e| StoreError::Wal(e.to_string()))
}

/// The log's statements fail on this store: not the file they were written for.
fn misfit(log: &Path) -> StoreError {
    StoreError::Corrupt(format!(
        "the redo log {} does not apply to this store (was the store file replaced?); \
         move the log aside to open the store without what it holds",
        log.display()
    ))
}

fn redo_error(what: &str, e: &std::io::Error) -> StoreError {
    StoreError::Backend(format!("{what} the store's redo log: {e}"))
}

mod check;
mod repeats;
mod statements;

use check::{check, checks_out};
pub use statements::Statements;
#[cfg(test)]
mod tests;
