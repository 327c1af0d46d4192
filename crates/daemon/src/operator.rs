//! The owner's operator credential, bootstrapped under the state lock.

use std::fs;

use conduit_core::credential::{OWNER, RECOVERY};
use conduit_core::{OperatorRecord, Role, Timestamp};
use conduit_store::{new_id, Store};
use conduit_toolbelt::token::{digest, generate};

use crate::state::{write_private_file, StateDir};
use crate::DaemonError;

/// Ensures `private/operator.token` holds the owner's live credential. Keeps a token file whose digest
/// is the owner's active credential; otherwise issues a new one, revoking the old, and writes it (0600).
/// Only the owner's credential is looked at: a named operator's never stands in for it.
pub fn bootstrap_owner(state: &StateDir, store: &dyn Store, now: Timestamp) -> Result<(), DaemonError> {
    let path = state.operator_token();
    let existing = fs::read_to_string(&path).ok().map(|t| t.trim().to_owned());
    let active = store.read(|tx| tx.active_operator(OWNER))?;
    if let (Some(token), Some(active)) = (&existing, &active) {
        if digest(token) == active.digest {
            return Ok(());
        }
    }
    issue_owner(state, store, now)
}

/// The key that authenticates list cursors: made once, kept owner-only in `private/cursor.key`, so
/// cursors stay valid across a restart.
pub fn cursor_key(state: &StateDir) -> Result<[u8; 32], DaemonError> {
    let path = state.private_dir().join("cursor.key");
    let secret = match fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => text,
        _ => {
            let fresh = generate();
            write_private_file(&path, fresh.as_bytes())?;
            fresh
        }
    };
    Ok(digest(secret.trim()))
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
