//! Where `env:` references (and the `HOME` a `cmd:` receives) are read from.

use std::ffi::OsString;

/// A source of environment variables. The daemon uses [`ProcessEnv`]; tests inject their own, and any
/// `Fn(&str) -> Option<OsString>` closure is one.
pub trait EnvSource: Send + Sync {
    fn var(&self, name: &str) -> Option<OsString>;
}

/// The daemon's own process environment, read at each resolution.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name)
    }
}

impl<F: Fn(&str) -> Option<OsString> + Send + Sync> EnvSource for F {
    fn var(&self, name: &str) -> Option<OsString> {
        self(name)
    }
}

/// A portable variable name: a letter or `_`, then letters, digits or `_`.
pub(super) fn is_var_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::is_var_name;

    #[test]
    fn variable_names() {
        assert!(is_var_name("GITHUB_TOKEN"));
        assert!(is_var_name("_x1"));
        assert!(!is_var_name(""));
        assert!(!is_var_name("1A"));
        assert!(!is_var_name("A=B"));
        assert!(!is_var_name("A B"));
    }
}
