//! What `open-conduit` says about itself: shell completions and manual pages, generated from the
//! same clap definitions that parse its command line, so they never drift from it.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use conduit_cli::report::Failure;

use crate::cli::Cli;

/// Prints `shell`'s completion script for every command and option.
pub fn completion(shell: clap_complete::Shell) -> Result<(), Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "open-conduit", &mut script);
    print(&script)
}

/// Prints the top page, or writes `open-conduit.1` and `open-conduit-<command>.1` for every command
/// into `dir` and names each file written.
pub fn man(dir: Option<&Path>) -> Result<(), Failure> {
    let command = Cli::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command).render(&mut page).map_err(local)?;
        return print(&page);
    };
    std::fs::create_dir_all(dir).map_err(local)?;
    clap_mangen::generate_to(command, dir).map_err(local)?;
    let mut written: Vec<String> = std::fs::read_dir(dir)
        .map_err(local)?
        .flatten()
        .map(|entry| entry.path().display().to_string())
        .filter(|path| path.ends_with(".1"))
        .collect();
    written.sort();
    print(format!("{}\n", written.join("\n")).as_bytes())
}

fn print(bytes: &[u8]) -> Result<(), Failure> {
    std::io::stdout().write_all(bytes).map_err(local)
}

fn local(e: std::io::Error) -> Failure {
    Failure::Local(format!("cannot write the pages: {e}"))
}
