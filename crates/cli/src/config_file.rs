//! A configuration file on this side of the socket: its text for `config validate|apply`, or for
//! `config check` the file validated offline against this release. A file that cannot be read (none
//! there, not a regular file, not readable) is reported as an invalid validation naming it, without
//! reading past the 1 MiB limit.

use std::path::Path;

use conduit_config::Diagnostic;
use conduit_daemon::files::read_config_file;
use serde_json::{json, Value};

/// The file's text, or the invalid validation report of a file that cannot be read. A file over
/// the limit is sent as far as one byte past it, for the daemon to refuse as `too_large`.
pub fn read(file: &Path) -> Result<String, Value> {
    let bytes = bytes(file)?;
    String::from_utf8(bytes).map_err(|_| invalid(not_utf8(file)))
}

/// The file validated offline, reported like the daemon's validation; playbooks are read from
/// `state_dir` when it is known.
pub fn check_offline(file: &Path, state_dir: Option<&Path>) -> Value {
    match bytes(file) {
        Ok(bytes) => check(&bytes, state_dir),
        Err(report) => report,
    }
}

fn bytes(file: &Path) -> Result<Vec<u8>, Value> {
    match read_config_file(file) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(invalid(missing(file))),
        Err(unreadable) => Err(invalid(unreadable)),
    }
}

/// The offline validation report, shaped like the daemon's.
fn check(bytes: &[u8], state_dir: Option<&Path>) -> Value {
    match conduit_daemon::check_config(bytes, state_dir) {
        Ok(snapshot) => {
            json!({"valid": true, "hash": snapshot.hash(), "diagnostics": snapshot.warnings()})
        }
        Err(found) => json!({"valid": false, "hash": null, "diagnostics": found}),
    }
}

fn invalid(diagnostic: Diagnostic) -> Value {
    json!({"valid": false, "hash": null, "diagnostics": [diagnostic]})
}

fn missing(file: &Path) -> Diagnostic {
    Diagnostic::error(
        "",
        "config_unreadable",
        format!("cannot read {}: no such file", file.display()),
        "check the path",
    )
}

fn not_utf8(file: &Path) -> Diagnostic {
    Diagnostic::error(
        "",
        "invalid_json",
        format!("{} is not UTF-8 text", file.display()),
        "save the configuration as UTF-8 JSON",
    )
}
