//! Playbooks: `skills/<name>/SKILL.md` under the state directory's `playbooks/`, each declaring in
//! its frontmatter the operations it relies on (`operations: [github.issue.view, emit]`, or one
//! `- name` per line). Validation warns when a binding's playbook needs more than the binding is
//! granted, and a refused call whose operation the pinned playbook declares is recorded as
//! `config_drift`.

use std::path::Path;

use conduit_config::Registry;

/// Adds every playbook under `playbooks/skills/` to `registry`.
pub fn register(registry: Registry, playbooks: &Path) -> Registry {
    let Ok(entries) = std::fs::read_dir(playbooks.join("skills")) else {
        return registry;
    };
    entries.flatten().fold(registry, |registry, entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        match std::fs::read_to_string(entry.path().join("SKILL.md")) {
            Ok(text) => registry.with_playbook(&name, declared_operations(&text)),
            Err(_) => registry,
        }
    })
}

/// The text of the playbook `name` under `playbooks`, if it is there.
pub fn text(playbooks: &Path, name: &str) -> Option<String> {
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    plain
        .then(|| std::fs::read_to_string(playbooks.join("skills").join(name).join("SKILL.md")).ok())
        .flatten()
}

/// The operations a playbook's frontmatter declares; none without frontmatter.
pub fn declared_operations(text: &str) -> Vec<String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Vec::new();
    }
    let frontmatter: Vec<&str> = lines.take_while(|l| l.trim() != "---").collect();
    let Some(at) = frontmatter
        .iter()
        .position(|l| l.trim_start().starts_with("operations:"))
    else {
        return Vec::new();
    };
    let inline = frontmatter[at].trim_start().trim_start_matches("operations:").trim();
    if let Some(list) = inline.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
        return list.split(',').map(unquote).filter(|s| !s.is_empty()).collect();
    }
    frontmatter[at + 1..]
        .iter()
        .map_while(|l| l.trim_start().strip_prefix("- "))
        .map(unquote)
        .collect()
}

fn unquote(item: &str) -> String {
    item.trim().trim_matches(|c| c == '"' || c == '\'').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_lists_inline_and_as_blocks() {
        let inline = "---\nname: triage\noperations: [emit, \"read_context\"]\n---\n# Triage\n";
        assert_eq!(declared_operations(inline), vec!["emit", "read_context"]);
        let block = "---\noperations:\n  - emit\n  - 'wait'\ndescription: x\n---\n";
        assert_eq!(declared_operations(block), vec!["emit", "wait"]);
        assert!(declared_operations("# no frontmatter\noperations: [emit]").is_empty());
        assert!(declared_operations("---\nname: x\n---\n").is_empty());
    }

    #[test]
    fn playbooks_register_by_directory_name() {
        let tmp = tempfile::tempdir().unwrap();
        let skill = tmp.path().join("skills/triage");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(skill.join("SKILL.md"), "---\noperations: [emit]\n---\n").unwrap();
        let registry = register(Registry::default(), tmp.path());
        assert_eq!(registry.playbook("triage").map(|p| p.len()), Some(1));
        assert!(registry.playbook("other").is_none());
    }
}
