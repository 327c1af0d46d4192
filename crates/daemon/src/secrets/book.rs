//! The reference book: the secret references this daemon was given (in its configuration file, or
//! in an apply through it), each under its sealed form, kept owner-only in
//! `private/references.json` beside `secrets.json`. A generation read from a shared store names its
//! references only sealed; the book is how this daemon resolves them, without the store ever
//! holding a reference's text.

use std::collections::BTreeMap;
use std::path::Path;

use conduit_config::Snapshot;

use super::{file, SecretError};
use crate::state::write_private_file;
use crate::DaemonError;

/// The book's file name, in the private directory.
pub const BOOK_FILE: &str = "references.json";

/// The reference text the sealed reference `sealed:<digest>` stands for, as this daemon was given
/// it: an entry whose text does not seal to its key is refused, not followed.
pub(super) fn lookup(book: &Path, digest: &str) -> Result<String, SecretError> {
    let sealed = format!("sealed:{digest}");
    match file::lookup(book, &sealed) {
        Ok(given) if conduit_config::seal(&given) == sealed => Ok(given),
        Ok(_) => Err(SecretError::InvalidReference),
        Err(SecretError::NotFound) => Err(SecretError::ReferenceUnknown),
        Err(e) => Err(e),
    }
}

/// Adds the references `snapshot` was written with to the book in `private` (rewritten only when
/// it gains one).
pub fn learn(private: &Path, snapshot: &Snapshot) -> Result<(), DaemonError> {
    let path = private.join(BOOK_FILE);
    let mut book: BTreeMap<String, String> = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            tracing::warn!(file = %path.display(), "the reference book was unreadable; starting it again");
            BTreeMap::new()
        }),
        Err(_) => BTreeMap::new(),
    };
    let known = book.len();
    for (sealed, reference) in snapshot.references() {
        book.entry(sealed).or_insert_with(|| reference.to_owned());
    }
    if book.len() == known {
        return Ok(());
    }
    let text = serde_json::to_vec_pretty(&book).unwrap_or_default();
    write_private_file(&path, &text)
}
