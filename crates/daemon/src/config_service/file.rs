//! The configuration file: read at start, saved by an apply with a `.last-good` backup, and put back
//! when the apply is not published.

use std::path::{Path, PathBuf};

use conduit_config::{parse_with, Registry, Snapshot};

use crate::files::read_config_file;
use crate::state::write_private_file;
use crate::DaemonError;

/// The config file's snapshot if the file exists; a file that does not validate stops the start.
pub(super) fn read_file(file: &Path, registry: &Registry) -> Result<Option<Snapshot>, DaemonError> {
    match read_config_file(file).map_err(|unreadable| DaemonError::Config(vec![unreadable]))? {
        Some(bytes) => parse_with(&bytes, registry).map(Some).map_err(DaemonError::Config),
        None => Ok(None),
    }
}

/// A configuration file an apply saved, with what it replaced, until the apply is published.
pub(super) struct SavedFile<'a> {
    file: &'a Path,
    /// The file's text before, and its backup's: what goes back if the apply is not published.
    before: (Option<Vec<u8>>, Option<Vec<u8>>),
}

impl SavedFile<'_> {
    /// Saves the configuration file atomically (same-directory 0600 temporary, fsync, rename,
    /// directory fsync), keeping the file it replaces as `<file>.last-good`.
    pub(super) fn save<'a>(file: &'a Path, text: &str) -> Result<SavedFile<'a>, DaemonError> {
        let before = (std::fs::read(file).ok(), std::fs::read(last_good(file)).ok());
        if let Some(previous) = &before.0 {
            write_private_file(&last_good(file), previous)?;
        }
        write_private_file(file, text.as_bytes())?;
        Ok(SavedFile { file, before })
    }

    /// Puts the file and its backup back as they were (no file where there was none).
    pub(super) fn put_back(self) {
        let (file, backup) = (self.file.to_owned(), last_good(self.file));
        for (path, text) in [(file, self.before.0), (backup, self.before.1)] {
            let restored = match text {
                Some(text) => write_private_file(&path, &text),
                None => std::fs::remove_file(&path)
                    .or_else(ignore_missing)
                    .map_err(|e| DaemonError::io("remove", &path, e)),
            };
            if let Err(e) = restored {
                tracing::warn!(error = %e, "could not put the configuration file back");
            }
        }
    }
}

fn ignore_missing(e: std::io::Error) -> std::io::Result<()> {
    match e.kind() {
        std::io::ErrorKind::NotFound => Ok(()),
        _ => Err(e),
    }
}

/// Where the file a configuration save replaces is kept.
pub fn last_good(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_owned();
    name.push(".last-good");
    file.with_file_name(name)
}
