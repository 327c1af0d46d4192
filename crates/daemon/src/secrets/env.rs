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
