//! Configuration version 1: strict parsing, validation with diagnostics, and the snapshot the rest of
//! the host reads.
//!
//! Architecture invariant: parsing and validation do no I/O. Callers hand them bytes and get back
//! either a [`Snapshot`] or every independent [`Diagnostic`]; a diagnostic names a JSON pointer and a
//! code and never echoes a value from the file. The one edge is [`secrets`], the resolver of secret
//! references, which reads the keyring, a file, the environment or a command's output: call it on a
//! blocking thread, outside any transaction.
#![forbid(unsafe_code)]

mod default;
mod diagnostic;
mod grants;
mod model;
mod rules;
mod sandbox;
pub mod secrets;
mod snapshot;
mod strict;
mod validate;

pub use default::default_config_json;
pub use diagnostic::{Diagnostic, Severity};
pub use grants::{ExecutorCapabilities, Registry};
pub use model::{ApprovalRule, BindingConfig, Config, Limits, RouteConfig, ScopeConfig, ShellConfig};
pub use rules::{secret_env_name, secret_scheme, SECRET_SCHEMES};
pub use sandbox::setting as sandbox_setting;
pub use snapshot::{CurrentConfig, Snapshot};
/// Reads JSON refusing duplicate keys and nulls at any depth (each reported with its pointer).
pub use strict::read as read_strict_json;
pub use validate::{parse, parse_with};

/// Largest configuration file accepted.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
