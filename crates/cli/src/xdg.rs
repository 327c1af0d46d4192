//! The XDG base directories (state, configuration): the variable's directory when it is absolute,
//! as the specification says (an empty or relative one is ignored), else its default under `$HOME`.

use std::ffi::OsString;
use std::path::PathBuf;

/// `xdg` (the variable's value) when absolute, else `home` joined with `under_home`; `None` when
/// neither is usable.
pub fn base_dir(xdg: Option<OsString>, home: Option<OsString>, under_home: &str) -> Option<PathBuf> {
    match xdg.map(PathBuf::from).filter(|dir| dir.is_absolute()) {
        Some(dir) => Some(dir),
        None => Some(PathBuf::from(home.filter(|h| !h.is_empty())?).join(under_home)),
    }
}
