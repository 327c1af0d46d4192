//! A configuration file on this side of the socket: its text for `config validate|apply`, or for
//! `config check` the file validated offline against this release. A file that cannot be read is
//! reported as an invalid validation naming it.

use std::path::Path;

use serde_json::{json, Value};

/// The file's text, or the invalid validation report of a file that cannot be read.
pub fn read(file: &Path) -> Result<String, Value> {
    std::fs::read_to_string(file).map_err(|e| unreadable(file, e))
}

/// The file validated offline, reported like the daemon's validation; playbooks are read from
/// `state_dir` when it is known.
pub fn check_offline(file: &Path, state_dir: Option<&Path>) -> Value {
    match std::fs::read(file) {
        Ok(bytes) => check(&bytes, state_dir),
        Err(e) => unreadable(file, e),
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

/// A file that cannot be read, reported as an invalid validation naming it.
fn unreadable(file: &Path, e: std::io::Error) -> Value {
    let diagnostic = json!({
        "pointer": "", "code": "unreadable_file", "severity": "error",
        "message": format!("cannot read {}: {}", file.display(), e.kind()),
        "remedy": "check the path and its permissions",
    });
    json!({"valid": false, "hash": null, "diagnostics": [diagnostic]})
}
