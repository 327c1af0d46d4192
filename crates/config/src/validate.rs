//! From bytes to a validated configuration, or every independent diagnostic.

use std::collections::{BTreeMap, BTreeSet};

use conduit_core::canonical::{canonical_json, sha256_hex};
use conduit_core::names::{is_registration_name, is_reserved_type, is_type_pattern, BUILTIN_OPERATIONS};
use conduit_core::Duration;
use serde_json::Value;

use crate::diagnostic::{push_pointer, Diagnostic};
use crate::model::{BindingConfig, Config, ScopeConfig, ShellConfig};
use crate::snapshot::Snapshot;
use crate::{strict, MAX_CONFIG_BYTES};

const SUPPORTED_VERSION: u32 = 1;
const SHELL_EXECUTOR: &str = "shell";

/// The operations the running release registers, against which grants are resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    extension_operations: BTreeSet<String>,
}

impl Registry {
    /// The builtins and these extension operations.
    pub fn with_operations(operations: impl IntoIterator<Item = String>) -> Registry {
        Registry {
            extension_operations: operations.into_iter().collect(),
        }
    }

    pub fn knows(&self, operation: &str) -> bool {
        BUILTIN_OPERATIONS.contains(&operation) || self.extension_operations.contains(operation)
    }
}

/// Parses and validates configuration bytes against the builtins alone.
pub fn parse(bytes: &[u8]) -> Result<Snapshot, Vec<Diagnostic>> {
    parse_with(bytes, &Registry::default())
}

/// Parses and validates configuration bytes against a registry. The snapshot's generation is 0 until
/// the store assigns one.
pub fn parse_with(bytes: &[u8], registry: &Registry) -> Result<Snapshot, Vec<Diagnostic>> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(vec![Diagnostic::error(
            "",
            "too_large",
            "the configuration is larger than 1 MiB",
            "split large values out of the file",
        )]);
    }
    let (value, found) = strict::read(bytes).map_err(|d| vec![d])?;
    if !found.is_empty() {
        return Err(sorted(found));
    }
    let config = typed(value.clone())?;
    let found = check(&config, registry);
    if !found.is_empty() {
        return Err(sorted(found));
    }
    let written = canonical_json(&value);
    let hash = sha256_hex(written.as_bytes());
    Ok(Snapshot::new(0, hash, written, config))
}

fn sorted(mut found: Vec<Diagnostic>) -> Vec<Diagnostic> {
    found.sort();
    found.dedup();
    found
}

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Vec<Diagnostic>> {
    serde_path_to_error::deserialize(value).map_err(|e| vec![shape_diagnostic("", &e)])
}

/// Turns a serde error into a diagnostic without its text, which may quote a value.
fn shape_diagnostic(base: &str, e: &serde_path_to_error::Error<serde_json::Error>) -> Diagnostic {
    let pointer = e
        .path()
        .iter()
        .fold(base.to_owned(), |p, seg| push_pointer(&p, &seg.to_string()));
    let text = e.inner().to_string();
    let (code, message, remedy) = if text.starts_with("unknown field") {
        (
            "unknown_field",
            "this field is not part of configuration version 1",
            "remove the field or fix its name",
        )
    } else if text.starts_with("missing field") {
        (
            "missing_field",
            "a required field is missing here",
            "add the field the documentation names for this object",
        )
    } else if text.starts_with("invalid type") {
        (
            "invalid_type",
            "this value has the wrong JSON type",
            "give the value the type the documentation names",
        )
    } else {
        (
            "invalid_value",
            "this value is not accepted",
            "check the value against the documentation",
        )
    };
    // A missing or unknown field is reported on its object; name the field, which is a key, not a value.
    let message = match field_name(&text) {
        Some(field) => format!("{message}: `{field}`"),
        None => message.to_owned(),
    };
    Diagnostic::error(pointer, code, message, remedy)
}

fn field_name(serde_text: &str) -> Option<&str> {
    if !(serde_text.starts_with("unknown field") || serde_text.starts_with("missing field")) {
        return None;
    }
    serde_text.split('`').nth(1)
}

fn check(config: &Config, registry: &Registry) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    if config.version != SUPPORTED_VERSION {
        found.push(Diagnostic::error(
            "/version",
            "unsupported_version",
            "only configuration version 1 is supported",
            "set \"version\": 1",
        ));
    }
    if config.limits.causal_max_depth == 0 || config.limits.causal_per_minute == 0 {
        found.push(Diagnostic::error(
            "/limits",
            "invalid_value",
            "causal limits must be at least 1",
            "raise the limit or remove it to take the default",
        ));
    }
    let ceilings = effective_ceilings(&config.scopes, registry, &mut found);
    for (id, scope) in &config.scopes {
        let pointer = push_pointer("/scopes", id);
        check_scope(&pointer, id, scope, &ceilings, registry, &mut found);
    }
    found
}

/// Each scope's effective ceiling: its own operations, within every ancestor's. Reports unknown
/// parents, cycles, unknown operations and a child that names what its parent does not allow.
fn effective_ceilings(
    scopes: &BTreeMap<String, ScopeConfig>,
    registry: &Registry,
    found: &mut Vec<Diagnostic>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut ceilings = BTreeMap::new();
    for (id, scope) in scopes {
        let pointer = push_pointer("/scopes", id);
        let own = known_operations(
            &format!("{pointer}/authorization/operations"),
            &scope.authorization.operations,
            registry,
            found,
        );
        let ceiling = match ancestor_ceiling(id, scopes) {
            Ok(Some(parent)) => {
                for (i, op) in scope.authorization.operations.iter().enumerate() {
                    if own.contains(op) && !parent.contains(op) {
                        found.push(widening(
                            format!("{pointer}/authorization/operations/{i}"),
                            "its parent scope",
                        ));
                    }
                }
                own.intersection(&parent).cloned().collect()
            }
            Ok(None) => own,
            Err(code) => {
                found.push(parent_diagnostic(&pointer, code));
                BTreeSet::new()
            }
        };
        ceilings.insert(id.clone(), ceiling);
    }
    ceilings
}

/// The intersection of the ceilings of `id`'s ancestors, or `None` for a root scope.
fn ancestor_ceiling(
    id: &str,
    scopes: &BTreeMap<String, ScopeConfig>,
) -> Result<Option<BTreeSet<String>>, &'static str> {
    let mut seen = BTreeSet::from([id.to_owned()]);
    let mut ceiling: Option<BTreeSet<String>> = None;
    let mut current = scopes.get(id).and_then(|s| s.parent.as_deref());
    while let Some(parent_id) = current {
        if !seen.insert(parent_id.to_owned()) {
            return Err("parent_cycle");
        }
        let parent = scopes.get(parent_id).ok_or("unknown_reference")?;
        let ops: BTreeSet<String> = parent.authorization.operations.iter().cloned().collect();
        ceiling = Some(match ceiling {
            Some(c) => c.intersection(&ops).cloned().collect(),
            None => ops,
        });
        current = parent.parent.as_deref();
    }
    Ok(ceiling)
}

fn parent_diagnostic(scope_pointer: &str, code: &'static str) -> Diagnostic {
    let message = match code {
        "parent_cycle" => "the scope's parents form a cycle",
        _ => "the parent scope (or one of its ancestors) does not exist",
    };
    Diagnostic::error(
        format!("{scope_pointer}/parent"),
        code,
        message,
        "name an existing scope that is not a descendant",
    )
}

fn widening(pointer: String, ceiling_of: &str) -> Diagnostic {
    Diagnostic::error(
        pointer,
        "authority_widening",
        format!("this operation is outside the ceiling of {ceiling_of}"),
        "remove the operation, or allow it in the ceiling first",
    )
}

fn known_operations(
    pointer: &str,
    ops: &[String],
    registry: &Registry,
    found: &mut Vec<Diagnostic>,
) -> BTreeSet<String> {
    let mut known = BTreeSet::new();
    for (i, op) in ops.iter().enumerate() {
        if registry.knows(op) {
            known.insert(op.clone());
        } else {
            found.push(Diagnostic::error(
                format!("{pointer}/{i}"),
                "unknown_reference",
                "no registered operation has this name",
                "fix the operation name; `open-conduit` lists the registered operations",
            ));
        }
    }
    known
}

fn check_scope(
    pointer: &str,
    id: &str,
    scope: &ScopeConfig,
    ceilings: &BTreeMap<String, BTreeSet<String>>,
    registry: &Registry,
    found: &mut Vec<Diagnostic>,
) {
    if !is_registration_name(id) {
        found.push(Diagnostic::error(
            pointer,
            "invalid_name",
            "a scope id is a lower-case letter followed by lower-case letters, digits, `-` or `_`",
            "rename the scope",
        ));
    }
    let ceiling = &ceilings[id];
    for (name, binding) in &scope.bindings {
        check_binding(
            &push_pointer(&format!("{pointer}/bindings"), name),
            binding,
            ceiling,
            registry,
            found,
        );
    }
    for (i, route) in scope.routes.iter().enumerate() {
        let route_pointer = format!("{pointer}/routes/{i}");
        if !is_type_pattern(&route.on) {
            found.push(Diagnostic::error(
                format!("{route_pointer}/on"),
                "invalid_value",
                "a route matches an event type (`demo.requested`) or a family (`demo.*`)",
                "fix the pattern",
            ));
        }
        if !scope.bindings.contains_key(&route.binding) {
            found.push(Diagnostic::error(
                format!("{route_pointer}/binding"),
                "unknown_reference",
                "no binding of this scope has this name",
                "name a binding declared under this scope's `bindings`",
            ));
        }
    }
}

fn check_binding(
    pointer: &str,
    binding: &BindingConfig,
    ceiling: &BTreeSet<String>,
    registry: &Registry,
    found: &mut Vec<Diagnostic>,
) {
    let ops_pointer = format!("{pointer}/operations");
    let known = known_operations(&ops_pointer, &binding.operations, registry, found);
    for (i, op) in binding.operations.iter().enumerate() {
        if known.contains(op) && !ceiling.contains(op) {
            found.push(widening(format!("{ops_pointer}/{i}"), "its scope"));
        }
    }
    for (i, pattern) in binding.emits.iter().flatten().enumerate() {
        if !is_type_pattern(pattern) || is_reserved_type(pattern) || pattern == "*" {
            found.push(Diagnostic::error(
                format!("{pointer}/emits/{i}"),
                "invalid_value",
                "an emits entry is a non-reserved event type or family pattern (`demo.*`)",
                "fix the pattern; core, agent, tool and toolbelt families belong to the host",
            ));
        }
    }
    if binding.executor != SHELL_EXECUTOR {
        found.push(Diagnostic::error(
            format!("{pointer}/executor"),
            "unknown_reference",
            "no registered executor has this name",
            "use the `shell` executor",
        ));
        return;
    }
    if let Err(d) = shell_config(pointer, binding) {
        found.push(d);
    }
}

/// The binding's shell configuration, checked: a non-empty argv and a parseable timeout.
pub(crate) fn shell_config(pointer: &str, binding: &BindingConfig) -> Result<ShellConfig, Diagnostic> {
    let base = format!("{pointer}/config");
    let shell: ShellConfig =
        serde_path_to_error::deserialize(binding.config.clone()).map_err(|e| shape_diagnostic(&base, &e))?;
    if shell.command.first().is_none_or(|program| program.is_empty()) {
        return Err(Diagnostic::error(
            format!("{base}/command"),
            "invalid_executor_config",
            "the shell executor needs a non-empty command argv",
            "give `command` as an array such as [\"/bin/sh\", \"-c\", \"...\"]",
        ));
    }
    if shell
        .timeout
        .as_deref()
        .is_some_and(|t| Duration::parse(t).is_none_or(|d| d.0 <= 0))
    {
        return Err(Diagnostic::error(
            format!("{base}/timeout"),
            "invalid_executor_config",
            "the timeout is not a positive duration",
            "write it like `30s`, `10m` or `1h`",
        ));
    }
    Ok(shell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_config_json;

    fn codes(text: &str) -> Vec<(String, &'static str)> {
        parse(text.as_bytes())
            .unwrap_err()
            .into_iter()
            .map(|d| (d.pointer, d.code))
            .collect()
    }

    fn with_scope(scope: &str) -> String {
        format!(r#"{{"version":1,"scopes":{{"s":{scope}}}}}"#)
    }

    #[test]
    fn default_config_is_valid() {
        let snap = parse(default_config_json().as_bytes()).unwrap();
        assert!(snap.authorize_operation("setup", "emit"));
        assert_eq!(snap.hash().len(), 64);
    }

    #[test]
    fn unknown_fields_are_refused_with_pointer() {
        assert_eq!(
            codes(r#"{"version":1,"extra":true}"#),
            vec![("/extra".into(), "unknown_field")]
        );
        assert_eq!(
            codes(&with_scope(r#"{"bogus":1}"#)),
            vec![("/scopes/s/bogus".into(), "unknown_field")]
        );
    }

    #[test]
    fn wrong_types_never_echo_the_value() {
        let found = parse(br#"{"version":"hunter2"}"#).unwrap_err();
        assert_eq!(found[0].code, "invalid_type");
        assert_eq!(found[0].pointer, "/version");
        assert!(!format!("{found:?}").contains("hunter2"));
    }

    #[test]
    fn binding_grant_outside_ceiling_is_widening() {
        let scope = r#"{"authorization":{"operations":["emit"]},
            "bindings":{"b":{"executor":"shell","config":{"command":["true"]},"operations":["emit","wait"]}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/operations/1".into(), "authority_widening")]
        );
    }

    #[test]
    fn unknown_operations_executors_and_bindings_are_references() {
        let scope = r#"{"authorization":{"operations":["emitt"]},
            "bindings":{"b":{"executor":"docker","operations":[]}},
            "routes":[{"on":"demo.x","binding":"nope"}]}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![
                ("/scopes/s/authorization/operations/0".into(), "unknown_reference"),
                ("/scopes/s/bindings/b/executor".into(), "unknown_reference"),
                ("/scopes/s/routes/0/binding".into(), "unknown_reference"),
            ]
        );
    }

    #[test]
    fn child_ceiling_within_parent() {
        let text = r#"{"version":1,"scopes":{
            "p":{"authorization":{"operations":["emit"]}},
            "c":{"parent":"p","authorization":{"operations":["emit","wait"]}}}}"#;
        assert_eq!(
            codes(text),
            vec![("/scopes/c/authorization/operations/1".into(), "authority_widening")]
        );
    }

    #[test]
    fn parent_cycles_and_unknown_parents() {
        let text = r#"{"version":1,"scopes":{"a":{"parent":"b"},"b":{"parent":"a"},"c":{"parent":"zz"}}}"#;
        assert_eq!(
            codes(text),
            vec![
                ("/scopes/a/parent".into(), "parent_cycle"),
                ("/scopes/b/parent".into(), "parent_cycle"),
                ("/scopes/c/parent".into(), "unknown_reference"),
            ]
        );
    }

    #[test]
    fn shell_config_is_strict() {
        let scope = r#"{"bindings":{"b":{"executor":"shell","config":{"command":[]}}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/config/command".into(), "invalid_executor_config")]
        );
        let scope = r#"{"bindings":{"b":{"executor":"shell","config":{"command":["x"],"shell":true}}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/config/shell".into(), "unknown_field")]
        );
    }

    #[test]
    fn reserved_emits_are_refused() {
        let scope = r#"{"bindings":{"b":{"executor":"shell","config":{"command":["x"]},"emits":["core.*","demo.*"]}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/emits/0".into(), "invalid_value")]
        );
    }

    #[test]
    fn oversized_and_nulls_refused() {
        let big = vec![b' '; MAX_CONFIG_BYTES + 1];
        assert_eq!(parse(&big).unwrap_err()[0].code, "too_large");
        assert_eq!(
            codes(r#"{"version":1,"scopes":null}"#),
            vec![("/scopes".into(), "null_value")]
        );
    }

    #[test]
    fn hash_ignores_formatting_and_key_order() {
        let a = parse(br#"{"version":1,"limits":{"causal_max_depth":3,"causal_per_minute":5}}"#).unwrap();
        let b = parse(b"{ \"limits\": {\"causal_per_minute\":5, \"causal_max_depth\":3},\n \"version\": 1 }").unwrap();
        assert_eq!(a.hash(), b.hash());
    }
}
