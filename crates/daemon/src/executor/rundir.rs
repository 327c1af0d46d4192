//! An execution's run directory: `<state>/runs/<key>/` with `toolbelt.sock`, `token/token` and
//! `execution`. The key is 16 hex characters of the SHA-256 of the execution id.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::state::{check_private_dir, create_private_dir, write_private_file, MAX_SOCKET_PATH};
use crate::DaemonError;

pub struct RunDir {
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub token_file: PathBuf,
    pub workdir: PathBuf,
    /// The attempt's private temporary directory (its `TMPDIR`).
    pub tmpdir: PathBuf,
}

pub fn run_key(execution_id: &str) -> String {
    hex::encode(&Sha256::digest(execution_id.as_bytes())[..8])
}

impl RunDir {
    /// The run directory of `execution_id` under `runs`, created owner-only, with the attempt
    /// working in `cwd` (the binding's) or in a directory of its own there. A directory that names
    /// another execution is refused.
    pub fn create(runs: &Path, execution_id: &str, cwd: Option<PathBuf>) -> Result<RunDir, DaemonError> {
        let key = run_key(execution_id);
        let dir = runs.join(&key);
        create_private_dir(&dir)?;
        check_private_dir(&dir)?;
        let marker = dir.join("execution");
        match fs::read_to_string(&marker) {
            Ok(owner) if owner.trim() != execution_id => {
                return Err(DaemonError::io(
                    "use the run directory (it names another execution)",
                    &dir,
                    std::io::ErrorKind::AlreadyExists.into(),
                ))
            }
            Ok(_) => {}
            Err(_) => write_private_file(&marker, execution_id.as_bytes())?,
        }
        let token_dir = dir.join("token");
        create_private_dir(&token_dir)?;
        let workdir = match cwd {
            Some(cwd) => cwd,
            None => {
                let own = RunDir::workdir_of(runs, execution_id);
                create_private_dir(&own)?;
                own
            }
        };
        let tmpdir = dir.join("tmp");
        create_private_dir(&tmpdir)?;
        let socket = socket_path(&dir, &key, &fallback_base())?;
        Ok(RunDir {
            socket,
            token_file: token_dir.join("token"),
            workdir,
            tmpdir,
            dir,
        })
    }

    /// Notes the attempt's process id in the run directory (which the attempt may read, not write)
    /// the moment it is spawned: a daemon that dies before the store records the pid leaves the next
    /// one this to find the process by, instead of judging a running attempt lost (and retrying it
    /// beside itself). Not synced: the note is for a daemon that dies, not a machine (which takes the
    /// process with it), and an fsync here would widen the window it closes.
    pub fn note_pid(&self, pid: i32) -> Result<(), DaemonError> {
        let path = self.dir.join("pid");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut file = fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&path)?;
            file.write_all(pid.to_string().as_bytes())
        };
        write().map_err(|e| DaemonError::io("note the process id in", &path, e))
    }

    /// The process id noted for `execution_id`'s attempt, if there is one.
    pub fn noted_pid(runs: &Path, execution_id: &str) -> Option<i32> {
        let text = fs::read_to_string(runs.join(run_key(execution_id)).join("pid")).ok()?;
        text.trim().parse().ok()
    }

    /// Where an attempt's own working directory is (or was), without creating anything.
    pub fn workdir_of(runs: &Path, execution_id: &str) -> PathBuf {
        runs.join(run_key(execution_id)).join("work")
    }

    /// Writes the current token through a temporary file and a rename in `token/`, so a process that
    /// sees `token/` through a directory mount sees each rotation.
    pub fn write_token(&self, token: &str) -> Result<(), DaemonError> {
        write_private_file(&self.token_file, token.as_bytes())
    }

    /// Removes the socket (wherever it lives) and the run directory.
    pub fn remove(&self) {
        let _ = fs::remove_file(&self.socket);
        if let Some(parent) = self.socket.parent().filter(|p| !p.starts_with(&self.dir)) {
            let _ = fs::remove_dir(parent);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Where sockets go when the run directory's path is too long: the user's runtime directory
/// (`$XDG_RUNTIME_DIR/open-conduit`) when it is the daemon user's own and owner-only (one inherited
/// through `su` or `sudo` is not), else `/tmp/open-conduit-<uid>` (macOS has no runtime directory).
fn fallback_base() -> PathBuf {
    base_in(std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from))
}

/// [`fallback_base`] for the runtime directory `runtime` names, if any.
fn base_in(runtime: Option<PathBuf>) -> PathBuf {
    match runtime {
        Some(runtime) if runtime.is_absolute() && check_private_dir(&runtime).is_ok() => runtime.join("open-conduit"),
        _ => PathBuf::from(format!("/tmp/open-conduit-{}", rustix::process::geteuid().as_raw())),
    }
}

/// `<dir>/toolbelt.sock`, or `<base>/<key>/toolbelt.sock` when that is too long. Both fallback
/// directories must be owner-only.
fn socket_path(dir: &Path, key: &str, base: &Path) -> Result<PathBuf, DaemonError> {
    let in_place = dir.join("toolbelt.sock");
    if in_place.as_os_str().len() <= MAX_SOCKET_PATH {
        return Ok(in_place);
    }
    let short = base.join(key);
    for d in [base, short.as_path()] {
        create_private_dir(d)?;
        check_private_dir(d)?;
    }
    let socket = short.join("toolbelt.sock");
    if socket.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(DaemonError::io(
            "place the toolbelt socket (the path is too long; use a shorter --state directory)",
            &socket,
            std::io::ErrorKind::InvalidInput.into(),
        ));
    }
    Ok(socket)
}

/// Removes every run directory under `runs` whose execution is not in `live`: what terminal, vanished
/// or earlier daemons' executions left.
pub fn remove_stale_runs(runs: &Path, live: &[String]) {
    let keep: Vec<String> = live.iter().map(|id| run_key(id)).collect();
    let Ok(entries) = fs::read_dir(runs) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !keep.contains(&name) {
            let execution = fs::read_to_string(entry.path().join("execution")).unwrap_or_default();
            let run = RunDir {
                socket: socket_path(&entry.path(), &name, &fallback_base())
                    .unwrap_or_else(|_| entry.path().join("toolbelt.sock")),
                token_file: PathBuf::new(),
                workdir: PathBuf::new(),
                tmpdir: PathBuf::new(),
                dir: entry.path(),
            };
            tracing::debug!(execution = execution.trim(), "removing a stale run directory");
            run.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn run_directory_layout_and_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(tmp.path(), "exec-1", None).unwrap();
        assert_eq!(run.dir.file_name().unwrap().len(), 16);
        run.write_token("tok").unwrap();
        assert_eq!(fs::metadata(&run.token_file).unwrap().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&run.dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(fs::read_to_string(run.dir.join("execution")).unwrap(), "exec-1");
    }

    #[test]
    fn a_directory_naming_another_execution_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(tmp.path(), "exec-1", None).unwrap();
        fs::write(run.dir.join("execution"), "exec-2").unwrap();
        assert!(RunDir::create(tmp.path(), "exec-1", None).is_err());
    }

    #[test]
    fn long_paths_fall_back_under_the_runtime_directory_or_tmp() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("d".repeat(90));
        let run = RunDir::create(&deep, "exec-long", None).unwrap();
        let base = fallback_base();
        assert!(run.socket.starts_with(&base), "{}", run.socket.display());
        assert!(
            base.to_string_lossy().starts_with("/tmp/open-conduit-") || std::env::var_os("XDG_RUNTIME_DIR").is_some(),
            "{}",
            base.display()
        );
        assert!(run.socket.as_os_str().len() <= MAX_SOCKET_PATH);
        run.remove();
    }

    /// A runtime directory others can write (one inherited through `su`, say) is not trusted with
    /// sockets; the daemon user's own owner-only one is (the control).
    #[test]
    fn only_an_owner_only_runtime_directory_is_used() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let runtime = tmp.path().join("run");
        fs::create_dir(&runtime).unwrap();
        fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(base_in(Some(runtime.clone())), runtime.join("open-conduit"));
        fs::set_permissions(&runtime, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(base_in(Some(runtime))
            .to_string_lossy()
            .starts_with("/tmp/open-conduit-"));
        assert!(base_in(Some("relative".into()))
            .to_string_lossy()
            .starts_with("/tmp/open-conduit-"));
    }

    #[test]
    fn an_unsafe_fallback_directory_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("fallback");
        fs::create_dir(&base).unwrap();
        fs::set_permissions(&base, fs::Permissions::from_mode(0o777)).unwrap();
        let deep = tmp.path().join("d".repeat(100));
        assert!(matches!(
            socket_path(&deep, "k", &base),
            Err(DaemonError::UnsafeDirectory { .. })
        ));
    }

    #[test]
    fn a_path_too_long_even_in_the_fallback_names_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("b".repeat(100));
        let deep = tmp.path().join("d".repeat(100));
        let err = socket_path(&deep, "k", &base).unwrap_err().to_string();
        assert!(err.contains("shorter --state"), "{err}");
    }

    #[test]
    fn only_live_runs_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let live = RunDir::create(tmp.path(), "live", None).unwrap();
        let dead = RunDir::create(tmp.path(), "dead", None).unwrap();
        remove_stale_runs(tmp.path(), &["live".to_owned()]);
        assert!(live.dir.exists() && !dead.dir.exists());
    }
}
