//! Reading a file the operator names or the daemon keeps: opened without blocking on a FIFO,
//! judged from the open handle (a regular file only, so nothing can be swapped in between), and
//! read no further than a bound.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use conduit_config::{Diagnostic, MAX_CONFIG_BYTES};
use rustix::fs::{Mode, OFlags};

/// Whether a final symbolic link is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    Follow,
    Refuse,
}

/// Opens `path` read-only as a regular file. A directory, FIFO, socket or device is
/// `InvalidInput`; with [`Links::Refuse`] so is a final symbolic link.
pub fn open_regular(path: &Path, links: Links) -> std::io::Result<File> {
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if links == Links::Refuse {
        flags |= OFlags::NOFOLLOW;
    }
    let file = File::from(rustix::fs::open(path, flags, Mode::empty())?);
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(std::io::ErrorKind::InvalidInput.into())
    }
}

/// Reads at most `max + 1` bytes, so a caller can tell a file over `max` from one at it.
pub fn read_bounded(file: File, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A configuration file's bytes, at most one past the 1 MiB limit (validation refuses that as
/// `too_large`); `None` when there is no such file. Anything else that is no readable regular
/// file is `config_unreadable`.
pub fn read_config_file(path: &Path) -> Result<Option<Vec<u8>>, Diagnostic> {
    let read = open_regular(path, Links::Follow).and_then(|file| read_bounded(file, MAX_CONFIG_BYTES as u64));
    match read {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(config_unreadable(path, e)),
    }
}

fn config_unreadable(path: &Path, e: std::io::Error) -> Diagnostic {
    let why = match e.kind() {
        std::io::ErrorKind::InvalidInput => "it is not a regular file".to_owned(),
        kind => kind.to_string(),
    };
    Diagnostic::error(
        "",
        "config_unreadable",
        format!("cannot read {}: {why}", path.display()),
        "name a regular file you can read",
    )
}
