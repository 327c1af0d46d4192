//! The shell executor: runs a binding's argv as a child process in its own process group, with a
//! minimal environment that points it at its toolbelt and nothing of the daemon's own secrets.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Stdio;

use conduit_core::toolbelt_env::{OS_ENDPOINT, OS_PLAYBOOK_DIR, OS_TOKEN_FILE};
use conduit_sandbox::Confinement;
use rustix::process::{kill_process_group, test_kill_process, Pid, Signal};
use tokio::process::{Child, Command};

use crate::secrets::Secret;

/// Variables of the daemon's own environment that an execution may inherit.
const INHERITED: [&str; 7] = ["HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TERM"];
/// The system's own program directories: what an execution's PATH ends with, and a package's
/// whole PATH unless it reads the daemon's environment.
pub(crate) const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What the shell executor needs to start one attempt.
pub struct Launch<'a> {
    pub argv: &'a [String],
    /// The binding's plain variables (`config.env`); validation keeps the host's names out.
    pub env: &'a BTreeMap<String, String>,
    /// The binding's program directories (`config.path`), after `os_dir`.
    pub path: &'a [String],
    pub workdir: &'a Path,
    /// The attempt's private temporary directory, its `TMPDIR`.
    pub tmpdir: &'a Path,
    pub endpoint: &'a Path,
    pub token_file: &'a Path,
    /// The directory holding the host's `os` binary; first on the child's PATH.
    pub os_dir: &'a Path,
    pub log: &'a Path,
    /// The binding's secrets, as environment variables.
    pub secrets: &'a [(String, Secret)],
    /// Where the playbooks are (`skills/<name>/SKILL.md`), so an agent can read the one its binding names.
    pub playbook_dir: &'a Path,
    /// Variables the executor sets (an agent CLI's `HOME` and switches), which replace inherited
    /// ones and which the binding's `env` may replace.
    pub defaults: &'a [(String, String)],
    /// A file stdin reads (an agent's prompt); else stdin is empty.
    pub stdin: Option<&'a Path>,
    /// Where stdout goes instead of the log (an agent's transcript); stderr stays in the log.
    pub stdout: Option<&'a Path>,
}

/// The child's whole environment: the toolbelt endpoint and token file, a PATH that finds `os`
/// first (then the binding's directories, then the system's), a short allowlist of the daemon's
/// variables, the executor's defaults and the binding's plain variables (each replacing what came
/// before), and its secrets. No operator token and nothing else crosses.
pub fn environment(launch: &Launch<'_>, inherit: impl Fn(&str) -> Option<OsString>) -> Vec<(String, OsString)> {
    let mut path = launch.os_dir.as_os_str().to_owned();
    for dir in launch.path {
        path.push(":");
        path.push(dir);
    }
    path.push(":");
    path.push(SYSTEM_PATH);
    let mut env = vec![
        (OS_ENDPOINT.to_owned(), launch.endpoint.as_os_str().to_owned()),
        (OS_TOKEN_FILE.to_owned(), launch.token_file.as_os_str().to_owned()),
        ("PATH".to_owned(), path),
        (OS_PLAYBOOK_DIR.to_owned(), launch.playbook_dir.as_os_str().to_owned()),
        ("TMPDIR".to_owned(), launch.tmpdir.as_os_str().to_owned()),
    ];
    let set_later = |k: &str| launch.env.contains_key(k) || launch.defaults.iter().any(|(d, _)| d == k);
    env.extend(
        INHERITED
            .iter()
            .filter(|k| !set_later(k))
            .filter_map(|k| inherit(k).map(|v| ((*k).to_owned(), v))),
    );
    env.extend(
        launch
            .defaults
            .iter()
            .filter(|(k, _)| !launch.env.contains_key(k))
            .map(|(k, v)| (k.clone(), OsString::from(v))),
    );
    env.extend(launch.env.iter().map(|(k, v)| (k.clone(), OsString::from(v))));
    env.extend(
        launch
            .secrets
            .iter()
            .map(|(k, v)| (k.clone(), OsString::from(v.expose()))),
    );
    env
}

/// Starts the process with stdout and stderr appended to the execution's log, confined unless the
/// binding's sandbox is off.
pub fn spawn(launch: &Launch<'_>, confinement: Option<Confinement>) -> std::io::Result<Child> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(launch.log)?;
    let stdout = match launch.stdout {
        Some(path) => OpenOptions::new().create(true).append(true).mode(0o600).open(path)?,
        None => log.try_clone()?,
    };
    let stdin = match launch.stdin {
        Some(path) => Stdio::from(std::fs::File::open(path)?),
        None => Stdio::null(),
    };
    let (program, args) = launch.argv.split_first().ok_or(std::io::ErrorKind::InvalidInput)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(launch.workdir)
        .env_clear()
        .envs(environment(launch, |k| std::env::var_os(k)))
        .stdin(stdin)
        .stdout(stdout)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(false);
    match confinement {
        Some(confinement) => confinement.spawn(&mut command),
        None => command.spawn(),
    }
}

/// Whether an attempt may start in its binding's `workdir`: an existing directory that, links
/// resolved, neither lies inside the daemon's state directory (whose trees its sandbox would
/// grant) nor contains it (the daemon keeps declared files from the working directory).
pub fn usable_workdir(workdir: &Path, state_dir: &Path) -> Result<(), String> {
    let shown = workdir.display();
    let resolved =
        std::fs::canonicalize(workdir).map_err(|e| format!("the working directory `{shown}` cannot be used: {e}"))?;
    if !resolved.is_dir() {
        return Err(format!("the working directory `{shown}` is not a directory"));
    }
    let state = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_owned());
    if resolved.starts_with(&state) {
        return Err(format!(
            "the working directory `{shown}` lies inside the daemon's state directory"
        ));
    }
    if state.starts_with(&resolved) {
        return Err(format!(
            "the working directory `{shown}` contains the daemon's state directory"
        ));
    }
    Ok(())
}

/// Kills the whole process group led by `pid` (the executor puts each attempt in its own group).
pub fn kill_group(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = kill_process_group(pid, Signal::KILL);
    }
}

/// Whether a process with this id still runs. A zombie (exited, not yet reaped by whoever adopted
/// it after our restart) counts as ended.
pub fn is_alive(pid: i32) -> bool {
    Pid::from_raw(pid).is_some_and(|p| test_kill_process(p).is_ok()) && !is_zombie(pid)
}

fn is_zombie(pid: i32) -> bool {
    // /proc/<pid>/stat is `pid (comm) state ...`; comm may hold spaces or parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Appends a line of the host's to an attempt's log (best effort: the log is for people).
pub fn append_log(log: &Path, line: &str) {
    use std::io::Write;
    let file = OpenOptions::new().create(true).append(true).mode(0o600).open(log);
    if let Ok(mut file) = file {
        let _ = writeln!(file, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_of_processes() {
        assert!(is_alive(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !is_alive(pid),
            "an exited, unreaped child is a zombie and counts as ended"
        );
        child.wait().unwrap();
        assert!(!is_alive(pid));
    }

    /// An attempt's launch with these binding variables, directories and secrets.
    fn launch<'a>(
        env: &'a BTreeMap<String, String>,
        path: &'a [String],
        secrets: &'a [(String, Secret)],
    ) -> Launch<'a> {
        Launch {
            argv: &[],
            env,
            path,
            workdir: Path::new("/w"),
            tmpdir: Path::new("/r/tmp"),
            endpoint: Path::new("/r/toolbelt.sock"),
            token_file: Path::new("/r/token/token"),
            os_dir: Path::new("/opt/oc/bin"),
            log: Path::new("/l"),
            secrets,
            playbook_dir: Path::new("/s/playbooks"),
            defaults: &[],
            stdin: None,
            stdout: None,
        }
    }

    #[test]
    fn environment_is_minimal() {
        let none = BTreeMap::new();
        let secrets = [("GITHUB_TOKEN".to_owned(), Secret::new("s3cret"))];
        let launch = launch(&none, &[], &secrets);
        let env = environment(&launch, |k| match k {
            "HOME" => Some("/home/me".into()),
            _ => None,
        });
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "OS_ENDPOINT",
                "OS_TOKEN_FILE",
                "PATH",
                "OS_PLAYBOOK_DIR",
                "TMPDIR",
                "HOME",
                "GITHUB_TOKEN"
            ]
        );
        assert_eq!(env[2].1, OsString::from("/opt/oc/bin:/usr/local/bin:/usr/bin:/bin"));
    }

    #[test]
    fn a_bindings_env_replaces_an_inherited_variable_and_its_path_follows_os() {
        let env_of_binding = BTreeMap::from([
            ("HOME".to_owned(), "/srv/agent".to_owned()),
            ("MODE".to_owned(), "ci".to_owned()),
        ]);
        let path = ["/home/me/.local/bin".to_owned()];
        let launch = launch(&env_of_binding, &path, &[]);
        let env = environment(&launch, |k| (k == "HOME").then(|| "/home/me".into()));
        let value = |name: &str| {
            env.iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(value("HOME"), [OsString::from("/srv/agent")], "once, the binding's");
        assert_eq!(value("MODE"), [OsString::from("ci")]);
        assert_eq!(
            value("PATH"),
            [OsString::from(
                "/opt/oc/bin:/home/me/.local/bin:/usr/local/bin:/usr/bin:/bin"
            )]
        );
    }

    #[test]
    fn an_executors_defaults_replace_inherited_variables_and_yield_to_the_bindings() {
        let env_of_binding = BTreeMap::from([("MODE".to_owned(), "ci".to_owned())]);
        let defaults = [
            ("HOME".to_owned(), "/s/homes/k".to_owned()),
            ("MODE".to_owned(), "agent".to_owned()),
        ];
        let launch = Launch {
            defaults: &defaults,
            ..launch(&env_of_binding, &[], &[])
        };
        let env = environment(&launch, |k| (k == "HOME").then(|| "/home/me".into()));
        let value = |name: &str| {
            env.iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(value("HOME"), [OsString::from("/s/homes/k")]);
        assert_eq!(value("MODE"), [OsString::from("ci")]);
    }
}
