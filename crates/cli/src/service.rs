//! `open-conduit service install --user`: a systemd user unit that runs this binary's daemon on
//! the operator's state directory, so it starts at login and restarts when it fails.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::report::Failure;

/// The unit's file name.
pub const UNIT: &str = "open-conduit.service";

/// What the unit runs: this program's daemon, its state directory and, when given, its file,
/// with the `PATH` it finds agent CLIs on (`claude`, `codex`).
#[derive(Debug)]
pub struct Daemon<'a> {
    pub program: &'a Path,
    pub state: &'a Path,
    pub config: Option<&'a Path>,
    /// The installing shell's `PATH`: systemd's own holds no `~/.local/bin` or npm prefix.
    pub path: Option<&'a str>,
}

/// The unit's text; a path systemd could not be given exactly is refused.
pub fn unit_text(daemon: &Daemon<'_>) -> Result<String, Failure> {
    let mut exec = format!("{} daemon --state {}", quoted(daemon.program)?, quoted(daemon.state)?);
    if let Some(config) = daemon.config {
        exec.push_str(&format!(" --config {}", quoted(config)?));
    }
    let environment = match daemon.path {
        Some(path) => format!("Environment={}\n", systemd_quoted(&format!("PATH={path}"), false)?),
        None => String::new(),
    };
    Ok(format!(
        "# Written by `open-conduit service install --user`.\n\
         [Unit]\n\
         Description=Open Conduit daemon: agent executions, each with its own toolbelt\n\
         \n\
         [Service]\n\
         Type=simple\n\
         {environment}\
         ExecStart={exec}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         # SIGTERM stops the daemon cleanly; its running attempts are left for the next start to\n\
         # adopt, so only the daemon itself is signalled.\n\
         KillMode=process\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n"
    ))
}

/// One argument of `ExecStart`, quoted for systemd (see [`systemd_quoted`]); a path that is not
/// UTF-8 is refused.
fn quoted(path: &Path) -> Result<String, Failure> {
    let text = path
        .to_str()
        .ok_or_else(|| Failure::Local(format!("{} is not UTF-8, so no unit can name it", path.display())))?;
    systemd_quoted(text, true)
}

/// `text` in double quotes as systemd reads them: `\\` and `"` escaped, `%` doubled (else a
/// specifier) and, where systemd expands variables (`ExecStart`), `$` doubled. Text holding a
/// control character (a newline would start another directive) is refused.
fn systemd_quoted(text: &str, variables: bool) -> Result<String, Failure> {
    if text.chars().any(char::is_control) {
        return Err(Failure::Local(format!(
            "{text:?} holds a control character, so no unit can carry it"
        )));
    }
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%");
    let escaped = if variables { escaped.replace('$', "$$") } else { escaped };
    Ok(format!("\"{escaped}\""))
}

/// The user units' directory: `$XDG_CONFIG_HOME/systemd/user`, else `$HOME/.config/systemd/user`.
pub fn user_unit_dir(xdg_config_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    Some(crate::xdg::base_dir(xdg_config_home, home, ".config")?.join("systemd/user"))
}

/// Writes the unit into `dir`. An existing unit with other text is kept unless `force`.
pub fn install(dir: &Path, text: &str, force: bool) -> Result<Value, Failure> {
    let file = dir.join(UNIT);
    let written = match std::fs::read(&file) {
        Ok(existing) if existing == text.as_bytes() => false,
        Ok(_) if !force => {
            return Err(Failure::Local(format!(
                "{} already exists with other settings; pass --force to replace it",
                file.display()
            )))
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Failure::Local(format!("cannot read {}: {e}", file.display())))
        }
        _ => {
            std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(&file, text))
                .map_err(|e| Failure::Local(format!("cannot write {}: {e}", file.display())))?;
            true
        }
    };
    Ok(json!({"file": file, "written": written, "unit": text}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_this_daemon_on_its_state_and_quotes_what_systemd_would_expand() {
        let text = unit_text(&Daemon {
            program: Path::new("/opt/oc/bin/open-conduit"),
            state: Path::new("/home/a b/state%1$HOME"),
            config: Some(Path::new("/etc/oc.json")),
            path: Some("/home/a/.local/bin:/usr/bin:$X"),
        })
        .unwrap();
        assert!(
            text.contains("Environment=\"PATH=/home/a/.local/bin:/usr/bin:$X\"\n"),
            "{text}"
        );
        let exec =
            r#"ExecStart="/opt/oc/bin/open-conduit" daemon --state "/home/a b/state%%1$$HOME" --config "/etc/oc.json""#;
        assert!(text.contains(exec), "{text}");
        let newline = unit_text(&Daemon {
            program: Path::new("/bin/oc"),
            state: Path::new("/s\nExecStartPre=/bin/evil"),
            config: None,
            path: None,
        });
        assert!(newline.is_err(), "a newline would start another directive");
        assert!(text.contains("KillMode=process") && text.contains("WantedBy=default.target"));
    }

    #[test]
    fn user_units_live_under_the_xdg_config_directory() {
        let dir = |xdg: Option<&str>, home: Option<&str>| user_unit_dir(xdg.map(Into::into), home.map(Into::into));
        assert_eq!(dir(Some("/x"), Some("/h")), Some(PathBuf::from("/x/systemd/user")));
        assert_eq!(
            dir(Some("rel"), Some("/h")),
            Some(PathBuf::from("/h/.config/systemd/user"))
        );
        assert_eq!(dir(None, None), None);
    }
}
