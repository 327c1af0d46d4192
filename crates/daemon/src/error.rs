use std::path::{Path, PathBuf};

use conduit_config::Diagnostic;

/// Why the daemon could not start or keep running; each says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("another daemon holds the lock on {0}; stop it first, or use another --state directory")]
    Locked(PathBuf),
    #[error("{path} must be a directory owned by you with no group or other access (mode is {mode:o}); run `chmod 700 {path}`", path = .path.display())]
    UnsafeDirectory { path: PathBuf, mode: u32 },
    #[error("{path} is owned by user {uid}, not by you; run the daemon as that user, or give it a --state directory of your own", path = .path.display())]
    ForeignOwner { path: PathBuf, uid: u32 },
    #[error("{} is a symbolic link or a special file where the daemon keeps its own; move it away and start again", .0.display())]
    NotOurs(PathBuf),
    #[error("could not {what} {path}: {source}", path = .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the configuration is not valid:\n{}", render(.0))]
    Config(Vec<Diagnostic>),
    #[error(
        "the committed configuration cannot be restored ({0}); start with --config FILE naming a valid configuration"
    )]
    StoredConfig(String),
    #[error(
        "the committed configuration cannot be restored ({stored}), and the config file is no replacement: {file}"
    )]
    Unrestorable { stored: String, file: Box<DaemonError> },
    #[error(
        "the management socket path {} is longer than a Unix socket allows ({} bytes); use a shorter --state directory",
        .0.display(), crate::state::MAX_SOCKET_PATH
    )]
    SocketPathTooLong(PathBuf),
    #[error("{} is not a socket you own, so it is not a stale daemon's; move it away and start again", .0.display())]
    NotOurSocket(PathBuf),
    #[error(
        "--listen {0} is not a loopback address; the API has no TLS, so only 127.0.0.1 or [::1] may be listened on"
    )]
    NotLoopback(std::net::SocketAddr),
    #[error(
        "{} does not hold this daemon's instance id; restore it, or remove it to start as a new instance \
         (the attempts of the old one are then not adopted)",
        .0.display()
    )]
    BadInstance(PathBuf),
    #[error("the store's password reference did not resolve ({}): {}", .0.code(), .0.remedy())]
    StorePassword(crate::secrets::SecretError),
    #[error("storage failed: {0}")]
    Store(#[from] conduit_store::StoreError),
}

impl DaemonError {
    pub fn io(what: &'static str, path: &Path, source: std::io::Error) -> DaemonError {
        DaemonError::Io {
            what,
            path: path.to_owned(),
            source,
        }
    }
}

fn render(found: &[Diagnostic]) -> String {
    found
        .iter()
        .map(|d| {
            format!(
                "  {} {}: {} ({})",
                if d.pointer.is_empty() { "/" } else { &d.pointer },
                d.code,
                d.message,
                d.remedy
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
