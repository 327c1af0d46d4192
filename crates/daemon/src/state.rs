//! The state directory: owner-only, locked by one daemon at a time.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

use crate::DaemonError;

/// What the daemon keeps inside the state directory, with the mode each must have. The directory
/// itself is refused unless owner-only, so nothing here was reachable by another user: a looser
/// mode found at start (a restore from a backup, an edit) is tightened, and the log says so.
const KEPT: [(&str, u32); 10] = [
    ("instance", 0o600),
    ("runs", 0o700),
    ("logs", 0o700),
    ("artifacts", 0o700),
    ("daemon.lock", 0o600),
    ("store.db", 0o600),
    ("store.db-wal", 0o600),
    ("store.db-shm", 0o600),
    ("store.db-redo", 0o600),
    ("private/operator.token", 0o600),
];

/// Longest socket path used in place; past it the socket moves under `/tmp` (macOS allows 104 bytes).
pub(crate) const MAX_SOCKET_PATH: usize = 100;

/// A locked state directory and the paths inside it.
pub struct StateDir {
    root: PathBuf,
    /// Held for the daemon's lifetime; the flock is released when it closes.
    _lock: File,
}

impl StateDir {
    /// Creates the directory (0700) if needed, refuses one that is group/world-accessible or owned by
    /// another user, and takes an exclusive lock on it.
    pub fn lock(root: &Path) -> Result<StateDir, DaemonError> {
        create_private_dir(root)?;
        check_private_dir(root)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(root.join("daemon.lock"))
            .map_err(|e| DaemonError::io("open the state lock", root, e))?;
        flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(|_| DaemonError::Locked(root.to_owned()))?;
        let state = StateDir {
            root: root.to_owned(),
            _lock: lock,
        };
        create_private_dir(&state.private_dir())?;
        check_private_dir(&state.private_dir())?;
        create_private_dir(&state.runs_dir())?;
        create_private_dir(&state.logs_dir())?;
        create_private_dir(&state.artifacts_dir())?;
        for (name, mode) in KEPT {
            tighten(&root.join(name), mode)?;
        }
        Ok(state)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn management_socket(&self) -> PathBuf {
        self.root.join("management.sock")
    }

    /// The management socket's path, ready to bind: short enough for a Unix socket, and cleared of a
    /// dead daemon's socket. Holding the lock proves no live daemon serves it; anything there that is
    /// not a socket this user owns is left alone and refused.
    pub fn clear_management_socket(&self) -> Result<PathBuf, DaemonError> {
        let path = self.management_socket();
        if path.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(DaemonError::SocketPathTooLong(path));
        }
        match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(path),
            Err(e) => Err(DaemonError::io("inspect the management socket", &path, e)),
            Ok(meta) if meta.file_type().is_socket() && meta.uid() == rustix::process::geteuid().as_raw() => {
                fs::remove_file(&path).map_err(|e| DaemonError::io("remove the stale management socket", &path, e))?;
                Ok(path)
            }
            Ok(_) => Err(DaemonError::NotOurSocket(path)),
        }
    }

    pub fn private_dir(&self) -> PathBuf {
        self.root.join("private")
    }

    pub fn operator_token(&self) -> PathBuf {
        self.private_dir().join("operator.token")
    }

    /// This daemon's instance id, made on its first start and kept: the owner its attempts are
    /// leased to, so a restarted daemon knows its own among those other daemons lease on a shared
    /// store.
    pub fn instance_id(&self) -> Result<String, DaemonError> {
        let path = self.root.join("instance");
        match fs::read_to_string(&path) {
            Ok(text) => instance_id_in(&text).ok_or(DaemonError::BadInstance(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh = uuid::Uuid::now_v7().to_string();
                write_private_file(&path, format!("{fresh}\n").as_bytes())?;
                Ok(fresh)
            }
            Err(e) => Err(DaemonError::io("read", &path, e)),
        }
    }

    pub fn store_path(&self) -> PathBuf {
        self.root.join("store.db")
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// Declared artifacts, one directory per execution.
    pub fn artifacts_dir(&self) -> PathBuf {
        self.root.join("artifacts")
    }
}

/// The instance id a file holds, as the daemon writes it: one hyphenated, non-nil UUID.
fn instance_id_in(text: &str) -> Option<String> {
    let id = uuid::Uuid::try_parse(text.trim()).ok().filter(|id| !id.is_nil())?;
    let canonical = id.hyphenated().to_string();
    (canonical == text.trim()).then_some(canonical)
}

/// Creates `dir` with mode 0700 if it does not exist.
pub fn create_private_dir(dir: &Path) -> Result<(), DaemonError> {
    match fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) => Err(DaemonError::io("create the directory", dir, e)),
    }
}

/// Refuses a directory that another user owns or that group or others may access.
pub fn check_private_dir(dir: &Path) -> Result<(), DaemonError> {
    let meta = fs::symlink_metadata(dir).map_err(|e| DaemonError::io("inspect the directory", dir, e))?;
    let mode = meta.mode() & 0o777;
    check_owner(dir, &meta)?;
    if !meta.is_dir() || mode & 0o077 != 0 {
        return Err(DaemonError::UnsafeDirectory {
            path: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Refuses what another user owns: it is not the daemon's to use or to change.
fn check_owner(path: &Path, meta: &fs::Metadata) -> Result<(), DaemonError> {
    if meta.uid() == rustix::process::geteuid().as_raw() {
        return Ok(());
    }
    Err(DaemonError::ForeignOwner {
        path: path.to_owned(),
        uid: meta.uid(),
    })
}

/// Gives what the daemon keeps at `path` the mode it must have, if it is there: a directory or a
/// regular file of ours with group or other bits is tightened (and logged); a symbolic link or
/// another user's file is refused.
fn tighten(path: &Path, mode: u32) -> Result<(), DaemonError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(DaemonError::io("inspect", path, e)),
    };
    check_owner(path, &meta)?;
    let found = meta.mode() & 0o777;
    if meta.file_type().is_symlink() || (!meta.is_dir() && !meta.is_file()) {
        return Err(DaemonError::NotOurs(path.to_owned()));
    }
    if found & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| DaemonError::io("tighten the mode of", path, e))?;
        tracing::warn!(path = %path.display(), was = format!("{found:o}"), now = format!("{mode:o}"), "tightened a private file or directory that group or others could access");
    }
    Ok(())
}

/// Writes `contents` to `path` with mode 0600 through a temporary file in the same directory and a
/// rename, so a reader sees the old file or the new one, never a partial one.
pub fn write_private_file(path: &Path, contents: &[u8]) -> Result<(), DaemonError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp", uuid::Uuid::now_v7()));
    let write = || -> std::io::Result<()> {
        let mut file = OpenOptions::new().create_new(true).write(true).mode(0o600).open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        DaemonError::io("write the file", path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_group_writable_dirs_and_second_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let first = StateDir::lock(&root).unwrap();
        assert!(matches!(StateDir::lock(&root), Err(DaemonError::Locked(_))));
        drop(first);
        fs::set_permissions(&root, fs::Permissions::from_mode(0o770)).unwrap();
        assert!(matches!(
            StateDir::lock(&root),
            Err(DaemonError::UnsafeDirectory { .. })
        ));
    }

    #[test]
    fn the_instance_id_is_made_once_and_kept_and_a_damaged_one_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let first = StateDir::lock(&root).unwrap().instance_id().unwrap();
        let again = StateDir::lock(&root).unwrap().instance_id().unwrap();
        assert_eq!(first, again);
        let mode = fs::metadata(root.join("instance")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let braced = format!("{{{first}}}");
        for damaged in [
            "not an id",
            "00000000-0000-0000-0000-000000000000",
            &first.to_uppercase(),
            &braced,
        ] {
            fs::write(root.join("instance"), format!("{damaged}\n")).unwrap();
            let found = StateDir::lock(&root).unwrap().instance_id();
            assert!(
                matches!(found, Err(DaemonError::BadInstance(_))),
                "{damaged}: {found:?}"
            );
        }
    }

    #[test]
    fn private_files_are_0600_and_replaced_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        write_private_file(&path, b"one").unwrap();
        write_private_file(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "no temporary file is left"
        );
    }

    #[test]
    fn what_the_daemon_keeps_is_tightened_at_start_and_links_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        drop(StateDir::lock(&root).unwrap());
        fs::write(root.join("store.db"), b"").unwrap();
        fs::set_permissions(root.join("store.db"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(root.join("store.db-redo"), b"").unwrap();
        fs::set_permissions(root.join("store.db-redo"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(root.join("private/operator.token"), b"t").unwrap();
        fs::set_permissions(root.join("private/operator.token"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(root.join("logs"), fs::Permissions::from_mode(0o777)).unwrap();
        drop(StateDir::lock(&root).unwrap());
        let mode = |name: &str| fs::metadata(root.join(name)).unwrap().mode() & 0o777;
        assert_eq!((mode("store.db"), mode("store.db-redo")), (0o600, 0o600));
        assert_eq!((mode("private/operator.token"), mode("logs")), (0o600, 0o700));

        fs::remove_file(root.join("private/operator.token")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("private/operator.token")).unwrap();
        assert!(matches!(StateDir::lock(&root), Err(DaemonError::NotOurs(_))));
    }

    #[test]
    fn a_state_directory_another_user_owns_is_refused_as_such() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: only root can give a directory to another user here");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
        rustix::fs::chown(&root, Some(rustix::fs::Uid::from_raw(65534)), None).unwrap();
        let refused = StateDir::lock(&root).err().unwrap();
        assert!(
            matches!(refused, DaemonError::ForeignOwner { uid: 65534, .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains("owned by user 65534"), "{refused}");
    }
}
