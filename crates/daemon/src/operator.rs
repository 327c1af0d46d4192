//! The owner's operator credential, bootstrapped under the state lock.

use std::fs;

use conduit_core::credential::{owner_at_start, OwnerAtStart, OWNER, RECOVERY};
use conduit_core::{OperatorRecord, Role, Timestamp};
use conduit_store::{new_id, Store};
use conduit_toolbelt::token::{digest, generate};

use crate::state::{write_private_file, StateDir};
use crate::DaemonError;

/// Ensures `private/operator.token` holds the owner's live credential (see [`owner_at_start`]): keeps
/// a token file whose digest is the owner's active credential; otherwise issues a new one, revoking
/// the old, and writes it (0600) — unless the store is shared and another daemon's owner credential
/// is active. Only the owner's credential is looked at: a named operator's never stands in for it.
pub fn bootstrap_owner(
    state: &StateDir,
    store: &dyn Store,
    now: Timestamp,
    shared_store: bool,
) -> Result<(), DaemonError> {
    let path = state.operator_token();
    let existing = fs::read_to_string(&path).ok().map(|t| t.trim().to_owned());
    let active = store.read(|tx| tx.active_operator(OWNER))?;
    let file_is_active = matches!((&existing, &active), (Some(token), Some(active)) if digest(token) == active.digest);
    match owner_at_start(file_is_active, active.is_some(), shared_store) {
        OwnerAtStart::Keep => Ok(()),
        OwnerAtStart::Issue => issue_owner(state, store, now),
        OwnerAtStart::LeaveToOperator => {
            tracing::warn!(
                path = %path.display(),
                "the shared store's owner credential is another daemon's; copy its private/operator.token here, \
                 or stop this daemon and run `open-conduit auth recover --store URL` to issue a new one (revoking that one)"
            );
            Ok(())
        }
    }
}

/// Issues the owner a new credential, revoking the active one, and writes it to
/// `private/operator.token` (0600): the bootstrap, and the locked recovery after a lost rotation.
pub fn issue_owner(state: &StateDir, store: &dyn Store, now: Timestamp) -> Result<(), DaemonError> {
    let path = state.operator_token();
    let active = store.read(|tx| tx.active_operator(OWNER))?;
    let token = generate();
    let record = OperatorRecord {
        id: new_id(),
        name: OWNER.to_owned(),
        role: Role::Admin,
        digest: digest(&token),
        created_at: now,
        revoked_at: None,
        revoked_by: None,
    };
    store.write(|tx| {
        if let Some(old) = &active {
            tx.revoke_operator(&old.id, now, RECOVERY)?;
        }
        tx.insert_operator(&record)
    })?;
    write_private_file(&path, format!("{token}\n").as_bytes())?;
    tracing::info!(path = %path.display(), "issued the owner's operator credential");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_store_sqlite::SqliteStore;

    /// A second daemon on a shared store, its token file empty, leaves the first one's owner
    /// credential live; on a store of its own the same start would reissue it (the control).
    #[test]
    fn a_daemon_joining_a_shared_store_does_not_revoke_the_owner_credential() {
        for (shared, first_still_live) in [(true, true), (false, false)] {
            let dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
            let store: Box<dyn Store> = Box::new(SqliteStore::open(&dirs[2].path().join("store.db")).unwrap());
            let [first, second] = [&dirs[0], &dirs[1]].map(|d| StateDir::lock(&d.path().join("state")).unwrap());
            bootstrap_owner(&first, &*store, Timestamp(1), shared).unwrap();
            let token = fs::read_to_string(first.operator_token()).unwrap();
            bootstrap_owner(&second, &*store, Timestamp(2), shared).unwrap();
            let active = store.read(|tx| tx.active_operator(OWNER)).unwrap().unwrap();
            assert_eq!(
                active.digest == digest(token.trim()),
                first_still_live,
                "shared={shared}"
            );
            assert_eq!(second.operator_token().exists(), !shared, "shared={shared}");
        }
    }
}
