//! A command line run on a terminal: a detached session of its own tmux server, read with
//! `capture-pane` and driven with `send-keys`; the server is killed when dropped.

use std::path::PathBuf;
use std::process::Output;

use super::wait_until;

/// Whether `tmux` can run here. Without it a test says it skipped (`apt-get install tmux`), unless
/// `OPEN_CONDUIT_REQUIRE_TMUX` is set (CI sets it): then a missing tmux fails the test.
pub fn available() -> bool {
    let found = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("OPEN_CONDUIT_REQUIRE_TMUX").is_none(),
            "tmux is not installed; run `apt-get install tmux`"
        );
        eprintln!("skipped: tmux is not installed; run `apt-get install tmux`");
    }
    found
}

pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Runs `command` (a shell command line) on a `width` × `height` terminal, on the tmux server
    /// at `socket`. The caller's endpoint and token variables do not leak into it.
    pub fn run(socket: PathBuf, (width, height): (u16, u16), command: &str) -> Tmux {
        let tmux = Tmux { socket };
        // Nor do the terminal settings the test's own terminal may have.
        let command =
            format!("env -u OPEN_CONDUIT_ENDPOINT -u OPEN_CONDUIT_TOKEN_FILE -u NO_COLOR -u COLUMNS {command}");
        let (width, height) = (width.to_string(), height.to_string());
        let started = tmux.tmux(&["new-session", "-d", "-x", &width, "-y", &height, &command]);
        assert!(
            started.status.success(),
            "tmux (apt install tmux) could not start: {started:?}"
        );
        tmux
    }

    fn tmux(&self, args: &[&str]) -> Output {
        std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs (apt install tmux)")
    }

    /// The screen's text, a line tmux wrapped joined again (`-J`); with `escapes`, its colours
    /// and attributes as escape sequences too.
    pub fn screen_with(&self, escapes: bool) -> String {
        let args: &[&str] = if escapes {
            &["capture-pane", "-p", "-J", "-e"]
        } else {
            &["capture-pane", "-p", "-J"]
        };
        String::from_utf8_lossy(&self.tmux(args).stdout).into_owned()
    }

    pub fn press(&self, key: &str) {
        assert!(self.tmux(&["send-keys", key]).status.success());
    }

    /// The screen once it shows `text`.
    pub fn shows(&self, text: &str) -> String {
        let mut screen = String::new();
        wait_until(&format!("the terminal to show {text:?}"), || {
            screen = self.screen_with(false);
            screen.contains(text)
        });
        screen
    }

    pub fn is_running(&self) -> bool {
        self.tmux(&["has-session"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}
