//! `keyring:` against a real Secret Service (GNOME Keyring on a private session bus), in a build
//! with the `secret-service` feature: an entry stored there is read, one removed is missing. `.ci/run`
//! runs it under `dbus-run-session` with `OPEN_CONDUIT_TEST_SECRET_SERVICE=1`; elsewhere it says it
//! skipped.

#![cfg(all(target_os = "linux", feature = "secret-service"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_daemon::secrets::{KeyringBackend, SystemKeyring};
use keyring::credential::CredentialApi;

#[test]
fn a_secret_service_entry_is_read_first_and_a_removed_one_is_missing() {
    if std::env::var_os("OPEN_CONDUIT_TEST_SECRET_SERVICE").is_none() {
        eprintln!("skipped: set OPEN_CONDUIT_TEST_SECRET_SERVICE=1 on a session bus with a Secret Service");
        return;
    }
    let service = format!("open-conduit-test-{}", std::process::id());
    let entry = keyring::secret_service::SsCredential::new_with_target(None, &service, "deploy").unwrap();
    entry.set_password("ss-planted-41").unwrap();
    assert_eq!(
        SystemKeyring.get(&service, "deploy").unwrap().as_deref(),
        Some("ss-planted-41")
    );
    entry.delete_credential().unwrap();
    assert_eq!(
        SystemKeyring.get(&service, "deploy"),
        Ok(None),
        "then the kernel keyring has none"
    );
}
