//! `open-conduit.json`: what a package is, what it runs, what it provides and what it needs.
//! Parsed strictly (unknown fields, duplicate keys and nulls refused) and validated whole; any
//! problem is `invalid_manifest` with the JSON pointer of what is wrong. Pure: the caller reads
//! the file.

use std::sync::Arc;

use conduit_core::names::{is_capability_name, is_extension_name};
use conduit_core::requires::{invalid_token, Requirement};
use conduit_core::tool::{Approval, CatalogFields, Egress, Hint, ReplayPolicy, SafetyTier, ToolSource};
use conduit_toolbelt::registry::{compiled, Handler, OperationSpec, Registration, ToolsetEntry, ToolsetSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The manifest's file name in a package directory.
pub const MANIFEST_FILE: &str = "open-conduit.json";

/// Permissions a package may ask for; the operator sees them at install.
pub const PERMISSIONS: [&str; 2] = ["http.safeFetch", "operation.gate"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub runtime: Runtime,
    #[serde(default)]
    pub provides: Provides,
    #[serde(default)]
    pub permissions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// `process`: an executable speaking the extension protocol on stdio.
    pub language: String,
    /// The executable, relative to the package directory.
    pub entry: String,
    /// RFC 0076 §A: absent and `[]` mean the same.
    #[serde(default)]
    pub requires: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provides {
    #[serde(default)]
    pub operations: Vec<OperationManifest>,
    #[serde(default)]
    pub toolsets: Vec<ToolsetManifest>,
    #[serde(default)]
    pub operation_gate: bool,
    /// Executors a package offers; this release runs none of them, so a manifest naming any is
    /// refused rather than silently ignored.
    #[serde(default)]
    pub executors: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationManifest {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    pub summary: String,
    pub input_schema: Value,
    #[serde(default)]
    pub output_schema: Option<Value>,
    pub safety_tier: SafetyTier,
    /// Absent: what the package's grants allow (see [`Manifest::egress_of`]).
    #[serde(default)]
    pub egress: Option<Egress>,
    #[serde(default = "non_deterministic")]
    pub replay_policy: ReplayPolicy,
    #[serde(default)]
    pub credential_ref: bool,
    #[serde(default)]
    pub cost_hint: Option<Hint>,
    #[serde(default)]
    pub latency_hint: Option<Hint>,
    /// What the operation serves (`git.credential`), as the serving route answers it.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

fn non_deterministic() -> ReplayPolicy {
    ReplayPolicy::NonDeterministic
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsetManifest {
    pub name: String,
    pub operations: Vec<ToolsetEntryManifest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsetEntryManifest {
    pub name: String,
    pub since: String,
}

/// Why a manifest is refused: where, and what is wrong there (never a value from it, except the
/// vocabulary token the RFC says to name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub pointer: String,
    pub message: String,
}

fn invalid(pointer: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        pointer: pointer.into(),
        message: message.into(),
    }
}

impl Manifest {
    /// Parses and validates a manifest's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, Invalid> {
        let (value, found) = conduit_config::read_strict_json(bytes).map_err(|d| invalid(d.pointer, d.message))?;
        if let Some(d) = found.first() {
            return Err(invalid(d.pointer.clone(), d.message.clone()));
        }
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| {
            invalid(
                "/",
                format!("the manifest does not have the expected shape: {}", shape(&e)),
            )
        })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// An operation's egress as the catalog says it: what it declares when that is what the
    /// package can do, else what the package can do. With `net.outbound` it connects by itself
    /// (`host-owned`; `none` and `safe-fetch` would hide a direct connection), else with
    /// `http.safeFetch` it may fetch through the host (`safe-fetch`; never `none`), else it has no
    /// way out (`none`).
    pub fn egress_of(&self, op: &OperationManifest) -> Egress {
        match (op.egress, self.egress_contradiction(op)) {
            (Some(declared), None) => declared,
            _ if self.connects_directly() => Egress::HostOwned,
            _ if self.fetches() => Egress::SafeFetch,
            _ => Egress::None,
        }
    }

    /// Why an operation's declared egress is not what the package can do, if it is not. Install
    /// refuses it; a package installed before the rule is served with [`Manifest::egress_of`].
    pub fn egress_contradiction(&self, op: &OperationManifest) -> Option<&'static str> {
        match (op.egress?, self.connects_directly(), self.fetches()) {
            (Egress::None | Egress::SafeFetch, true, _) => Some(
                "a package that requires net.outbound connects by itself: its egress is host-owned or host-mediated",
            ),
            (Egress::None, false, true) => Some("a package holding http.safeFetch may fetch: its egress is not none"),
            (Egress::SafeFetch | Egress::HostMediated | Egress::HostOwned, false, false) => {
                Some("a package with neither net.outbound nor http.safeFetch has no egress: none")
            }
            _ => None,
        }
    }

    /// What install checks beyond [`Manifest::parse`]: rules added after packages were installed
    /// under them, which a package already installed keeps being served without.
    pub fn check_for_install(&self) -> Result<(), Invalid> {
        for (i, op) in self.provides.operations.iter().enumerate() {
            if let Some(why) = self.egress_contradiction(op) {
                return Err(invalid(format!("/provides/operations/{i}/egress"), why));
            }
        }
        Ok(())
    }

    fn connects_directly(&self) -> bool {
        self.runtime.requires.iter().any(|r| r == "net.outbound")
    }

    fn fetches(&self) -> bool {
        self.permissions.iter().any(|p| p == "http.safeFetch")
    }

    /// Whether the host installs the package's gate: it provides one and the operator granted
    /// the `operation.gate` permission by installing a manifest that asks for it.
    pub fn gates(&self) -> bool {
        self.provides.operation_gate && self.permissions.iter().any(|p| p == "operation.gate")
    }

    /// `name@version`, as refusals name the manifest.
    pub fn id(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }

    /// What its runtime code exercises, as the install gate and every later call judge it.
    pub fn requirement(&self) -> Requirement {
        Requirement {
            manifest: self.id(),
            requires: self.runtime.requires.clone(),
        }
    }

    fn validate(&self) -> Result<(), Invalid> {
        if !is_extension_name(&self.name) {
            return Err(invalid(
                "/name",
                "a package name is a lower-case letter, then lower-case letters, digits, `-` or `_`",
            ));
        }
        semver::Version::parse(&self.version)
            .map_err(|_| invalid("/version", "the version is not semver (such as 1.2.0)"))?;
        self.validate_runtime()?;
        // Before the operations: what they may declare depends on what the package holds.
        for (i, permission) in self.permissions.iter().enumerate() {
            if !PERMISSIONS.contains(&permission.as_str()) || self.permissions[..i].contains(permission) {
                return Err(invalid(
                    format!("/permissions/{i}"),
                    "a permission is http.safeFetch or operation.gate, once each",
                ));
            }
        }
        self.validate_provides()
    }

    fn validate_runtime(&self) -> Result<(), Invalid> {
        if self.runtime.language != "process" {
            return Err(invalid(
                "/runtime/language",
                "unsupported runtime language: this host runs `process` packages",
            ));
        }
        let entry = &self.runtime.entry;
        let plain = !entry.is_empty() && entry.split('/').all(|p| !p.is_empty() && p != "." && p != "..");
        if !plain {
            return Err(invalid(
                "/runtime/entry",
                "the entry is a relative path inside the package directory",
            ));
        }
        if let Some((i, token)) = invalid_token(&self.runtime.requires) {
            return Err(invalid(
                format!("/runtime/requires/{i}"),
                format!("`{token}` is not a runtime primitive (net.dns, net.outbound, crypto, subprocess, fs.read, fs.write, env.read, clock), or is listed twice"),
            ));
        }
        Ok(())
    }

    fn validate_provides(&self) -> Result<(), Invalid> {
        if !self.provides.executors.is_empty() {
            return Err(invalid("/provides/executors", "this host runs no package executors"));
        }
        for (i, op) in self.provides.operations.iter().enumerate() {
            if compiled(&op.input_schema).is_none() {
                return Err(invalid(
                    format!("/provides/operations/{i}/input_schema"),
                    "an input schema is a JSON Schema (2020-12) object",
                ));
            }
            if let Some(j) = op.capabilities.iter().position(|c| !is_capability_name(c)) {
                return Err(invalid(
                    format!("/provides/operations/{i}/capabilities/{j}"),
                    "a capability is dotted lower-case names, such as git.credential",
                ));
            }
            if op.output_schema.as_ref().is_some_and(|s| compiled(s).is_none()) {
                return Err(invalid(
                    format!("/provides/operations/{i}/output_schema"),
                    "an output schema is a JSON Schema (2020-12) object",
                ));
            }
        }
        for (i, toolset) in self.provides.toolsets.iter().enumerate() {
            for (j, entry) in toolset.operations.iter().enumerate() {
                if semver::Version::parse(&entry.since).is_err() {
                    return Err(invalid(
                        format!("/provides/toolsets/{i}/operations/{j}/since"),
                        "`since` is a semver version",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The registration the toolbelt checks and serves: the package's namespace, its operations
    /// (each answered by `handler`) and toolsets, as `node-pack` tools.
    pub fn registration(&self, handler: Arc<dyn Handler>) -> Registration {
        let operations = self
            .provides
            .operations
            .iter()
            .map(|op| OperationSpec {
                name: op.name.clone(),
                title: op.title.clone(),
                summary: op.summary.clone(),
                input_schema: op.input_schema.clone(),
                output_schema: op.output_schema.clone().unwrap_or_else(|| serde_json::json!({})),
                catalog: CatalogFields {
                    safety_tier: op.safety_tier,
                    egress: self.egress_of(op),
                    approval: Approval::Never,
                    replay_policy: op.replay_policy,
                    credential_ref: op.credential_ref,
                    cost_hint: op.cost_hint,
                    latency_hint: op.latency_hint,
                },
                capabilities: op.capabilities.clone(),
                handler: handler.clone(),
            })
            .collect();
        let toolsets = self
            .provides
            .toolsets
            .iter()
            .map(|t| ToolsetSpec {
                name: t.name.clone(),
                operations: t
                    .operations
                    .iter()
                    .map(|e| ToolsetEntry {
                        operation: e.name.clone(),
                        since: e.since.clone(),
                    })
                    .collect(),
            })
            .collect();
        Registration {
            name: self.name.clone(),
            source: ToolSource::NodePack,
            operations,
            toolsets,
        }
    }
}

/// Serde's message (fields, variants and expected types), without the position.
fn shape(error: &serde_json::Error) -> String {
    let text = error.to_string();
    text.split(" at line ").next().unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use conduit_toolbelt::Registry;
    use serde_json::json;

    use super::*;

    struct Unused;

    impl Handler for Unused {
        fn call(&self, _: conduit_toolbelt::registry::HandlerCall) -> conduit_toolbelt::registry::HandlerFuture {
            unreachable!("registration is all these tests do")
        }
    }

    fn notes() -> Value {
        json!({"name": "notes", "version": "1.2.0",
            "runtime": {"language": "process", "entry": "bin/notes", "requires": ["clock"]},
            "provides": {
                "operations": [{"name": "notes.view", "summary": "Read a note.", "input_schema": {"type": "object"},
                                "safety_tier": "read", "egress": "safe-fetch", "replay_policy": "idempotent"}],
                "toolsets": [{"name": "notes.reader", "operations": [{"name": "notes.view", "since": "1.0.0"}]}]},
            "permissions": ["http.safeFetch"]})
    }

    fn refused(edit: impl FnOnce(&mut Value)) -> Invalid {
        let mut manifest = notes();
        edit(&mut manifest);
        Manifest::parse(manifest.to_string().as_bytes())
            .and_then(|m| m.check_for_install())
            .unwrap_err()
    }

    #[test]
    fn a_valid_manifest_registers_its_operations_and_toolsets_as_node_pack_tools() {
        let manifest = Manifest::parse(notes().to_string().as_bytes()).unwrap();
        assert_eq!(manifest.id(), "notes@1.2.0");
        let mut registry = Registry::default();
        registry.register(manifest.registration(Arc::new(Unused))).unwrap();
        let tool = registry
            .catalog()
            .descriptors()
            .find(|t| t.tool_id == "notes.view")
            .unwrap()
            .clone();
        assert_eq!(tool.source, ToolSource::NodePack);
        assert_eq!(tool.auth.unwrap().scopes, ["notes.view", "@notes.reader"]);
    }

    #[test]
    fn an_operation_declares_the_capabilities_it_serves() {
        let mut serving = notes();
        serving["provides"]["operations"][0]["capabilities"] = json!(["git.credential"]);
        let manifest = Manifest::parse(serving.to_string().as_bytes()).unwrap();
        let mut registry = Registry::default();
        registry.register(manifest.registration(Arc::new(Unused))).unwrap();
        assert_eq!(registry.serving("git.credential").collect::<Vec<_>>(), ["notes.view"]);
        let plain = Manifest::parse(notes().to_string().as_bytes()).unwrap();
        assert!(
            plain.provides.operations[0].capabilities.is_empty(),
            "none unless declared"
        );
    }

    #[test]
    fn an_operations_egress_defaults_to_what_the_package_can_do() {
        let egress = |edit: fn(&mut Value)| {
            let mut manifest = notes();
            manifest["provides"]["operations"][0]
                .as_object_mut()
                .unwrap()
                .remove("egress");
            edit(&mut manifest);
            let manifest = Manifest::parse(manifest.to_string().as_bytes()).unwrap();
            manifest.egress_of(&manifest.provides.operations[0])
        };
        assert_eq!(egress(|_| {}), Egress::SafeFetch, "it holds http.safeFetch");
        assert_eq!(egress(|m| m["permissions"] = json!([])), Egress::None);
        assert_eq!(
            egress(|m| m["runtime"]["requires"] = json!(["net.outbound"])),
            Egress::HostOwned
        );
        // A package installed before the rule still loads, and is described as what it can do.
        let mut legacy = notes();
        legacy["provides"]["operations"][0]["egress"] = json!("none");
        let legacy = Manifest::parse(legacy.to_string().as_bytes()).unwrap();
        assert_eq!(legacy.egress_of(&legacy.provides.operations[0]), Egress::SafeFetch);
        assert!(legacy.check_for_install().is_err(), "but it would not install today");
    }

    #[test]
    fn every_manifest_rule_refuses_with_its_pointer() {
        type Edit = fn(&mut Value);
        let cases: Vec<(Edit, &str)> = vec![
            (
                |m| m["runtime"]["requires"] = json!(["node:dns/promises"]),
                "/runtime/requires/0",
            ),
            (
                |m| m["runtime"]["requires"] = json!(["clock", "clock"]),
                "/runtime/requires/1",
            ),
            (|m| m["runtime"]["requires"] = json!(["net"]), "/runtime/requires/0"),
            (|m| m["runtime"]["language"] = json!("node"), "/runtime/language"),
            (|m| m["runtime"]["entry"] = json!("../escape"), "/runtime/entry"),
            (|m| m["runtime"]["entry"] = json!("/bin/sh"), "/runtime/entry"),
            (|m| m["name"] = json!("Notes.App"), "/name"),
            (|m| m["version"] = json!("1.2"), "/version"),
            (|m| m["permissions"] = json!(["root"]), "/permissions/0"),
            (
                |m| m["provides"]["executors"] = json!([{"kind": "x"}]),
                "/provides/executors",
            ),
            (
                |m| m["provides"]["toolsets"][0]["operations"][0]["since"] = json!("soon"),
                "/provides/toolsets/0/operations/0/since",
            ),
            (|m| m["surprise"] = json!(1), "/"),
            (
                |m| m["provides"]["operations"][0]["capabilities"] = json!(["git.credential", "Git"]),
                "/provides/operations/0/capabilities/1",
            ),
            // Catalog honesty: the egress an operation declares is what the package can do.
            (
                |m| m["provides"]["operations"][0]["egress"] = json!("none"),
                "/provides/operations/0/egress",
            ),
            (
                |m| m["runtime"]["requires"] = json!(["net.outbound"]),
                "/provides/operations/0/egress",
            ),
            (|m| m["permissions"] = json!([]), "/provides/operations/0/egress"),
        ];
        for (edit, pointer) in cases {
            assert_eq!(refused(edit).pointer, pointer);
        }
        assert!(
            refused(|m| m["runtime"]["requires"] = json!(["node:dns/promises"]))
                .message
                .contains("node:dns/promises"),
            "the token is named"
        );
        let duplicate =
            br#"{"name": "a", "name": "b", "version": "1.0.0", "runtime": {"language": "process", "entry": "x"}}"#;
        assert!(Manifest::parse(duplicate).is_err(), "a duplicate key");
        let absent = br#"{"name": "a", "version": "1.0.0", "runtime": {"language": "process", "entry": "x"}}"#;
        assert_eq!(
            Manifest::parse(absent).unwrap().runtime.requires,
            Vec::<String>::new(),
            "absent is []"
        );
    }

    #[test]
    fn the_registry_refuses_names_outside_the_namespace_and_exec_from_a_package() {
        let mut outside = notes();
        outside["provides"]["operations"][0]["name"] = json!("emit.more");
        let mut exec = notes();
        exec["provides"]["operations"][0]["safety_tier"] = json!("exec");
        for manifest in [outside, exec] {
            let manifest = Manifest::parse(manifest.to_string().as_bytes()).unwrap();
            let mut registry = Registry::default();
            assert_eq!(
                registry
                    .register(manifest.registration(Arc::new(Unused)))
                    .unwrap_err()
                    .code,
                "invalid"
            );
        }
    }
}
