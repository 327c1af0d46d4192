//! A binding's rules: its grant and its binding grants within its scope's ceiling, its playbook,
//! and what it needs of its executor.

use std::collections::{BTreeMap, BTreeSet};

use conduit_core::names::{is_registration_name, is_reserved_type, is_type_pattern};

use super::Checker;
use crate::diagnostic::{push_pointer, Diagnostic};
use crate::executor::executable;
use crate::grants::{resolve, ExecutorCapabilities};
use crate::model::BindingConfig;

/// A binding's resolved operations, and each of its binding grants'.
pub(super) struct BindingGrants {
    pub operations: BTreeSet<String>,
    pub grants: BTreeMap<String, BTreeSet<String>>,
    /// The operations its playbook declares, as this validation read them.
    pub playbook: Option<BTreeSet<String>>,
}

impl Checker<'_> {
    /// Checks a binding; its grant is its resolved list within the ceiling, and each binding grant's
    /// likewise (what a Work that takes it adds to its token).
    pub(super) fn binding(
        &mut self,
        pointer: &str,
        binding: &BindingConfig,
        ceiling: Option<&BTreeSet<String>>,
        denied: &BTreeSet<String>,
    ) -> BindingGrants {
        let operations = self.grant_list(&binding.operations, &format!("{pointer}/operations"), ceiling, denied);
        let mut grants = BTreeMap::new();
        for (name, grant) in &binding.grants {
            let grant_pointer = push_pointer(&format!("{pointer}/grants"), name);
            if !is_registration_name(name) {
                self.report(
                    grant_pointer.clone(),
                    "invalid_name",
                    "a grant's name is a lower-case letter followed by lower-case letters, digits, `-` or `_`",
                    "rename the grant",
                );
            }
            let pointer = format!("{grant_pointer}/operations");
            grants.insert(
                name.clone(),
                self.grant_list(&grant.operations, &pointer, ceiling, denied),
            );
        }
        self.binding_rest(pointer, binding);
        let playbook = self.playbook(pointer, binding, ceiling.map(|_| &operations));
        BindingGrants {
            operations,
            grants,
            playbook,
        }
    }

    /// A grant list resolved within the ceiling: a toolset is narrowed to it; a name outside it is
    /// `operation_denied` when the scope denies it, else `authority_widening`. Against an unknown
    /// ceiling nothing is checked, and nothing is granted.
    fn grant_list(
        &mut self,
        list: &[String],
        pointer: &str,
        ceiling: Option<&BTreeSet<String>>,
        denied: &BTreeSet<String>,
    ) -> BTreeSet<String> {
        let resolved = resolve(list, self.registry, pointer, &mut self.found);
        let Some(ceiling) = ceiling else {
            return BTreeSet::new();
        };
        self.enumeration_warnings(list, pointer);
        for (i, op) in &resolved.explicit {
            if denied.contains(op) {
                self.report(
                    format!("{pointer}/{i}"),
                    "operation_denied",
                    "the scope's authorization denies this operation",
                    "remove it, or lift the scope's denial first",
                );
            } else if !ceiling.contains(op) {
                self.widening(format!("{pointer}/{i}"), "its scope");
            }
        }
        resolved.granted.intersection(ceiling).cloned().collect()
    }

    /// A binding's playbook must exist; operations it declares but the binding is not granted are a
    /// warning, since its agent would be refused them at run time.
    /// Answers the operations the playbook declares; the warning needs the binding's grant (known
    /// once its ceiling is).
    fn playbook(
        &mut self,
        pointer: &str,
        binding: &BindingConfig,
        grant: Option<&BTreeSet<String>>,
    ) -> Option<BTreeSet<String>> {
        let name = binding.playbook.as_ref()?;
        let Some(declared) = self.registry.playbook(name).cloned() else {
            self.report(
                format!("{pointer}/playbook"),
                "unknown_reference",
                "no playbook has this name",
                "name a playbook in skills/<name>/SKILL.md",
            );
            return None;
        };
        let missing: Vec<&str> = grant
            .map(|grant| declared.difference(grant).map(String::as_str).collect())
            .unwrap_or_default();
        if !missing.is_empty() {
            self.found.push(Diagnostic::warning(
                format!("{pointer}/playbook"),
                "playbook_operations_not_granted",
                format!(
                    "the playbook uses operations this binding is not granted: {}",
                    missing.join(", ")
                ),
                "grant them to the binding (within its scope's ceiling), or use a playbook that needs less".to_owned(),
            ));
        }
        Some(declared)
    }

    /// A binding's checks that do not depend on its scope's ceiling.
    fn binding_rest(&mut self, pointer: &str, binding: &BindingConfig) {
        if let Err(d) = crate::retry::policy(pointer, binding.retry.as_ref()) {
            self.found.push(d);
        }
        for (i, pattern) in binding.emits.iter().flatten().enumerate() {
            if !is_type_pattern(pattern) || is_reserved_type(pattern) || pattern == "*" {
                self.report(
                    format!("{pointer}/emits/{i}"),
                    "invalid_value",
                    "an emits entry is a non-reserved event type or family pattern (`demo.*`)",
                    "fix the pattern; core, agent, tool and toolbelt families belong to the host",
                );
            }
        }
        for (i, name) in binding.secrets.iter().enumerate() {
            if !self.config.secrets.contains_key(name) {
                self.report(
                    format!("{pointer}/secrets/{i}"),
                    "unknown_reference",
                    "no secret has this name",
                    "define it under the top-level `secrets`",
                );
            }
        }
        let Some(capabilities) = self.registry.executor(&binding.executor) else {
            return self.report(
                format!("{pointer}/executor"),
                "unknown_reference",
                "no registered executor has this name",
                "use `shell`, `claude-code` or `codex`",
            );
        };
        let state_dir = self.registry.state_dir();
        if let Some(Err(d)) = executable(pointer, binding, state_dir) {
            self.found.push(d);
        }
        self.found
            .extend(crate::sandbox::setting(pointer, binding.sandbox.as_ref(), state_dir).1);
        self.capabilities(pointer, binding, capabilities);
    }

    /// Mechanical capabilities: what the binding needs that its executor cannot do.
    fn capabilities(&mut self, pointer: &str, binding: &BindingConfig, can: ExecutorCapabilities) {
        let needs = [
            (
                !can.toolbelt && !binding.operations.is_empty(),
                "operations",
                "gives its process no toolbelt, so granted operations could never be called",
            ),
            (
                !can.toolbelt && !binding.grants.is_empty(),
                "grants",
                "gives its process no toolbelt, so a grant's operations could never be called",
            ),
            (
                !can.secrets && !binding.secrets.is_empty(),
                "secrets",
                "cannot hand secrets to its process",
            ),
            (
                !can.playbook && binding.playbook.is_some(),
                "playbook",
                "cannot turn a playbook on",
            ),
        ];
        for (_, field, why) in needs.into_iter().filter(|(needed, ..)| *needed) {
            self.report(
                format!("{pointer}/{field}"),
                "invalid_capability",
                &format!("the binding's executor {why}"),
                &format!("remove `{field}`, or use an executor that can serve it (such as `shell`)"),
            );
        }
    }
}
