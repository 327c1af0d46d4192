//! `keyring:<service>/<account>`: the backend trait, the system keyring, and the writes
//! `open-conduit secrets set --keyring` makes to it.

/// The keyring could not be asked. Carries nothing of the backend's own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the keyring is unavailable")]
pub struct KeyringUnavailable;

/// A keyring the resolver reads from. `Ok(None)` means the entry does not exist.
pub trait KeyringBackend: Send + Sync {
    fn get(&self, service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable>;
}

/// The system keyring, read-only (the daemon never writes it; [`store`] is the operator's). On Linux: with the `secret-service` feature, the desktop
/// session's Secret Service first (GNOME Keyring, KWallet), then the kernel's key-retention service
/// (keyutils), the headless fallback, reading `keyring-rs:<account>@<service>` as the keyring
/// crate (and its CLI) stores it. On macOS: the login Keychain's generic
/// password of that service and account. Elsewhere it is always unavailable.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemKeyring;

impl KeyringBackend for SystemKeyring {
    fn get(&self, service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable> {
        platform::get(service, account)
    }
}

/// Where [`store`] put a value, for the operator to be told.
pub type Place = &'static str;

/// Stores `value` as `<service>/<account>` where [`SystemKeyring`] reads it first that can take
/// it: the Secret Service (with the `secret-service` feature and a session bus), else the
/// kernel's persistent keyring for this user (which outlives the login session), else its
/// session keyring. An entry already there is replaced.
pub fn store(service: &str, account: &str, value: &str) -> Result<Place, KeyringUnavailable> {
    platform::store(service, account, value)
}

/// Removes `<service>/<account>` from every keyring [`SystemKeyring`] reads; `false` when none
/// held it.
pub fn remove(service: &str, account: &str) -> Result<bool, KeyringUnavailable> {
    platform::remove(service, account)
}

/// A credential's password: `None` when no entry exists, unavailable on any other failure (its
/// text, which may name the backend's internals, is dropped).
#[cfg(any(target_os = "macos", feature = "secret-service"))]
fn password(
    credential: keyring::Result<impl keyring::credential::CredentialApi>,
) -> Result<Option<String>, KeyringUnavailable> {
    match credential.map_err(|_| KeyringUnavailable)?.get_password() {
        Ok(value) => Ok(Some(value)),
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(_) => Err(KeyringUnavailable),
    }
}

/// Sets a credential's password; any failure is unavailable, its text dropped.
#[cfg(any(target_os = "macos", feature = "secret-service"))]
fn stored(
    credential: keyring::Result<impl keyring::credential::CredentialApi>,
    value: &str,
) -> Result<(), KeyringUnavailable> {
    credential
        .and_then(|c| c.set_password(value))
        .map_err(|_| KeyringUnavailable)
}

/// Deletes a credential: whether it existed; any other failure is unavailable.
#[cfg(any(target_os = "macos", feature = "secret-service"))]
fn deleted(credential: keyring::Result<impl keyring::credential::CredentialApi>) -> Result<bool, KeyringUnavailable> {
    match credential.and_then(|c| c.delete_credential()) {
        Ok(()) => Ok(true),
        Err(keyring::Error::NoEntry) => Ok(false),
        Err(_) => Err(KeyringUnavailable),
    }
}

#[cfg(target_os = "linux")]
mod platform {
    use linux_keyutils::{KeyError, KeyRing, KeyRingIdentifier};

    use super::KeyringUnavailable;

    pub fn get(service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable> {
        let desktop = secret_service(service, account);
        if let Ok(Some(value)) = desktop {
            return Ok(Some(value));
        }
        match (kernel(service, account), desktop) {
            (Ok(found), _) => Ok(found),
            // The kernel keyring is unreachable, but the Secret Service answered: no such entry.
            (Err(_), Ok(None)) => Ok(None),
            (Err(unavailable), _) => Err(unavailable),
        }
    }

    pub fn store(service: &str, account: &str, value: &str) -> Result<super::Place, KeyringUnavailable> {
        if secret_service_store(service, account, value).is_ok() {
            return Ok("the Secret Service");
        }
        let description = description(service, account);
        let (added, place) = match KeyRing::get_persistent(KeyRingIdentifier::Session) {
            Ok(persistent) => (
                persistent.add_key(&description, value),
                "the kernel's persistent keyring",
            ),
            Err(_) => (
                KeyRing::from_special_id(KeyRingIdentifier::Session, false)
                    .and_then(|session| session.add_key(&description, value)),
                "the kernel's session keyring",
            ),
        };
        let added = added.map_err(|_| KeyringUnavailable)?;
        // Only once the new value is stored: an older copy the session keyring holds would be
        // found before it, so it goes.
        invalidate_copies(&description, Some(added.get_id()))?;
        Ok(place)
    }

    pub fn remove(service: &str, account: &str) -> Result<bool, KeyringUnavailable> {
        let desktop = secret_service_remove(service, account).unwrap_or(false);
        match invalidate_copies(&description(service, account), None) {
            Ok(kernel) => Ok(desktop || kernel),
            Err(_) if desktop => Ok(true),
            Err(unavailable) => Err(unavailable),
        }
    }

    /// Invalidates every copy of the key the session and the persistent keyrings' searches find
    /// (an invalidated key is found by no search), but `keep`; whether one was. Bounded, should a
    /// key survive its invalidation.
    fn invalidate_copies(
        description: &str,
        keep: Option<linux_keyutils::KeySerialId>,
    ) -> Result<bool, KeyringUnavailable> {
        let session = KeyRing::from_special_id(KeyRingIdentifier::Session, false).map_err(|_| KeyringUnavailable)?;
        let persistent = KeyRing::get_persistent(KeyRingIdentifier::Session).ok();
        let mut removed = false;
        for keyring in std::iter::once(session).chain(persistent) {
            for _ in 0..8 {
                let key = match keyring.search(description) {
                    Ok(key) if Some(key.get_id()) != keep => key,
                    // A key invalidated a moment ago may answer revoked until it is collected.
                    Ok(_) | Err(KeyError::KeyDoesNotExist | KeyError::KeyRevoked | KeyError::KeyExpired) => break,
                    Err(_) => return Err(KeyringUnavailable),
                };
                match key.invalidate() {
                    Ok(()) => removed = true,
                    Err(KeyError::KeyRevoked | KeyError::KeyExpired | KeyError::KeyDoesNotExist) => break,
                    Err(_) => return Err(KeyringUnavailable),
                }
            }
        }
        Ok(removed)
    }

    fn description(service: &str, account: &str) -> String {
        format!("keyring-rs:{account}@{service}")
    }

    /// The kernel keyring's entry as the keyring crate stores it (`keyring-rs:<account>@<service>`,
    /// a user key): searched for from the session keyring (the user's session keyring when the
    /// process has none), then in the user's persistent keyring (which the kernel links into the
    /// daemon's session keyring when asked for it). Executions inherit these keyrings, so their
    /// confinement refuses them the keyring's system calls (`conduit_sandbox`'s seccomp filter).
    fn kernel(service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable> {
        let Some(key) = kernel_key(service, account)? else {
            return Ok(None);
        };
        let bytes = key.read_to_vec().map_err(|_| KeyringUnavailable)?;
        String::from_utf8(bytes).map(Some).map_err(|_| KeyringUnavailable)
    }

    fn kernel_key(service: &str, account: &str) -> Result<Option<linux_keyutils::Key>, KeyringUnavailable> {
        let description = description(service, account);
        let session = KeyRing::from_special_id(KeyRingIdentifier::Session, false).map_err(|_| KeyringUnavailable)?;
        let found = match session.search(&description) {
            Err(KeyError::KeyDoesNotExist) => match KeyRing::get_persistent(KeyRingIdentifier::Session) {
                Ok(persistent) => persistent.search(&description),
                Err(_) => Err(KeyError::KeyDoesNotExist),
            },
            searched => searched,
        };
        match found {
            Ok(key) => Ok(Some(key)),
            Err(KeyError::KeyDoesNotExist) => Ok(None),
            Err(_) => Err(KeyringUnavailable),
        }
    }

    /// The Secret Service's entry; without a session bus there is none to ask (a headless daemon).
    #[cfg(feature = "secret-service")]
    fn desktop_credential(
        service: &str,
        account: &str,
    ) -> Result<keyring::Result<keyring::secret_service::SsCredential>, KeyringUnavailable> {
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS").ok_or(KeyringUnavailable)?;
        Ok(keyring::secret_service::SsCredential::new_with_target(
            None, service, account,
        ))
    }

    #[cfg(feature = "secret-service")]
    fn secret_service(service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable> {
        super::password(desktop_credential(service, account)?)
    }

    #[cfg(feature = "secret-service")]
    fn secret_service_store(service: &str, account: &str, value: &str) -> Result<(), KeyringUnavailable> {
        super::stored(desktop_credential(service, account)?, value)
    }

    #[cfg(feature = "secret-service")]
    fn secret_service_remove(service: &str, account: &str) -> Result<bool, KeyringUnavailable> {
        super::deleted(desktop_credential(service, account)?)
    }

    #[cfg(not(feature = "secret-service"))]
    fn secret_service(_service: &str, _account: &str) -> Result<Option<String>, KeyringUnavailable> {
        Err(KeyringUnavailable)
    }

    #[cfg(not(feature = "secret-service"))]
    fn secret_service_store(_service: &str, _account: &str, _value: &str) -> Result<(), KeyringUnavailable> {
        Err(KeyringUnavailable)
    }

    #[cfg(not(feature = "secret-service"))]
    fn secret_service_remove(_service: &str, _account: &str) -> Result<bool, KeyringUnavailable> {
        Err(KeyringUnavailable)
    }
}

#[cfg(target_os = "macos")]
mod platform {
    use keyring::macos::MacCredential;

    use super::{deleted, password, stored, KeyringUnavailable};

    pub fn get(service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable> {
        password(MacCredential::new_with_target(None, service, account))
    }

    pub fn store(service: &str, account: &str, value: &str) -> Result<super::Place, KeyringUnavailable> {
        stored(MacCredential::new_with_target(None, service, account), value).map(|()| "the login Keychain")
    }

    pub fn remove(service: &str, account: &str) -> Result<bool, KeyringUnavailable> {
        deleted(MacCredential::new_with_target(None, service, account))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod platform {
    use super::KeyringUnavailable;

    pub fn get(_service: &str, _account: &str) -> Result<Option<String>, KeyringUnavailable> {
        Err(KeyringUnavailable)
    }

    pub fn store(_service: &str, _account: &str, _value: &str) -> Result<super::Place, KeyringUnavailable> {
        Err(KeyringUnavailable)
    }

    pub fn remove(_service: &str, _account: &str) -> Result<bool, KeyringUnavailable> {
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
