//! Grant lists: operation names, `@toolset`s, and `!` denials of either, resolved in order against
//! the running release's registry: what the list names and its toolsets' operations, less what it
//! denies. A name the registry does not know is `unknown_reference`, so a typo never grants nor fails
//! to deny.

use std::collections::{BTreeMap, BTreeSet};

use conduit_core::names::{BUILTIN_OPERATIONS, BUILTIN_TOOLSETS};

use crate::diagnostic::Diagnostic;
use crate::executor::Agent;

/// The warnings about grants (doctor's grants check): a playbook that uses operations its binding
/// is not granted, and a list that enumerates an older release's toolset instead of naming it.
pub const GRANT_WARNINGS: [&str; 2] = ["playbook_operations_not_granted", "toolset_enumerated"];

/// What an executor can mechanically do for a binding. Validation refuses a binding that needs
/// more than its executor can (`invalid_capability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorCapabilities {
    /// It gives its process a toolbelt (socket and token): without one, granted operations could
    /// never be called.
    pub toolbelt: bool,
    /// It hands secrets to its process (as environment variables).
    pub secrets: bool,
    /// It turns a playbook on for the turns it starts.
    pub playbook: bool,
}

/// The shell executor: a toolbelt socket and token, secrets in the environment, and the playbook
/// directory in `OS_PLAYBOOK_DIR` (which `os mcp` serves as its instructions).
pub const SHELL_EXECUTOR: (&str, ExecutorCapabilities) = (
    crate::executor::SHELL,
    ExecutorCapabilities {
        toolbelt: true,
        secrets: true,
        playbook: true,
    },
);

/// The agent executors (`claude-code`, `codex`): the same as the shell's; the playbook is handed
/// to the agent as its instructions.
pub const AGENT_EXECUTORS: [(&str, ExecutorCapabilities); 2] = [
    (Agent::ClaudeCode.executor(), SHELL_EXECUTOR.1),
    (Agent::Codex.executor(), SHELL_EXECUTOR.1),
];

/// The GitHub hold (`github-hold`): a toolbelt for its own calls, no secrets, no playbook.
pub const HOLD_EXECUTOR: (&str, ExecutorCapabilities) = (
    crate::executor::GITHUB_HOLD,
    ExecutorCapabilities {
        toolbelt: true,
        secrets: false,
        playbook: false,
    },
);

/// The operations, toolsets, playbooks and executors the running release registers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    extension_operations: BTreeSet<String>,
    /// Each toolset's operations, with the release each joined in.
    toolsets: BTreeMap<String, BTreeMap<String, String>>,
    /// Each playbook's declared operations.
    playbooks: BTreeMap<String, BTreeSet<String>>,
    /// Executors besides the shell, which every release has.
    executors: BTreeMap<String, ExecutorCapabilities>,
    /// The daemon's state directory, which no sandbox path may reach into (unknown offline).
    state_dir: Option<String>,
}

impl Registry {
    /// The builtins and these extension operations.
    pub fn with_operations(operations: impl IntoIterator<Item = String>) -> Registry {
        Registry {
            extension_operations: operations.into_iter().collect(),
            ..Registry::default()
        }
    }

    /// Adds an extension's toolset: its name and the operations it grants, each with the release it
    /// joined in (`since`).
    pub fn with_toolset(mut self, name: &str, operations: impl IntoIterator<Item = (String, String)>) -> Registry {
        self.toolsets.insert(name.to_owned(), operations.into_iter().collect());
        self
    }

    /// Adds a playbook and the operations its frontmatter declares.
    pub fn with_playbook(mut self, name: &str, operations: impl IntoIterator<Item = String>) -> Registry {
        self.playbooks.insert(name.to_owned(), operations.into_iter().collect());
        self
    }

    /// Adds an executor and what it can do.
    pub fn with_executor(mut self, name: &str, capabilities: ExecutorCapabilities) -> Registry {
        self.executors.insert(name.to_owned(), capabilities);
        self
    }

    /// Names the state directory sandbox paths are checked against.
    pub fn with_state_dir(mut self, dir: &str) -> Registry {
        self.state_dir = Some(dir.to_owned());
        self
    }

    pub fn state_dir(&self) -> Option<&str> {
        self.state_dir.as_deref()
    }

    /// A registered executor's capabilities.
    pub fn executor(&self, name: &str) -> Option<ExecutorCapabilities> {
        std::iter::once(SHELL_EXECUTOR)
            .chain(AGENT_EXECUTORS)
            .chain([HOLD_EXECUTOR])
            .find(|(executor, _)| *executor == name)
            .map(|(_, capabilities)| capabilities)
            .or_else(|| self.executors.get(name).copied())
    }

    pub fn playbook(&self, name: &str) -> Option<&BTreeSet<String>> {
        self.playbooks.get(name)
    }

    /// Every extension toolset with its operations' `since` releases.
    pub fn toolset_versions(&self) -> impl Iterator<Item = (&String, &BTreeMap<String, String>)> {
        self.toolsets.iter()
    }

    pub fn knows(&self, operation: &str) -> bool {
        BUILTIN_OPERATIONS.contains(&operation) || self.extension_operations.contains(operation)
    }

    /// The operations of a toolset, builtin or published by an extension.
    pub fn toolset(&self, name: &str) -> Option<BTreeSet<String>> {
        let builtin = BUILTIN_TOOLSETS.iter().find(|(n, _)| *n == name);
        builtin
            .map(|(_, ops)| ops.iter().map(|o| (*o).to_owned()).collect())
            .or_else(|| self.toolsets.get(name).map(|ops| ops.keys().cloned().collect()))
    }
}

/// A resolved grant list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Every operation the list grants.
    pub granted: BTreeSet<String>,
    /// Operations the list names explicitly, with their index: these must fit the ceiling, while
    /// a toolset is narrowed to it.
    pub explicit: Vec<(usize, String)>,
    /// Operations the list denies.
    pub denied: BTreeSet<String>,
    /// Whether every entry resolved: a list with an unknown entry is not a ceiling anything can be
    /// checked against.
    pub complete: bool,
}

/// Resolves `list` (at `pointer`), reporting each entry the registry does not know.
pub fn resolve(list: &[String], registry: &Registry, pointer: &str, found: &mut Vec<Diagnostic>) -> Resolved {
    let mut resolved = Resolved {
        complete: true,
        ..Resolved::default()
    };
    let mut granted = BTreeSet::new();
    for (i, entry) in list.iter().enumerate() {
        let (deny, name) = match entry.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, entry.as_str()),
        };
        let Some(operations) = lookup(name, registry) else {
            found.push(unknown(format!("{pointer}/{i}"), name.starts_with('@')));
            resolved.complete = false;
            continue;
        };
        if deny {
            resolved.denied.extend(operations);
        } else {
            if !name.starts_with('@') {
                resolved.explicit.push((i, name.to_owned()));
            }
            granted.extend(operations);
        }
    }
    resolved.granted = granted.difference(&resolved.denied).cloned().collect();
    resolved
}

/// The operations an entry's name stands for: one operation, or a toolset's.
fn lookup(name: &str, registry: &Registry) -> Option<BTreeSet<String>> {
    match name.strip_prefix('@') {
        Some(toolset) => registry.toolset(toolset),
        None => registry.knows(name).then(|| BTreeSet::from([name.to_owned()])),
    }
}

fn unknown(pointer: String, toolset: bool) -> Diagnostic {
    let (message, remedy) = if toolset {
        (
            "no registered toolset has this name",
            "fix the toolset name; toolsets are `@<extension>.<role>`",
        )
    } else {
        (
            "no registered operation has this name",
            "fix the operation name; `open-conduit tools` lists the registered operations",
        )
    };
    Diagnostic::error(pointer, "unknown_reference", message, remedy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn registry() -> Registry {
        let since = |ops: &[&str]| {
            ops.iter()
                .map(|o| ((*o).to_owned(), "1.0".to_owned()))
                .collect::<Vec<_>>()
        };
        Registry::with_operations(names(&["gh.view", "gh.edit", "gh.close"]))
            .with_toolset("gh.author", since(&["gh.view", "gh.edit", "emit"]))
    }

    fn granted(list: &[&str]) -> (Vec<String>, Vec<(String, &'static str)>) {
        let mut found = Vec::new();
        let r = resolve(&names(list), &registry(), "/ops", &mut found);
        (
            r.granted.into_iter().collect(),
            found.into_iter().map(|d| (d.pointer, d.code)).collect(),
        )
    }

    #[test]
    fn names_toolsets_and_denials_resolve_in_order() {
        assert_eq!(granted(&["@gh.author"]).0, names(&["emit", "gh.edit", "gh.view"]));
        assert_eq!(granted(&["@gh.author", "!gh.edit"]).0, names(&["emit", "gh.view"]));
        assert_eq!(granted(&["!@gh.author", "gh.close", "emit"]).0, names(&["gh.close"]));
        assert_eq!(granted(&["@core.worker", "!create_work"]).0.len(), 4);
    }

    #[test]
    fn typos_never_grant_nor_fail_to_deny() {
        let (granted_ops, found) = granted(&["@gh.autor", "gh.veiw", "!gh.eidt", "gh.view"]);
        assert_eq!(granted_ops, names(&["gh.view"]));
        assert_eq!(
            found,
            vec![
                ("/ops/0".to_owned(), "unknown_reference"),
                ("/ops/1".to_owned(), "unknown_reference"),
                ("/ops/2".to_owned(), "unknown_reference"),
            ]
        );
    }

    #[test]
    fn explicit_names_are_kept_apart_from_toolsets() {
        let mut found = Vec::new();
        let r = resolve(&names(&["@gh.author", "gh.close"]), &registry(), "/ops", &mut found);
        assert_eq!(r.explicit, vec![(1, "gh.close".to_owned())]);
    }
}
