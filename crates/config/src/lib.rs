//! Configuration version 1: strict parsing, validation with diagnostics, and the snapshot the rest of
//! the host reads.
//!
//! Architecture invariant: parsing and validation do no I/O. Callers hand them bytes and get back
//! either a [`Snapshot`] or every independent [`Diagnostic`]; a diagnostic names a JSON pointer and a
//! code and never echoes a value from the file. Secret references are parsed here ([`Reference`]);
//! resolving them is the daemon's (it reads the keyring, files and commands).
#![forbid(unsafe_code)]

mod default;
mod diagnostic;
mod executor;
mod extensions;
mod field_schemas;
mod grants;
mod model;
mod reference;
mod retry;
mod rules;
mod sandbox;
pub mod schema;
mod shape;
mod snapshot;
mod strict;
mod validate;

pub use default::default_config_json;
pub use diagnostic::{path_pointer, Diagnostic, Severity};
pub use executor::{Agent, Executable, ProcessSettings, GITHUB_HOLD, HOLD_CONDITIONS};
pub use grants::{ExecutorCapabilities, Registry, GRANT_WARNINGS};
pub use model::{
    AgentConfig, ApprovalRule, BindingConfig, Config, ExtensionsConfig, GithubConfig, HoldConfig, Limits, RouteConfig,
    ScopeConfig, ShellConfig, SlackConfig, GITHUB_API, SLACK_API,
};
pub use reference::{is_var_name, seal, Reference, ReferenceError};
pub use retry::RetryConfig;
pub use sandbox::setting as sandbox_setting;
pub use snapshot::{CurrentConfig, Reach, Snapshot};
/// Reads JSON refusing duplicate keys and nulls at any depth (each reported with its pointer).
pub use strict::read as read_strict_json;
pub use validate::{parse, parse_with};

/// Largest configuration file accepted.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
