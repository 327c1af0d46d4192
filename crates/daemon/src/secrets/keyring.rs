//! `keyring:<service>/<account>`: the backend trait and the system keyring.

/// The keyring could not be asked. Carries nothing of the backend's own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the keyring is unavailable")]
pub struct KeyringUnavailable;

/// A keyring the resolver reads from. `Ok(None)` means the entry does not exist.
pub trait KeyringBackend: Send + Sync {
    fn get(&self, service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable>;
}

/// The system keyring: on Linux, the kernel key-retention service (keyutils) through the `keyring`
/// crate, reading the entry `keyring-rs:<account>@<service>` from the session keyring (and the
/// user's persistent keyring linked to it). Elsewhere it is always unavailable.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemKeyring;

#[cfg(target_os = "linux")]
impl KeyringBackend for SystemKeyring {
    fn get(&self, service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable> {
        use keyring::credential::CredentialApi;
        let credential = keyring::keyutils::KeyutilsCredential::new_with_target(None, service, account)
            .map_err(|_| KeyringUnavailable)?;
        match credential.get_password() {
            Ok(value) => Ok(Some(value)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(_) => Err(KeyringUnavailable),
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl KeyringBackend for SystemKeyring {
    fn get(&self, _service: &str, _account: &str) -> Result<Option<String>, KeyringUnavailable> {
        Err(KeyringUnavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real backend, read-only: it never writes to the machine's keyring. An entry no one stored
    /// is missing, or the keyring is unreachable here; either way the backend answers, never panics.
    #[test]
    fn system_keyring_answers_for_a_missing_entry() {
        let service = format!("open-conduit-test-absent-{}", std::process::id());
        assert!(matches!(
            SystemKeyring.get(&service, "acct"),
            Ok(None) | Err(KeyringUnavailable)
        ));
    }
}
