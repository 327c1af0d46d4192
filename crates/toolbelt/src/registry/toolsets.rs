//! A toolset only gains operations: a later version of an extension keeps every operation each of
//! its toolsets had, with the release it joined in, so a grant that names the toolset never loses
//! what it granted.

use std::collections::BTreeMap;

use super::ToolsetSpec;

/// What a toolset held then and does not hold now as it did: each `toolset: operation (since)`
/// of `before` missing from `after`'s toolset of that name, or recorded there as joining in
/// another release. Empty when `after` only gains.
pub fn lost_operations<'a>(
    before: impl IntoIterator<Item = &'a ToolsetSpec>,
    after: impl IntoIterator<Item = &'a ToolsetSpec>,
) -> Vec<String> {
    let now: BTreeMap<(&str, &str), &str> = after
        .into_iter()
        .flat_map(|t| {
            t.operations
                .iter()
                .map(move |e| ((t.name.as_str(), e.operation.as_str()), e.since.as_str()))
        })
        .collect();
    before
        .into_iter()
        .flat_map(|t| t.operations.iter().map(move |e| (t.name.as_str(), e)))
        .filter(|(toolset, entry)| now.get(&(*toolset, entry.operation.as_str())) != Some(&entry.since.as_str()))
        .map(|(toolset, entry)| format!("{toolset}: {} (since {})", entry.operation, entry.since))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::ToolsetEntry;

    fn toolset(name: &str, entries: &[(&str, &str)]) -> ToolsetSpec {
        ToolsetSpec {
            name: name.into(),
            operations: entries
                .iter()
                .map(|(operation, since)| ToolsetEntry {
                    operation: (*operation).into(),
                    since: (*since).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_toolset_may_gain_but_not_lose_or_rewrite_an_operation() {
        let before = [toolset(
            "notes.writer",
            &[("notes.add", "1.0.0"), ("notes.view", "1.0.0")],
        )];
        let gained = [toolset(
            "notes.writer",
            &[("notes.add", "1.0.0"), ("notes.view", "1.0.0"), ("notes.edit", "1.1.0")],
        )];
        assert!(lost_operations(&before, &gained).is_empty());
        let dropped = [toolset("notes.writer", &[("notes.add", "1.0.0")])];
        assert_eq!(
            lost_operations(&before, &dropped),
            ["notes.writer: notes.view (since 1.0.0)"]
        );
        let rewritten = [toolset(
            "notes.writer",
            &[("notes.add", "1.0.0"), ("notes.view", "1.1.0")],
        )];
        assert_eq!(
            lost_operations(&before, &rewritten),
            ["notes.writer: notes.view (since 1.0.0)"]
        );
        assert_eq!(
            lost_operations(&before, &[]).len(),
            2,
            "a toolset gone loses everything"
        );
    }
}
