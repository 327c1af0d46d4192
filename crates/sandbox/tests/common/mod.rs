//! The layout both the confinement tests and the spawn bench run in: a state directory with an
//! operator token and one run directory, and a directory outside it.

// Test helpers, like tests, stop loudly on what they did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::path::PathBuf;

use conduit_sandbox::ExecutionPaths;

pub struct Layout {
    _tmp: tempfile::TempDir,
    pub paths: ExecutionPaths,
    pub outside: PathBuf,
}

pub fn layout() -> Layout {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let run = state.join("runs/k");
    for dir in [
        run.join("work"),
        run.join("tmp"),
        state.join("private"),
        tmp.path().join("outside"),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(state.join("private/operator.token"), "secret-token").unwrap();
    std::fs::write(run.join("token"), "own-token").unwrap();
    std::fs::write(tmp.path().join("outside/readable"), "hello").unwrap();
    Layout {
        paths: ExecutionPaths {
            state_dir: state.clone(),
            workdir: run.join("work"),
            tmpdir: run.join("tmp"),
            home: None,
            run_dir: run,
            playbooks: state.join("playbooks"),
            os_dir: PathBuf::from("/usr/bin"),
            private_files: vec![],
        },
        outside: tmp.path().join("outside"),
        _tmp: tmp,
    }
}
