//! The operator's daily use of the daemon: a `--config` that names no file is refused, the log is
//! plain text when it is not a terminal, SIGHUP stops the daemon as cleanly as SIGTERM, and doctor
//! prints its version plainly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

#[test]
fn a_config_flag_naming_no_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.json");
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["daemon", "--state"])
        .arg(tmp.path().join("state"))
        .arg("--config")
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a missing file does not start the default");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("does not exist") && stderr.contains(missing.to_str().unwrap()),
        "{stderr}"
    );
    assert!(!tmp.path().join("state/management.sock").exists(), "nothing was served");
}

#[test]
fn sighup_stops_the_daemon_cleanly_and_its_log_is_plain_text() {
    let mut daemon = Daemon::start(Some(&shell_config("true")));
    let doctor = daemon.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains(&format!("up (version {},", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    let status = daemon.signal("-HUP");
    assert!(status.success(), "a clean shutdown: {status:?}");
    assert!(!daemon.management_socket().exists(), "its socket is removed");
    let log = daemon.log();
    assert!(log.contains("open-conduit daemon is up"), "{log}");
    assert!(!log.contains('\u{1b}'), "no colour codes in a log file: {log}");
}
