//! The secrets resolver: turns a reference (parsed by [`conduit_config::Reference`], the parser
//! validation shares) into its value at the moment a consumer needs it, and resolves an attempt's
//! secrets ([`attempt`]).
//!
//! Every resolution reads its source afresh: nothing is cached. The resolver does I/O (files, the
//! keyring, child processes) and blocks; call it from a blocking thread, never inside a store
//! transaction.
//!
//! Errors carry stable codes only ([`SecretError::code`]); no message, `Display` or `Debug` output
//! contains a value, the reference's text after its scheme, or a backend's error text.

mod attempt;
mod book;
mod cmd;
mod env;
mod error;
mod file;
mod keyring;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use conduit_config::{Reference, ReferenceError};

pub use attempt::{resolve_for, Unresolved};
pub use book::{learn, BOOK_FILE};
pub use cmd::{CMD_DEADLINE, CMD_OUTPUT_LIMIT, CMD_PATH};
pub use env::{EnvSource, ProcessEnv};
pub use error::SecretError;
pub use file::{keys as file_keys, write_key as write_file_key, MAX_SECRETS_FILE_BYTES};
pub use keyring::{
    remove as remove_from_keyring, store as store_in_keyring, KeyringBackend, KeyringUnavailable, SystemKeyring,
};

/// Resolutions that may run at once. A `cmd:` may take seconds on a thread of the runtime's blocking
/// pool, which the store's transactions share: a burst of resolutions waits here instead of taking
/// every thread the store needs.
static RESOLVING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// Runs `resolve` (a resolution, or several) on the blocking pool, at most four at a time.
pub async fn off_runtime<T: Send + 'static>(resolve: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let _lane = RESOLVING.acquire().await.ok()?;
    tokio::task::spawn_blocking(resolve).await.ok()
}

/// A resolved secret value. `Debug` and `Display` redact it; only [`Secret::expose`] reveals it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

fn parse(reference: &str) -> Result<Reference<'_>, SecretError> {
    Reference::parse(reference).map_err(|e| match e {
        ReferenceError::UnsupportedScheme => SecretError::UnsupportedScheme,
        ReferenceError::Invalid => SecretError::InvalidReference,
    })
}

/// Resolves secret references. Cheap to clone; safe to share between threads.
#[derive(Clone)]
pub struct Resolver {
    secrets_file: PathBuf,
    keyring: Arc<dyn KeyringBackend>,
    env: Arc<dyn EnvSource>,
    cmd_deadline: Duration,
}

impl Resolver {
    /// A resolver reading `file:` keys from `secrets_file`, `keyring:` entries from `keyring`, and
    /// `env:` variables from the daemon's own environment, with the 10-second `cmd:` deadline.
    pub fn new(secrets_file: PathBuf, keyring: Arc<dyn KeyringBackend>) -> Resolver {
        Resolver {
            secrets_file,
            keyring,
            env: Arc::new(ProcessEnv),
            cmd_deadline: CMD_DEADLINE,
        }
    }

    /// The daemon's resolver: `file:` keys from the state directory's `private/secrets.json`, and
    /// the system keyring.
    pub fn of_state(state: &crate::StateDir) -> Resolver {
        Resolver::new(state.private_dir().join("secrets.json"), Arc::new(SystemKeyring))
    }

    /// Reads `env:` variables, and the `HOME` a `cmd:` receives, from `env` instead.
    pub fn with_env(mut self, env: Arc<dyn EnvSource>) -> Resolver {
        self.env = env;
        self
    }

    /// Replaces the `cmd:` deadline (tests use a short one).
    pub fn with_cmd_deadline(mut self, deadline: Duration) -> Resolver {
        self.cmd_deadline = deadline;
        self
    }

    /// What to do about `error`, naming this resolver's secrets file where that is at fault.
    pub fn remedy(&self, error: SecretError) -> String {
        error.remedy_at(&self.secrets_file)
    }

    /// The value `reference` names, read now. A sealed reference is first looked up in the
    /// reference book beside the secrets file, and must stand for one that is not sealed.
    pub fn resolve(&self, reference: &str) -> Result<Secret, SecretError> {
        match parse(reference)? {
            Reference::Sealed(digest) => {
                let given = book::lookup(&self.secrets_file.with_file_name(BOOK_FILE), digest)?;
                self.read(parse(&given)?)
            }
            reference => self.read(reference),
        }
    }

    fn read(&self, reference: Reference<'_>) -> Result<Secret, SecretError> {
        let value = match reference {
            Reference::Keyring { service, account } => self.keyring(service, account)?,
            Reference::File(key) => file::lookup(&self.secrets_file, key)?,
            Reference::Env(name) => self.env_var(name)?,
            Reference::Cmd(command) => self.command(command)?,
            Reference::Sealed(_) => return Err(SecretError::InvalidReference),
        };
        checked(value)
    }

    fn keyring(&self, service: &str, account: &str) -> Result<String, SecretError> {
        match self.keyring.get(service, account) {
            Ok(Some(value)) => Ok(value),
            Ok(None) => Err(SecretError::NotFound),
            Err(KeyringUnavailable) => Err(SecretError::KeyringUnavailable),
        }
    }

    fn env_var(&self, name: &str) -> Result<String, SecretError> {
        let value = self.env.var(name).ok_or(SecretError::EnvUnset)?;
        value.into_string().map_err(|_| SecretError::InvalidValue)
    }

    fn command(&self, command: &str) -> Result<String, SecretError> {
        let output = cmd::run(command, self.env.var("HOME"), self.cmd_deadline)?;
        String::from_utf8(cmd::trim_one_newline(output)).map_err(|_| SecretError::InvalidValue)
    }
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("secrets_file", &self.secrets_file)
            .field("cmd_deadline", &self.cmd_deadline)
            .finish_non_exhaustive()
    }
}

/// Every scheme refuses an empty value and one that could not be passed on as an environment value.
fn checked(value: String) -> Result<Secret, SecretError> {
    if value.is_empty() {
        Err(SecretError::EmptyValue)
    } else if value.contains('\0') {
        Err(SecretError::InvalidValue)
    } else {
        Ok(Secret(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_keep_their_codes() {
        assert_eq!(parse("vault:x").unwrap_err().code(), "unsupported_scheme");
        assert_eq!(parse("env:1BAD").unwrap_err().code(), "invalid_reference");
    }

    #[test]
    fn secrets_redact() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert_eq!(format!("{secret}"), "***");
        assert_eq!(secret.expose(), "hunter2");
    }

    #[test]
    fn values_must_be_non_empty_and_nul_free() {
        assert_eq!(checked(String::new()), Err(SecretError::EmptyValue));
        assert_eq!(checked("a\0b".to_owned()), Err(SecretError::InvalidValue));
        assert_eq!(
            checked("a".to_owned()).map(|s| s.expose().to_owned()),
            Ok("a".to_owned())
        );
    }
}
