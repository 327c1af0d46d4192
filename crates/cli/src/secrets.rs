//! `open-conduit secrets`: the `file:` secrets of `<state>/private/secrets.json`, written owner-only
//! by the operator's own user, as the daemon reads them, or with `--keyring` the system keyring's
//! `keyring:open-conduit/<name>`. Values come from stdin (never the command
//! line, which other users can read) and are never printed.

use std::io::{IsTerminal, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::report::Failure;

/// The secrets file inside a state directory.
pub fn file_in(state: &Path) -> PathBuf {
    state.join("private/secrets.json")
}

/// Stores the value read from stdin under `name`.
pub fn set(state: &Path, name: &str) -> Result<Value, Failure> {
    check_name(name)?;
    let value = read_value(name)?;
    let file = file_in(state);
    let private = file.parent().unwrap_or(state);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(private)
        .map_err(|e| Failure::Local(format!("cannot create {}: {e}", private.display())))?;
    let replaced = conduit_daemon::secrets::write_file_key(&file, name, Some(&value)).map_err(Failure::Local)?;
    Ok(json!({"name": name, "reference": format!("file:{name}"), "file": file, "replaced": replaced}))
}

/// The keyring service `secrets set --keyring` stores under: `keyring:open-conduit/<name>`.
pub const KEYRING_SERVICE: &str = "open-conduit";

/// Stores the value read from stdin in the system keyring, as `keyring:open-conduit/<name>`.
pub fn set_in_keyring(name: &str) -> Result<Value, Failure> {
    check_keyring_name(name)?;
    let value = read_value(name)?;
    let place =
        conduit_daemon::secrets::store_in_keyring(KEYRING_SERVICE, name, &value).map_err(|_| keyring_unavailable())?;
    Ok(
        json!({"name": name, "reference": format!("keyring:{KEYRING_SERVICE}/{name}"), "keyring": place, "replaced": false}),
    )
}

/// Removes `keyring:open-conduit/<name>`; one that is not stored is an error.
pub fn remove_from_keyring(name: &str) -> Result<Value, Failure> {
    check_keyring_name(name)?;
    match conduit_daemon::secrets::remove_from_keyring(KEYRING_SERVICE, name).map_err(|_| keyring_unavailable())? {
        true => Ok(json!({"removed": name, "keyring": "the system keyring"})),
        false => Err(Failure::Local(format!("no keyring entry {KEYRING_SERVICE}/{name}"))),
    }
}

fn keyring_unavailable() -> Failure {
    Failure::Local(
        "the system keyring is unavailable here; store the secret in the state directory instead (without --keyring)"
            .to_owned(),
    )
}

/// A name a `keyring:<service>/<account>` reference can carry as its account.
fn check_keyring_name(name: &str) -> Result<(), Failure> {
    check_name(name)?;
    match name.contains('/') {
        true => Err(Failure::Local("a keyring secret's name cannot hold `/`".to_owned())),
        false => Ok(()),
    }
}

/// The names stored (never their values).
pub fn list(state: &Path) -> Result<Value, Failure> {
    let file = file_in(state);
    let names = conduit_daemon::secrets::file_keys(&file)
        .map_err(|e| Failure::Local(format!("{e}; {}", e.remedy_at(&file))))?;
    let items: Vec<Value> = names
        .iter()
        .map(|name| json!({"name": name, "reference": format!("file:{name}")}))
        .collect();
    Ok(json!({"file": file, "items": items}))
}

/// Removes `name`; one that is not stored is an error.
pub fn remove(state: &Path, name: &str) -> Result<Value, Failure> {
    let file = file_in(state);
    match conduit_daemon::secrets::write_file_key(&file, name, None).map_err(Failure::Local)? {
        true => Ok(json!({"removed": name, "file": file})),
        false => Err(Failure::Local(format!(
            "no secret `{name}` in {}; `open-conduit secrets list` names those stored",
            file.display()
        ))),
    }
}

/// A name the configuration can reference as `file:<name>`.
fn check_name(name: &str) -> Result<(), Failure> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(Failure::Local(
            "a secret's name is non-empty text without control characters".to_owned(),
        ));
    }
    Ok(())
}

/// The value: typed at a terminal without echo, else all of stdin less one trailing newline.
fn read_value(name: &str) -> Result<String, Failure> {
    let unreadable = |e: std::io::Error| Failure::Local(format!("cannot read the value from stdin: {e}"));
    let value = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("value of `{name}` (not shown): ")).map_err(unreadable)?
    } else {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(unreadable)?;
        let trimmed = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t));
        trimmed.map(str::to_owned).unwrap_or(text)
    };
    if value.is_empty() || value.contains('\0') {
        return Err(Failure::Local(
            "the value is empty or holds a NUL byte; give it on stdin, e.g. `printf %s \"$TOKEN\" | open-conduit secrets set NAME`"
                .to_owned(),
        ));
    }
    Ok(value)
}
