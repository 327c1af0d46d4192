//! `cmd:<shell command>`: `/bin/sh -c` in its own process group, with a minimal environment, a
//! deadline and bounded stdout. Whatever the outcome, the whole group is killed before the command's
//! leader is reaped, so nothing it started outlives the resolution.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use super::SecretError;

/// How long a command may run, from spawn to exit.
pub const CMD_DEADLINE: Duration = Duration::from_secs(10);
/// The most stdout a command may print, before trimming.
pub const CMD_OUTPUT_LIMIT: usize = 64 * 1024;
/// The only `PATH` a command sees.
pub const CMD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

const EXIT_POLL: Duration = Duration::from_millis(5);

type Output = Result<Vec<u8>, SecretError>;

/// Runs `command` and returns its stdout, untrimmed.
pub(super) fn run(command: &str, home: Option<OsString>, deadline: Duration) -> Output {
    let end = Instant::now() + deadline;
    let mut child = spawn(command, home)?;
    let group = Pid::from_child(&child);
    let outcome = supervise(&mut child, group, end);
    // The leader is not reaped yet (at most a zombie), so the group id cannot have been reused.
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
    let status = child.wait();
    let output = outcome?;
    match status {
        Ok(status) if status.success() => Ok(output),
        _ => Err(SecretError::CmdFailed),
    }
}

fn spawn(command: &str, home: Option<OsString>) -> Result<Child, SecretError> {
    let mut sh = Command::new("/bin/sh");
    sh.arg("-c")
        .arg(command)
        .env_clear()
        .env("PATH", CMD_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    if let Some(home) = home {
        sh.env("HOME", home);
    }
    sh.spawn().map_err(|_| SecretError::CmdFailed)
}

/// Waits, until `end`, for stdout to close and then for the leader to exit (without reaping it).
fn supervise(child: &mut Child, leader: Pid, end: Instant) -> Output {
    let stdout = child.stdout.take().ok_or(SecretError::CmdFailed)?;
    let output = spawn_reader(stdout)?;
    let bytes = match output.recv_timeout(end.saturating_duration_since(Instant::now())) {
        Ok(read) => read?,
        Err(RecvTimeoutError::Timeout) => return Err(SecretError::CmdTimeout),
        Err(RecvTimeoutError::Disconnected) => return Err(SecretError::CmdFailed),
    };
    wait_for_exit(leader, end)?;
    Ok(bytes)
}

/// Reads stdout on its own thread. The thread is never joined: it ends when the pipe closes, which
/// killing the group brings about.
fn spawn_reader(stdout: ChildStdout) -> Result<Receiver<Output>, SecretError> {
    let (sender, receiver) = mpsc::sync_channel(1);
    thread::Builder::new()
        .name("secret-cmd-stdout".to_owned())
        .spawn(move || {
            let _ = sender.send(read_bounded(stdout));
        })
        .map_err(|_| SecretError::CmdFailed)?;
    Ok(receiver)
}

fn read_bounded(stdout: impl Read) -> Output {
    let mut bytes = Vec::new();
    stdout
        .take(CMD_OUTPUT_LIMIT as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| SecretError::CmdFailed)?;
    if bytes.len() > CMD_OUTPUT_LIMIT {
        return Err(SecretError::CmdOutputTooLarge);
    }
    Ok(bytes)
}

fn wait_for_exit(leader: Pid, end: Instant) -> Result<(), SecretError> {
    while !has_exited(leader)? {
        if Instant::now() >= end {
            return Err(SecretError::CmdTimeout);
        }
        thread::sleep(EXIT_POLL);
    }
    Ok(())
}

/// Whether the leader has exited, leaving it waitable so its pid stays reserved.
fn has_exited(leader: Pid) -> Result<bool, SecretError> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    match rustix::process::waitid(WaitId::Pid(leader), options) {
        Ok(status) => Ok(status.is_some()),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(_) => Err(SecretError::CmdFailed),
    }
}

/// Removes exactly one trailing `\n` or `\r\n`.
pub(super) fn trim_one_newline(mut output: Vec<u8>) -> Vec<u8> {
    if output.ends_with(b"\r\n") {
        output.truncate(output.len() - 2);
    } else if output.ends_with(b"\n") {
        output.truncate(output.len() - 1);
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_exactly_one_line_ending() {
        let trim = |s: &[u8]| trim_one_newline(s.to_vec());
        assert_eq!(trim(b"a\n"), b"a");
        assert_eq!(trim(b"a\r\n"), b"a");
        assert_eq!(trim(b"a\n\n"), b"a\n");
        assert_eq!(trim(b"a\r\n\r\n"), b"a\r\n");
        assert_eq!(trim(b"a\r"), b"a\r");
        assert_eq!(trim(b"a"), b"a");
        assert_eq!(trim(b"\n"), b"");
        assert_eq!(trim(b""), b"");
    }

    #[test]
    fn output_is_bounded() {
        assert_eq!(
            read_bounded(&[b'a'; CMD_OUTPUT_LIMIT][..]).map(|b| b.len()),
            Ok(CMD_OUTPUT_LIMIT)
        );
        assert_eq!(
            read_bounded(&[b'a'; CMD_OUTPUT_LIMIT + 1][..]),
            Err(SecretError::CmdOutputTooLarge)
        );
    }
}
