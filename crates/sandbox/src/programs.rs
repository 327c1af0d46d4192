//! The programs a package's process is started with, found on disk: its entry, the interpreter its
//! `#!` line names (through `env`, the program `env` runs, looked up on the package's PATH), and the
//! dynamic loaders; and the installation trees those interpreters load their libraries from.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::policy::{shebang, LOADERS, RUNTIME_PATHS};

/// What a package may execute without `subprocess`, and the trees it must read to do so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Programs {
    pub programs: Vec<PathBuf>,
    pub trees: Vec<PathBuf>,
}

/// The programs `entry` starts with, resolved through links; `path` is the PATH its `env` searches.
pub fn programs_of(entry: &Path, path: &str) -> Programs {
    let mut programs = vec![canonical(entry)];
    if let Some(words) = interpreter_line(entry) {
        let interpreter = canonical(Path::new(&words[0]));
        let via_env = interpreter.file_name().is_some_and(|n| n == "env");
        programs.push(interpreter);
        if via_env {
            let named = words.iter().skip(1).find(|w| !w.starts_with('-'));
            programs.extend(named.and_then(|program| find_on_path(program, path)));
        }
    }
    programs.extend(LOADERS.iter().map(Path::new).filter(|p| p.exists()).map(canonical));
    let trees = programs.iter().filter_map(|p| install_tree(p)).collect();
    Programs { programs, trees }
}

fn interpreter_line(entry: &Path) -> Option<Vec<String>> {
    let mut head = [0u8; 256];
    let read = std::fs::File::open(entry).and_then(|mut f| f.read(&mut head)).ok()?;
    shebang(&head[..read])
}

fn find_on_path(program: &str, path: &str) -> Option<PathBuf> {
    path.split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.is_file())
        .map(|found| canonical(&found))
}

/// `<prefix>` of a program at `<prefix>/bin/<name>` outside the runtime paths (a pyenv or nvm
/// installation), whose libraries live beside its `bin`.
fn install_tree(program: &Path) -> Option<PathBuf> {
    if RUNTIME_PATHS.iter().any(|r| program.starts_with(r)) {
        return None;
    }
    let bin = program.parent()?;
    (bin.file_name()? == "bin").then(|| bin.parent().map(Path::to_owned))?
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_env_script_runs_env_and_the_program_env_finds() {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = tmp.path().join("py");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        let python = prefix.join("bin/python3");
        std::fs::write(&python, "").unwrap();
        let entry = tmp.path().join("entry");
        std::fs::write(&entry, "#!/usr/bin/env python3\nprint()\n").unwrap();
        let found = programs_of(&entry, &format!("/nonexistent:{}", prefix.join("bin").display()));
        let canonical_prefix = std::fs::canonicalize(&prefix).unwrap();
        assert_eq!(found.programs[0], std::fs::canonicalize(&entry).unwrap());
        assert_eq!(found.programs[1], canonical(Path::new("/usr/bin/env")));
        assert_eq!(found.programs[2], canonical_prefix.join("bin/python3"));
        assert!(found.trees.contains(&canonical_prefix), "{found:?}");
    }

    #[test]
    fn a_binary_entry_has_no_interpreter() {
        let found = programs_of(Path::new("/bin/true"), "/usr/bin");
        assert_eq!(found.programs[0], canonical(Path::new("/bin/true")));
        assert!(found.programs[1..].iter().all(|p| p.to_string_lossy().contains("ld-")));
    }
}
