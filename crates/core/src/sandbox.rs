//! A binding's confinement as its configuration states it (`"sandbox"`), and the rules its paths
//! follow. What the setting becomes on a real machine (a policy of trees and rights) is
//! `conduit-sandbox`'s job.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A binding's `sandbox` value: absent means [`Sandbox::default`], the default confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// `"sandbox": "off"`: the process runs with the daemon's own reach (warning `sandbox_disabled`).
    Off,
    Confined(SandboxSpec),
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::Confined(SandboxSpec::default())
    }
}

/// `{"network": "host"|"none", "read": [ABS_PATH...], "write": [ABS_PATH...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    /// `host` (the daemon's network) or `none` (a namespace with nothing reachable).
    #[serde(default)]
    pub network: Network,
    /// Absent: everything but the daemon's state directory is readable. Present: only these trees,
    /// the system's runtime paths and the execution's own directories are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    /// Trees writable besides the working directory and the private temp directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The host's network, as the daemon has it.
    #[default]
    Host,
    /// A network namespace of its own with nothing in it: no address is reachable.
    None,
}

/// Why a path an execution is given (a sandbox list entry, a working directory) is refused, if it is.
pub fn path_problem(path: &str, state_dir: Option<&str>) -> Option<&'static str> {
    if !path.starts_with('/') {
        return Some("the path must be absolute");
    }
    if path.split('/').any(|c| c == ".." || c == ".") {
        return Some("the path must not contain `.` or `..` components");
    }
    let inside = |dir: &str| {
        let dir = dir.trim_end_matches('/');
        path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
    };
    if state_dir.is_some_and(inside) {
        return Some("the daemon's state directory is never reachable from an execution");
    }
    None
}

/// Why a binding's working directory is refused, if it is: a sandbox path's rules, and it may not
/// contain the state directory either (the daemon keeps declared files from it, so a name such as
/// `.local/state/open-conduit/private/operator.token` must lead nowhere).
pub fn cwd_problem(path: &str, state_dir: Option<&str>) -> Option<&'static str> {
    path_problem(path, state_dir).or_else(|| {
        let dir = path.trim_end_matches('/');
        let contains =
            |state: &str| dir.is_empty() || state.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'));
        state_dir
            .is_some_and(contains)
            .then_some("a working directory must not contain the daemon's state directory")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_working_directory_neither_lies_in_nor_contains_the_state_directory() {
        let state = Some("/home/me/.local/state/open-conduit");
        for (path, refused) in [
            ("/home/me/project", false),
            ("/home/me/.local/state/open-conduit-other", false),
            ("/home/me", true),
            ("/", true),
            ("/home/me/.local/state/open-conduit/runs", true),
        ] {
            assert_eq!(cwd_problem(path, state).is_some(), refused, "{path:?}");
        }
    }

    #[test]
    fn sandbox_paths_are_absolute_plain_and_outside_the_state_directory() {
        let state = Some("/home/me/.local/state/open-conduit");
        for (path, refused) in [
            ("/srv/data", false),
            ("/home/me/.local/state", false),
            ("/home/me/.local/state/open-conduit-other", false),
            ("relative/dir", true),
            ("", true),
            ("/srv/../etc", true),
            ("/srv/./x", true),
            ("/home/me/.local/state/open-conduit", true),
            ("/home/me/.local/state/open-conduit/", true),
            ("/home/me/.local/state/open-conduit/private", true),
        ] {
            assert_eq!(path_problem(path, state).is_some(), refused, "{path:?}");
        }
        assert_eq!(path_problem("/anything", None), None, "no state directory known");
    }

    #[test]
    fn the_spec_is_strict() {
        let spec: SandboxSpec = serde_json::from_str(r#"{"network": "none", "write": ["/srv"]}"#).unwrap();
        assert_eq!(spec.network, Network::None);
        assert!(serde_json::from_str::<SandboxSpec>(r#"{"netwrok": "none"}"#).is_err());
        assert!(serde_json::from_str::<SandboxSpec>(r#"{"network": "lan"}"#).is_err());
    }
}
