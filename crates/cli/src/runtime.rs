//! The async runtimes the command lines block on; failing to build one is a local failure.

use tokio::runtime::{Builder, Runtime};

use crate::report::Failure;

/// The runtime `builder` describes, with every driver enabled.
pub fn build(builder: &mut Builder) -> Result<Runtime, Failure> {
    builder
        .enable_all()
        .build()
        .map_err(|e| Failure::Local(format!("cannot start the async runtime: {e}")))
}
