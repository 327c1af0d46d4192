//! The installed copies under `<state>/packages/`: reading a package's manifest safely, and the
//! manifests of everything installed.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use conduit_core::{ErrorCode, Refusal};
use conduit_packages::{Manifest, MANIFEST_FILE};
use conduit_toolbelt::registry::{Handler, HandlerCall, HandlerFuture, OperationError};

use crate::files::{self, Links};

/// The largest manifest read.
const MAX_MANIFEST: u64 = 1024 * 1024;

/// The manifests of the installed copies under `dir` (`<state>/packages`), by name. A copy whose
/// manifest no longer reads is skipped.
pub fn installed_manifests(dir: &Path) -> Vec<Manifest> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut manifests: Vec<Manifest> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| read_manifest(&e.path()).ok())
        .collect();
    manifests.sort_by(|a, b| a.name.cmp(&b.name));
    manifests
}

/// A package's registration for its names alone (configuration checks, install conflicts).
pub fn names_only(manifest: &Manifest) -> conduit_toolbelt::registry::Registration {
    manifest.registration(Arc::new(NotLoaded))
}

pub(super) fn read_manifest(dir: &Path) -> Result<Manifest, Refusal> {
    let unreadable = || {
        invalid(&format!(
            "no readable {MANIFEST_FILE} (a regular file of at most 1 MiB) in the directory"
        ))
        .with_remedy(format!(
            "install the directory that holds the package's {MANIFEST_FILE} (docs/extensions.md describes it)"
        ))
    };
    let file = open_regular(&dir.join(MANIFEST_FILE)).map_err(|_| unreadable())?;
    let bytes = files::read_bounded(file, MAX_MANIFEST).map_err(|_| unreadable())?;
    if bytes.len() as u64 > MAX_MANIFEST {
        return Err(unreadable());
    }
    parse_manifest(&bytes)
}

/// A manifest's text, parsed and validated: `invalid_manifest` with the pointer.
pub(super) fn parse_manifest(bytes: &[u8]) -> Result<Manifest, Refusal> {
    Manifest::parse(bytes).map_err(refused)
}

/// A manifest about to be installed: parsed, validated, and held to the rules added since
/// packages already installed were (which they keep being served without).
pub(super) fn manifest_to_install(bytes: &[u8]) -> Result<Manifest, Refusal> {
    let manifest = parse_manifest(bytes)?;
    check_to_install(&manifest)?;
    Ok(manifest)
}

/// [`Manifest::check_for_install`], refused as `invalid_manifest`.
pub(super) fn check_to_install(manifest: &Manifest) -> Result<(), Refusal> {
    manifest.check_for_install().map_err(refused)
}

fn refused(invalid: conduit_packages::manifest::Invalid) -> Refusal {
    Refusal::new(ErrorCode::InvalidManifest, invalid.message).with_field("pointer", invalid.pointer.into())
}

/// Opens a regular file without following a symbolic link (and without blocking on a FIFO).
pub(super) fn open_regular(path: &Path) -> std::io::Result<fs::File> {
    files::open_regular(path, Links::Refuse)
}

pub(super) fn invalid(message: &str) -> Refusal {
    Refusal::new(ErrorCode::InvalidManifest, message)
}

/// The handler of a registration made only to check names: never called.
struct NotLoaded;

impl Handler for NotLoaded {
    fn call(&self, _: HandlerCall) -> HandlerFuture {
        Box::pin(async { Err(OperationError::new("operation_failed", "the package is not loaded")) })
    }
}
