//! Configuration version 1: strict parsing, validation with diagnostics, and the snapshot the rest of
//! the host reads.
//!
//! Architecture invariant: this crate does no I/O. Callers hand it bytes and get back either a
//! [`Snapshot`] or every independent [`Diagnostic`]; a diagnostic names a JSON pointer and a code and
//! never echoes a value from the file.
#![forbid(unsafe_code)]

mod default;
mod diagnostic;
mod model;
mod snapshot;
mod strict;
mod validate;

pub use default::default_config_json;
pub use diagnostic::{Diagnostic, Severity};
pub use model::{BindingConfig, Config, Limits, RouteConfig, ScopeConfig, ShellConfig};
pub use snapshot::{CurrentConfig, Snapshot};
pub use validate::{parse, parse_with, Registry};

/// Largest configuration file accepted.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
