//! The redo log: a read's records, kept safe from a crash before their commit.
//!
//! A [`conduit_store::Mode::Record`] member (a read's audit and call records) need not wait for its
//! batch to commit. Its write statements, with their arguments, are appended to `<store>-redo` in
//! one `write` before it is answered: once that returns, a process crash cannot lose them. The
//! batch commits later, and the same commit sets `redo_applied` to the last entry
//! it holds. Opening the store runs the statements of every entry past that mark again, in order, on
//! the commit they followed, so they make the very rows they made the first time.
//!
//! An entry is `len: u32 | number: u64 | body | check: 8 bytes` (little-endian; `check` is the start
//! of the body's SHA-256 with its number). Its body is statements, each `sql_len: u32 | sql |
//! args: u16 | args`, an argument a tag byte (0 null, 1 integer, 2 text, 3 bytes) and its value. A
//! torn or garbled tail, which only an entry nobody was answered about can leave, ends the log.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rusqlite::types::Value as Owned;
use rusqlite::Connection;
use sha2::{Digest, Sha256};

use conduit_store::StoreError;
use conduit_store_sql::Arg;

use crate::{sqlite_error, Result};

/// Past this many bytes the log is emptied, once a commit that applied it all is on disk.
const EMPTY_PAST: u64 = 1024 * 1024;

/// The write statements one member ran, in order, encoded as an entry's body.
#[derive(Default)]
pub struct Statements {
    body: Vec<u8>,
}

impl Statements {
    pub fn push(&mut self, sql: &str, args: &[Arg<'_>]) {
        put_bytes(&mut self.body, sql.as_bytes());
        self.body.extend_from_slice(&(args.len() as u16).to_le_bytes());
        for arg in args {
            match *arg {
                Arg::Null => self.body.push(0),
                Arg::Int(n) => {
                    self.body.push(1);
                    self.body.extend_from_slice(&n.to_le_bytes());
                }
                Arg::Text(text) => {
                    self.body.push(2);
                    put_bytes(&mut self.body, text.as_bytes());
                }
                Arg::Bytes(bytes) => {
                    self.body.push(3);
                    put_bytes(&mut self.body, bytes);
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The log file, and the entries appended since the last commit.
pub struct RedoLog {
    file: File,
    len: u64,
    next: u64,
    /// Bodies appended since the last commit, in order: run again when that commit fails.
    pending: Vec<Vec<u8>>,
}

impl RedoLog {
    /// Opens the log beside the store at `db`, applies what the store's last commit did not hold,
    /// and empties it.
    pub fn recover(conn: &mut Connection, db: &Path) -> Result<RedoLog> {
        let path = log_path(db);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| redo_error("open", &e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| redo_error("read", &e))?;
        let applied: i64 = conn
            .query_row("SELECT through FROM redo_applied", [], |r| r.get(0))
            .map_err(sqlite_error)?;
        let entries = decode_entries(&bytes);
        let last = entries.last().map_or(applied as u64, |(n, _)| *n).max(applied as u64);
        let unapplied: Vec<_> = entries.into_iter().filter(|(n, _)| *n > applied as u64).collect();
        if !unapplied.is_empty() {
            let tx = conn.transaction().map_err(sqlite_error)?;
            for (_, body) in &unapplied {
                apply(&tx, body)?;
            }
            mark(&tx, last)?;
            tx.commit().map_err(sqlite_error)?;
        }
        if !bytes.is_empty() {
            // What marks the log applied is on disk before the log goes.
            sync_wal(db)?;
        }
        file.set_len(0).map_err(|e| redo_error("empty", &e))?;
        Ok(RedoLog {
            file,
            len: 0,
            next: last + 1,
            pending: Vec::new(),
        })
    }

    /// Appends one member's statements as the next entry; once this returns, a crash cannot lose them.
    pub fn append(&mut self, statements: &Statements) -> std::io::Result<()> {
        let number = self.next;
        let check = check(number, &statements.body);
        let len = (8 + statements.body.len() + check.len()) as u32;
        let mut entry = Vec::with_capacity(4 + len as usize);
        entry.extend_from_slice(&len.to_le_bytes());
        entry.extend_from_slice(&number.to_le_bytes());
        entry.extend_from_slice(&statements.body);
        entry.extend_from_slice(&check);
        self.file.write_all(&entry)?;
        self.len += entry.len() as u64;
        self.next += 1;
        self.pending.push(statements.body.clone());
        Ok(())
    }

    /// Whether entries wait for a commit.
    pub fn holds_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// In the commit's transaction: the mark that says every entry so far is in it.
    pub fn mark_applied(&self, conn: &Connection) -> Result<()> {
        mark(conn, self.next - 1)
    }

    /// After a failed commit: the pending entries again, in the transaction just opened.
    pub fn reapply(&self, conn: &Connection) -> Result<()> {
        self.pending.iter().try_for_each(|body| apply(conn, body))
    }

    /// After a commit that held every pending entry: nothing is pending. Answers whether the log is
    /// long enough to empty once that commit is on disk.
    pub fn committed(&mut self) -> bool {
        self.pending.clear();
        self.len > EMPTY_PAST
    }

    /// Empties the log; call it only once a commit marking every entry is on disk.
    pub fn empty(&mut self) {
        if self.pending.is_empty() && self.file.set_len(0).is_ok() {
            self.len = 0;
        }
    }
}

pub fn log_path(db: &Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-redo");
    name.into()
}

fn check(number: u64, body: &[u8]) -> [u8; 8] {
    let digest = Sha256::new()
        .chain_update(number.to_le_bytes())
        .chain_update(body)
        .finalize();
    let mut check = [0; 8];
    check.copy_from_slice(&digest[..8]);
    check
}

/// The log's whole entries in order, up to the first torn or garbled one.
fn decode_entries(mut bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut entries = Vec::new();
    while let Some((len, rest)) = take_u32(bytes) {
        let len = len as usize;
        if len < 16 || rest.len() < len {
            break;
        }
        let (entry, after) = rest.split_at(len);
        let (number, body) = entry[..len - 8].split_at(8);
        let number = u64::from_le_bytes(number.try_into().unwrap_or_default());
        if check(number, body) != entry[len - 8..] {
            break;
        }
        entries.push((number, body.to_vec()));
        bytes = after;
    }
    entries
}

fn apply(conn: &Connection, body: &[u8]) -> Result<()> {
    let mut rest = body;
    while !rest.is_empty() {
        let (sql, args, after) = decode_statement(rest).ok_or_else(|| StoreError::Corrupt("a redo entry".into()))?;
        let mut stmt = conn.prepare_cached(sql).map_err(sqlite_error)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args)).map_err(sqlite_error)?;
        while rows.next().map_err(sqlite_error)?.is_some() {}
        rest = after;
    }
    Ok(())
}

fn decode_statement(bytes: &[u8]) -> Option<(&str, Vec<Owned>, &[u8])> {
    let (sql, rest) = take_bytes(bytes)?;
    let sql = std::str::from_utf8(sql).ok()?;
    let (count, mut rest) = rest.split_first_chunk::<2>()?;
    let mut args = Vec::with_capacity(u16::from_le_bytes(*count) as usize);
    for _ in 0..u16::from_le_bytes(*count) {
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
    Some((sql, args, rest))
}

fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (n, rest) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*n), rest))
}

fn take_bytes(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = take_u32(bytes)?;
    (rest.len() >= len as usize).then(|| rest.split_at(len as usize))
}

fn mark(conn: &Connection, through: u64) -> Result<()> {
    conn.execute("UPDATE redo_applied SET through = ?1", [through as i64])
        .map(drop)
        .map_err(sqlite_error)
}

/// Puts the commit that applied the log on disk before the log is emptied.
fn sync_wal(db: &Path) -> Result<()> {
    let wal = format!("{}-wal", db.display());
    File::open(&wal)
        .and_then(|f| f.sync_data())
        .map_err(|e| StoreError::Wal(e.to_string()))
}

fn redo_error(what: &str, e: &std::io::Error) -> StoreError {
    StoreError::Backend(format!("{what} the store's redo log: {e}"))
}

#[cfg(test)]
mod tests;
