//! The leases the write connection read, kept until what a lease is made of changes.
//!
//! Every toolbelt call reads its token's lease first: the token, its execution, its Work with its
//! keys, and the execution's cause, joined by their text ids (a fifth of the store thread's time
//! at 32 executions). Between two calls of one execution those rows rarely change. SQLite tells the
//! connection of every row its statements change ([`rusqlite::Connection::update_hook`]); a change
//! to any row of the tables a lease is read from forgets every kept lease, so a revocation, a
//! lease's renewal or end, or a Work's new state is read again by the next call. (A trigger that
//! does nothing keeps SQLite from deleting a whole watched table without telling the hook.) The
//! cause is an event, and events are never changed once written nor written
//! after the execution that continues from them, so it needs no watching.
//!
//! A rollback changes rows without telling the hook: the writer forgets what it kept whenever a
//! member fails (its savepoint rolled back, or the transaction it wrote in) and whenever a
//! transaction ends (a commit, or a rollback), so an idle store keeps none. Only the write connection keeps leases; a
//! reader connection reads its own snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::Connection;

use conduit_store::TokenLease;

use crate::{sqlite_error, Result};

/// The tables a lease is read from whose rows may change (`token_lease_by_digest`); the cause is an
/// event, and events are never changed.
pub const WATCHED: [&str; 4] = ["tokens", "executions", "work", "work_keys"];

/// The most leases kept: one an execution, for as many executions as a daemon runs at once (a
/// transaction holds at most 1,024 calls anyway).
const MOST: usize = 4096;

/// Leases by their token's digest, as read since the last change to what they are made of.
pub struct KeptLeases {
    /// Rows changed in the watched tables, counted by the connection's update hook.
    changes: Arc<AtomicU64>,
    /// The count the kept leases were read at.
    read_at: u64,
    leases: HashMap<[u8; 32], TokenLease>,
}

impl KeptLeases {
    /// Starts counting the changes `conn`'s statements make to the watched tables. SQLite deletes
    /// a whole table without calling the update hook (its truncate optimization) unless the table
    /// has a trigger, so each watched table gets one on this connection that does nothing: a
    /// `DELETE` without `WHERE` then deletes row by row, each row reported.
    pub fn watching(conn: &Connection) -> Result<KeptLeases> {
        for table in WATCHED {
            conn.execute_batch(&format!(
                "CREATE TEMP TRIGGER IF NOT EXISTS kept_leases_{table} AFTER DELETE ON main.{table} \
                 BEGIN SELECT 1; END"
            ))
            .map_err(sqlite_error)?;
        }
        let changes = Arc::new(AtomicU64::new(0));
        let counted = changes.clone();
        conn.update_hook(Some(move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
            if WATCHED.contains(&table) {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }));
        Ok(KeptLeases {
            changes,
            read_at: 0,
            leases: HashMap::new(),
        })
    }

    /// The lease of the token with `digest`, if kept and nothing it is made of changed since.
    pub fn get(&mut self, digest: &[u8; 32]) -> Option<TokenLease> {
        let now = self.changes.load(Ordering::SeqCst);
        if now != self.read_at {
            self.leases.clear();
            self.read_at = now;
        }
        self.leases.get(digest).cloned()
    }

    /// Keeps `lease`, read just now, unless a watched row changed since the last [`KeptLeases::get`].
    pub fn keep(&mut self, digest: &[u8; 32], lease: &TokenLease) {
        if self.changes.load(Ordering::SeqCst) != self.read_at {
            return;
        }
        if self.leases.len() >= MOST {
            self.leases.clear();
        }
        self.leases.insert(*digest, lease.clone());
    }

    /// Forgets every kept lease, and the room they took: rows may have changed without the hook's
    /// knowing (a rollback), or the transaction they were read in ended.
    pub fn forget(&mut self) {
        self.leases = HashMap::new();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use conduit_store::testing::token;

    use super::*;

    fn migrated() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::migrations::migrate(&mut conn).unwrap();
        conn
    }

    /// SQLite deletes a whole table without calling the update hook (its truncate optimization)
    /// unless the table has a trigger: the watched tables' do-nothing triggers make it report each
    /// row.
    #[test]
    fn a_table_deleted_whole_is_reported_row_by_row() {
        let conn = migrated();
        let mut leases = KeptLeases::watching(&conn).unwrap();
        conn.execute_batch(&insert_token()).unwrap();
        let (digest, _) = kept(&mut leases);
        assert_eq!(conn.execute("DELETE FROM tokens", []).unwrap(), 1);
        assert!(leases.get(&digest).is_none(), "forgotten with the table's rows");

        let bare = migrated();
        let counted = Arc::new(AtomicU64::new(0));
        let count = counted.clone();
        bare.update_hook(Some(move |_: rusqlite::hooks::Action, _: &str, _: &str, _: i64| {
            count.fetch_add(1, Ordering::SeqCst);
        }));
        bare.execute_batch(&insert_token()).unwrap();
        assert_eq!(bare.execute("DELETE FROM tokens", []).unwrap(), 1);
        assert_eq!(
            counted.load(Ordering::SeqCst),
            1,
            "the control: without a trigger only the insert is seen"
        );
    }

    /// A call's own rows (its events, its quota charge in a table without rowids) leave the leases
    /// kept: they are what the next call of every execution reads again.
    #[test]
    fn writes_to_other_tables_leave_the_leases_kept() {
        let conn = migrated();
        let mut leases = KeptLeases::watching(&conn).unwrap();
        let (digest, _) = kept(&mut leases);
        conn.execute_batch(
            "INSERT INTO work_usage (work_id, stored_bytes) VALUES ('w1', 10) \
             ON CONFLICT (work_id) DO UPDATE SET stored_bytes = stored_bytes + 10; \
             INSERT INTO operator_actions (id, at, principal, route, path, status, detail) \
             VALUES ('a1', 1, 'p', 'r', '/', 200, '{}')",
        )
        .unwrap();
        assert!(leases.get(&digest).is_some());
        conn.execute_batch(&insert_token()).unwrap();
        assert!(leases.get(&digest).is_none(), "the control: a watched table's change");
    }

    /// A lease kept in `leases`, by its digest.
    pub(crate) fn kept(leases: &mut KeptLeases) -> ([u8; 32], TokenLease) {
        let lease = TokenLease {
            token: std::sync::Arc::new(token(1, "x1")),
            execution: None,
            work: None,
            cause: None,
        };
        let digest = lease.token.digest;
        assert!(leases.get(&digest).is_none());
        leases.keep(&digest, &lease);
        assert!(leases.get(&digest).is_some(), "kept");
        (digest, lease)
    }

    /// A row of `tokens`, for a table to delete.
    pub(crate) fn insert_token() -> String {
        "INSERT INTO tokens (id, digest, execution_id, work_id, scope, binding, epoch, owner, generation, \
         operations, issued_at, expires_at) VALUES ('t9', x'09', 'x9', 'w9', 's', 'b', 1, 'i', 1, '[]', 1, 2)"
            .to_owned()
    }

    /// SQLite's update hook is not called for tables without rowids: a watched table made one would
    /// keep leases past their changes.
    #[test]
    fn every_watched_table_has_rowids_so_its_changes_reach_the_hook() {
        let conn = migrated();
        let without_rowid = |table: &str| -> bool {
            conn.query_row("SELECT wr FROM pragma_table_list WHERE name = ?1", [table], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
                == 1
        };
        for table in WATCHED {
            assert!(!without_rowid(table), "{table}");
        }
        assert!(without_rowid("work_usage"), "the control: a table without rowids");
    }
}
