//! `open-conduit artifacts cat`: an artifact's bytes written to stdout as they are, so a binary file
//! stays intact.

use std::io::Write;

use crate::management::{self, Locations};
use crate::report::Failure;

/// Fetches the artifact `id` and writes its content to stdout.
pub fn cat(locations: &Locations, id: &str) -> Result<(), Failure> {
    let path = management::artifact_content_path(id);
    let bytes = locations.connection()?.fetch(&path)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::Local(format!("cannot write to stdout: {e}")))
}
