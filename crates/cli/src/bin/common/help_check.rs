//! Checks both binaries' tests run on their clap definitions: every argument is described, and
//! every command's help is kept in a snapshot, so a change to it is a visible diff.

use std::path::Path;

/// The arguments of `command` and its subcommands that have no help text, as `command: arg`.
pub fn undocumented(command: &clap::Command) -> Vec<String> {
    let mut missing = Vec::new();
    walk(command, "", &mut |command, name| {
        for arg in command.get_arguments() {
            let generated = matches!(arg.get_id().as_str(), "help" | "version");
            if arg.get_help().is_none() && !generated {
                missing.push(format!("{name}: {}", arg.get_id()));
            }
        }
    });
    missing
}

/// Compares every command's `--help` with the snapshot `tests/snapshots/<file>`; with
/// OPEN_CONDUIT_BLESS set, writes it first.
pub fn assert_help_snapshot(mut command: clap::Command, file: &str) {
    command.build();
    let mut help = String::new();
    walk(&command, "", &mut |command, name| {
        let text = command.clone().render_long_help().to_string();
        let lines: Vec<String> = text.lines().map(without_env_value).collect();
        help.push_str(&format!("==> {name} --help\n{}\n\n", lines.join("\n").trim_end()));
    });
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(file);
    if std::env::var_os("OPEN_CONDUIT_BLESS").is_some() {
        std::fs::write(&path, &help).expect("write the snapshot");
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == help,
        "the help differs from {}; review `git diff` after accepting it with OPEN_CONDUIT_BLESS=1 cargo test -p conduit-cli help",
        path.display()
    );
}

/// Calls `visit` on `command` and every subcommand below it (clap's own `help` left out), each
/// with its full name.
fn walk(command: &clap::Command, path: &str, visit: &mut dyn FnMut(&clap::Command, &str)) {
    let name = format!("{path} {}", command.get_name()).trim().to_owned();
    visit(command, &name);
    for sub in command.get_subcommands().filter(|c| c.get_name() != "help") {
        walk(sub, &name, visit);
    }
}

/// `[env: NAME=value]` as `[env: NAME]`: what this shell happens to set is no part of the help.
fn without_env_value(line: &str) -> String {
    match line.split_once("[env: ") {
        Some((before, rest)) => {
            let (name, after) = rest.split_once(']').unwrap_or((rest, ""));
            let name = name.split('=').next().unwrap_or(name);
            format!("{before}[env: {name}]{after}")
        }
        None => line.to_owned(),
    }
}
