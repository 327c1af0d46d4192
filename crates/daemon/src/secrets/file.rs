//! `file:<key>`: a key of the owner-only `secrets.json`, a flat JSON object of string values.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use serde_json::Value;

use super::SecretError;

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
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::open(path, flags, Mode::empty()).map_err(open_error)?);
    let metadata = file.metadata().map_err(|_| SecretError::FileUnreadable)?;
    if !is_owner_only(&metadata) {
        return Err(SecretError::FileUnsafe);
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRETS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| SecretError::FileUnreadable)?;
    if bytes.len() as u64 > MAX_SECRETS_FILE_BYTES {
        return Err(SecretError::FileInvalid);
    }
    Ok(bytes)
}

fn open_error(errno: Errno) -> SecretError {
    match errno {
        Errno::NOENT => SecretError::NotFound,
        Errno::LOOP => SecretError::FileUnsafe,
        _ => SecretError::FileUnreadable,
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
