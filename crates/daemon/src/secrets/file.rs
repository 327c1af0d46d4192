//! `file:<key>`: a key of the owner-only `secrets.json`, a flat JSON object of string values.

use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use rustix::io::Errno;
use serde_json::Value;

use super::SecretError;
use crate::files::{open_regular, read_bounded, Links};

/// Largest `secrets.json` read.
pub const MAX_SECRETS_FILE_BYTES: u64 = 1024 * 1024;

/// The string stored under `key`, read afresh from `path`.
pub(super) fn lookup(path: &Path, key: &str) -> Result<String, SecretError> {
    let bytes = read_private(path)?;
    let Value::Object(mut entries) = parse(&bytes)? else {
        return Err(SecretError::FileInvalid);
    };
    match entries.remove(key) {
        Some(Value::String(value)) => Ok(value),
        _ => Err(SecretError::NotFound),
    }
}

/// Opens without following a final symlink (and without blocking on a FIFO), then checks the open
/// file itself, so what is checked is what is read.
fn read_private(path: &Path) -> Result<Vec<u8>, SecretError> {
    let file = open_regular(path, Links::Refuse).map_err(open_error)?;
    let metadata = file.metadata().map_err(|_| SecretError::FileUnreadable)?;
    if !is_owner_only(&metadata) {
        return Err(SecretError::FileUnsafe);
    }
    let bytes = read_bounded(file, MAX_SECRETS_FILE_BYTES).map_err(|_| SecretError::FileUnreadable)?;
    if bytes.len() as u64 > MAX_SECRETS_FILE_BYTES {
        return Err(SecretError::FileInvalid);
    }
    Ok(bytes)
}

/// A link, a FIFO or any other file that is no regular file is unsafe to read secrets from.
fn open_error(e: std::io::Error) -> SecretError {
    match e.kind() {
        std::io::ErrorKind::NotFound => SecretError::NotFound,
        std::io::ErrorKind::InvalidInput => SecretError::FileUnsafe,
        _ if e.raw_os_error() == Some(Errno::LOOP.raw_os_error()) => SecretError::FileUnsafe,
        _ => SecretError::FileUnreadable,
    }
}

/// The keys `path` holds (never their values); none when there is no file.
pub fn keys(path: &Path) -> Result<Vec<String>, SecretError> {
    match read_private(path) {
        Ok(bytes) => Ok(entries(&bytes)?.keys().cloned().collect()),
        Err(SecretError::NotFound) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Sets `key` to `value`, or with `None` removes it, in the secrets file at `path`, which is
/// created owner-only and replaced whole (so the daemon reads the old file or the new one). An
/// exclusive lock on a file beside it keeps two writers from losing each other's keys. Answers
/// whether the key was there before.
pub fn write_key(path: &Path, key: &str, value: Option<&str>) -> Result<bool, String> {
    let why = |e: SecretError| format!("{}; {}", e, e.remedy_at(path));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path.with_extension("lock"))
        .and_then(|file| file.lock().map(|()| file))
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    let mut entries = match read_private(path) {
        Ok(bytes) => entries(&bytes).map_err(why)?,
        Err(SecretError::NotFound) => serde_json::Map::new(),
        Err(e) => return Err(why(e)),
    };
    let had = match value {
        Some(value) => entries.insert(key.to_owned(), Value::String(value.to_owned())),
        None => entries.remove(key),
    };
    let text = serde_json::to_vec_pretty(&entries).map_err(|e| e.to_string())?;
    crate::state::write_private_file(path, &text).map_err(|e| e.to_string())?;
    drop(lock);
    Ok(had.is_some())
}

fn entries(bytes: &[u8]) -> Result<serde_json::Map<String, Value>, SecretError> {
    match parse(bytes)? {
        Value::Object(entries) => Ok(entries),
        _ => Err(SecretError::FileInvalid),
    }
}

/// A regular file owned by the effective user, with no group or other permission bits.
fn is_owner_only(metadata: &Metadata) -> bool {
    metadata.file_type().is_file()
        && metadata.uid() == rustix::process::geteuid().as_raw()
        && metadata.mode() & 0o077 == 0
}

/// Strict JSON (no duplicate keys, no nulls) whose top level is an object of strings only.
fn parse(bytes: &[u8]) -> Result<Value, SecretError> {
    let (value, problems) = conduit_config::read_strict_json(bytes).map_err(|_| SecretError::FileInvalid)?;
    let flat = value.as_object().is_some_and(|o| o.values().all(Value::is_string));
    if problems.is_empty() && flat {
        Ok(value)
    } else {
        Err(SecretError::FileInvalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_flat_string_objects_parse() {
        assert!(parse(br#"{"a": "x", "b": ""}"#).is_ok());
        assert!(parse(br#"{}"#).is_ok());
        for bad in [
            &br#"{"a": 1}"#[..],
            br#"{"a": {"b": "c"}}"#,
            br#"["a"]"#,
            br#""a""#,
            br#"{"a": null}"#,
        ] {
            assert_eq!(parse(bad), Err(SecretError::FileInvalid));
        }
        assert_eq!(parse(br#"{"a": "x", "a": "y"}"#), Err(SecretError::FileInvalid));
        assert_eq!(parse(b"{not json"), Err(SecretError::FileInvalid));
    }
}
