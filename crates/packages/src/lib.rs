//! Installed packages: the manifest (`open-conduit.json`), the RFC 0076 install gate, and the
//! out-of-process extension protocol's transport.
#![forbid(unsafe_code)]

pub mod gate;
pub mod manifest;
pub mod protocol;

pub use gate::Approval;
pub use manifest::{Invalid, Manifest, MANIFEST_FILE};
