//! Extension registrations: named namespaces of operations with their schemas, catalog fields and
//! handlers. A registration named `github` owns `github.*` and nothing else.

pub mod catalog;
mod toolsets;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;

use conduit_core::names::{is_extension_name, is_registration_name, BUILTIN_OPERATIONS};
use conduit_core::requires::Requirement;
use conduit_core::tool::{CatalogFields, Egress, ToolSource};
use conduit_core::tool_call::Transport;
use conduit_core::{EventSample, Refusal, Source};
use jsonschema::Validator;
use serde_json::Value;

pub use crate::operation::{Emission, OperationError, WaitRequest};
use catalog::Catalog;
pub use toolsets::lost_operations;

/// What a handler is told about the call: the validated authority, never the token.
#[derive(Debug, Clone)]
pub struct HandlerCall {
    pub operation: String,
    pub scope: String,
    pub work_id: String,
    pub execution_id: String,
    pub epoch: u32,
    pub binding: String,
    pub input: Value,
    /// Handlers must be idempotent on it: a crash between their effect and the host's commit runs
    /// them again with the same request id.
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HandlerOutput {
    pub output: Value,
    pub emit: Vec<Emission>,
    /// A translated wait: declared for the caller's segment once the result commits.
    pub wait: Option<WaitRequest>,
    /// The output carries a credential (`github.git.credential`): it is answered to the caller and
    /// never kept, so a retry with the same request id runs the operation again.
    pub secret: bool,
}

impl HandlerOutput {
    /// An answer with nothing to emit and no wait.
    pub fn output(output: Value) -> HandlerOutput {
        HandlerOutput {
            output,
            emit: Vec::new(),
            wait: None,
            secret: false,
        }
    }
}

pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<HandlerOutput, OperationError>> + Send>>;

/// Runs an operation. It is called outside any storage transaction.
pub trait Handler: Send + Sync {
    fn call(&self, call: HandlerCall) -> HandlerFuture;
}

/// One operation as an extension declares it.
#[derive(Clone)]
pub struct OperationSpec {
    pub name: String,
    pub title: Option<String>,
    pub summary: String,
    pub input_schema: Value,
    pub output_schema: Value,
    pub catalog: CatalogFields,
    /// What the operation serves (`git.credential`): a client that needs a capability asks the
    /// serving route which of its granted operations provide it.
    pub capabilities: Vec<String>,
    pub handler: Arc<dyn Handler>,
}

/// A named set of operations for a role (`github.author`), granted as `@github.author`. It grants
/// only its extension's own operations and builtins, each recorded with the release it joined in.
/// A toolset only gains operations from one release to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsetSpec {
    pub name: String,
    pub operations: Vec<ToolsetEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsetEntry {
    pub operation: String,
    /// The release the operation joined the toolset in.
    pub since: String,
}

/// An extension's registration: its name (its namespace), where its operations come from, them, and
/// the toolsets it publishes.
#[derive(Clone)]
pub struct Registration {
    pub name: String,
    pub source: ToolSource,
    pub operations: Vec<OperationSpec>,
    pub toolsets: Vec<ToolsetSpec>,
}

/// A registered operation, its input validator compiled once.
pub struct Registered {
    pub registration: String,
    pub source: ToolSource,
    pub spec: OperationSpec,
    pub validator: Validator,
}

/// Why a registration was refused. It registered nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrationError {
    /// `invalid` (outside the namespace, a bad name or schema, an exec tier from a non-host source) or
    /// `conflict` (a repeated registration name, a builtin's name, an operation registered twice).
    pub code: &'static str,
    pub operation: String,
    pub reason: String,
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.code, self.operation, self.reason)
    }
}

impl std::error::Error for RegistrationError {}

/// Every registered extension operation, by name.
#[derive(Default)]
pub struct Registry {
    registrations: BTreeMap<String, ToolSource>,
    operations: BTreeMap<String, Registered>,
    toolsets: BTreeMap<String, ToolsetSpec>,
    /// Built on first use; a registration clears it.
    catalog: OnceLock<Catalog>,
    /// Each gating registration's gate, by registration name (the order gates are asked in).
    gates: BTreeMap<String, Arc<dyn crate::gate::Gate>>,
    /// Each registration's start gate, by registration name.
    start_gates: BTreeMap<String, Arc<dyn crate::gate::StartGate>>,
    /// What each installed package's runtime code exercises, by registration name.
    requirements: BTreeMap<String, Requirement>,
    /// The sample events each ingress offers, by registration name.
    samples: BTreeMap<String, Vec<EventSample>>,
}

impl Registry {
    /// The registration whose namespace `key` lies in (`github` for `github:acme/app#7`), if any.
    pub fn namespace_of(&self, key: &str) -> Option<&str> {
        let (namespace, _) = key.split_once(':')?;
        self.registrations
            .get_key_value(namespace)
            .map(|(name, _)| name.as_str())
    }

    /// Registers every operation of `registration`, or none of them.
    pub fn register(&mut self, registration: Registration) -> Result<(), RegistrationError> {
        self.catalog = OnceLock::new();
        let refuse = |code, operation: &str, reason: &str| RegistrationError {
            code,
            operation: operation.to_owned(),
            reason: reason.to_owned(),
        };
        if !is_extension_name(&registration.name) {
            return Err(refuse(
                "invalid",
                &registration.name,
                "a registration name is a lower-case letter, then lower-case letters, digits, `-` or `_`",
            ));
        }
        if self.registrations.contains_key(&registration.name) {
            return Err(refuse(
                "conflict",
                &registration.name,
                "a registration with this name exists",
            ));
        }
        let mut accepted = BTreeMap::new();
        for spec in registration.operations {
            let name = spec.name.clone();
            check_operation(&registration.name, registration.source, &spec).map_err(|(c, r)| refuse(c, &name, r))?;
            if BUILTIN_OPERATIONS.contains(&name.as_str())
                || self.operations.contains_key(&name)
                || accepted.contains_key(&name)
            {
                return Err(refuse("conflict", &name, "this operation name is already registered"));
            }
            let validator = compiled(&spec.input_schema)
                .ok_or_else(|| refuse("invalid", &name, "its input schema is not a valid JSON Schema object"))?;
            compiled(&spec.output_schema)
                .ok_or_else(|| refuse("invalid", &name, "its output schema is not a valid JSON Schema object"))?;
            let registered = Registered {
                registration: registration.name.clone(),
                source: registration.source,
                spec,
                validator,
            };
            accepted.insert(name, registered);
        }
        for toolset in &registration.toolsets {
            check_toolset(&registration.name, toolset, &accepted).map_err(|r| refuse("invalid", &toolset.name, r))?;
        }
        self.registrations.insert(registration.name, registration.source);
        self.operations.extend(accepted);
        self.toolsets
            .extend(registration.toolsets.into_iter().map(|t| (t.name.clone(), t)));
        Ok(())
    }

    /// Gives a registered registration a gate over every other registration's operations.
    pub fn set_gate(&mut self, registration: &str, gate: Arc<dyn crate::gate::Gate>) -> Result<(), RegistrationError> {
        self.check_registered(registration, "a gate")?;
        self.gates.insert(registration.to_owned(), gate);
        // A package's gate makes other operations' approval conditional in the catalog.
        self.catalog = OnceLock::new();
        Ok(())
    }

    /// Records the sample events a registered ingress offers: each of its own source and in its own
    /// namespace (`github.*`), or none is recorded.
    pub fn set_samples(&mut self, registration: &str, samples: Vec<EventSample>) -> Result<(), RegistrationError> {
        self.check_registered(registration, "samples")?;
        let family = format!("{registration}.");
        let source = Source::Ingress(registration.to_owned());
        if let Some(stray) = samples
            .iter()
            .find(|s| s.source != source || !s.event_type.starts_with(&family))
        {
            return Err(RegistrationError {
                code: "invalid",
                operation: stray.name.clone(),
                reason: "a sample is an event of its ingress's own source and namespace".to_owned(),
            });
        }
        self.samples.insert(registration.to_owned(), samples);
        Ok(())
    }

    /// Every sample event the registered ingresses offer, by registration name.
    pub fn samples(&self) -> impl Iterator<Item = &EventSample> {
        self.samples.values().flatten()
    }

    /// Records what a registered package requires of the host: while the grant set does not cover
    /// it, its operations are neither listed nor called.
    pub fn set_requirement(&mut self, registration: &str, requirement: Requirement) -> Result<(), RegistrationError> {
        self.check_registered(registration, "a requirement")?;
        self.requirements.insert(registration.to_owned(), requirement);
        Ok(())
    }

    /// RFC 0076 at call time: `pack_runtime_requirement_unmet` when `operation` is a package's and
    /// the host's grant set no longer covers what the package requires.
    pub fn requirement_met(&self, operation: &str, grant: &[String], gating: bool) -> Result<(), Refusal> {
        let requirement = self
            .operations
            .get(operation)
            .and_then(|r| self.requirements.get(&r.registration));
        requirement.map_or(Ok(()), |r| r.check(grant, gating))
    }

    fn check_registered(&self, registration: &str, what: &str) -> Result<(), RegistrationError> {
        if self.registrations.contains_key(registration) {
            return Ok(());
        }
        Err(RegistrationError {
            code: "invalid",
            operation: registration.to_owned(),
            reason: format!("{what} belongs to a registered registration"),
        })
    }

    /// Gives a registered registration a start gate over every Work's first attempt.
    pub fn set_start_gate(
        &mut self,
        registration: &str,
        gate: Arc<dyn crate::gate::StartGate>,
    ) -> Result<(), RegistrationError> {
        self.check_registered(registration, "a start gate")?;
        self.start_gates.insert(registration.to_owned(), gate);
        Ok(())
    }

    /// Every start gate, in registration-name order.
    pub fn start_gates(&self) -> Vec<(String, Arc<dyn crate::gate::StartGate>)> {
        self.start_gates.iter().map(|(n, g)| (n.clone(), g.clone())).collect()
    }

    /// Whether `toolset` (published by an extension) holds `operation`.
    pub fn toolset_holds(&self, toolset: &str, operation: &str) -> bool {
        self.toolsets
            .get(toolset)
            .is_some_and(|t| t.operations.iter().any(|e| e.operation == operation))
    }

    /// The gates asked about `operation`, in registration-name order: every gate but its own
    /// registration's. A builtin has none.
    pub fn gates_for(&self, operation: &str) -> Vec<(String, Arc<dyn crate::gate::Gate>)> {
        let Some(own) = self.operations.get(operation).map(|r| r.registration.as_str()) else {
            return Vec::new();
        };
        self.gates
            .iter()
            .filter(|(name, _)| name.as_str() != own)
            .map(|(name, gate)| (name.clone(), gate.clone()))
            .collect()
    }

    /// Whether an installed package's gate may park `operation` (host policy, so its approval is
    /// `conditional`): a gate of a registration other than the host's and the operation's own.
    /// The host's human approvals gate is not policy: its rules show as `always` per scope.
    pub fn policy_gated(&self, operation: &str) -> bool {
        let Some(own) = self.operations.get(operation).map(|r| r.registration.as_str()) else {
            return false;
        };
        self.gates.keys().any(|name| {
            name != own
                && self
                    .registrations
                    .get(name)
                    .is_some_and(|s| *s != ToolSource::HostExtension)
        })
    }

    /// The catalog of every operation, builtins included.
    pub fn catalog(&self) -> &Catalog {
        self.catalog.get_or_init(|| Catalog::of(self))
    }

    pub fn toolsets(&self) -> impl Iterator<Item = &ToolsetSpec> {
        self.toolsets.values()
    }

    pub fn operation(&self, name: &str) -> Option<&Registered> {
        self.operations.get(name)
    }

    /// The transport an operation's call records name (see [`Transport`]).
    pub fn transport(&self, name: &str) -> Transport {
        match self.operation(name) {
            // A host extension that fetches (`http.fetch`) is the guarded client itself; a
            // package's own safeFetch callbacks carry their own pair, so its calls are native.
            Some(r) if r.source == ToolSource::HostExtension && r.spec.catalog.egress == Egress::SafeFetch => {
                Transport::Http
            }
            Some(r) if r.source == ToolSource::Mcp => Transport::Mcp,
            _ => Transport::Native,
        }
    }

    /// Every registered extension operation, sorted by name.
    pub fn operations(&self) -> impl Iterator<Item = &Registered> {
        self.operations.values()
    }

    /// The registered operations that serve `capability`, by name.
    pub fn serving<'a>(&'a self, capability: &'a str) -> impl Iterator<Item = &'a str> {
        self.operations
            .values()
            .filter(move |r| r.spec.capabilities.iter().any(|c| c == capability))
            .map(|r| r.spec.name.as_str())
    }

    /// Whether `name` is an operation the toolbelt serves: a builtin or a registered one.
    pub fn declares(&self, name: &str) -> bool {
        BUILTIN_OPERATIONS.contains(&name) || self.operations.contains_key(name)
    }

    /// The names and toolsets the configuration may grant beyond the builtins.
    pub fn config_registry(&self) -> conduit_config::Registry {
        let registry = conduit_config::Registry::with_operations(self.operations.keys().cloned());
        self.toolsets.values().fold(registry, |registry, toolset| {
            registry.with_toolset(
                &toolset.name,
                toolset
                    .operations
                    .iter()
                    .map(|e| (e.operation.clone(), e.since.clone())),
            )
        })
    }
}

/// An operation is `<registration>.<suffix>` with a well-formed suffix, and only a host extension may
/// declare the `exec` tier.
/// A tool's input or output schema as the catalog serves it: a JSON Schema (2020-12) object
/// that compiles. (A bare `true`/`false` is a schema too, but the descriptor's fields are objects.)
pub fn compiled(schema: &Value) -> Option<Validator> {
    schema
        .is_object()
        .then(|| jsonschema::validator_for(schema).ok())
        .flatten()
}

fn check_operation(
    registration: &str,
    source: ToolSource,
    spec: &OperationSpec,
) -> Result<(), (&'static str, &'static str)> {
    let suffix = spec
        .name
        .strip_prefix(registration)
        .and_then(|rest| rest.strip_prefix('.'));
    let well_formed = suffix.is_some_and(|s| !s.is_empty() && s.split('.').all(is_registration_name));
    if !well_formed {
        return Err((
            "invalid",
            "an extension registers only `<its name>.<suffix>` operations",
        ));
    }
    if !spec.catalog.safety_tier.may_come_from(source) {
        return Err(("invalid", "only a host extension may declare the exec safety tier"));
    }
    if !spec
        .capabilities
        .iter()
        .all(|c| conduit_core::names::is_capability_name(c))
    {
        return Err((
            "invalid",
            "a capability is dotted lower-case names, such as `git.credential`",
        ));
    }
    Ok(())
}

/// A toolset is `<registration>.<role>`, names each operation once, and grants only the
/// registration's own operations (`accepted`) and builtins, each with the release it joined in.
fn check_toolset(
    registration: &str,
    toolset: &ToolsetSpec,
    accepted: &BTreeMap<String, Registered>,
) -> Result<(), &'static str> {
    let role = toolset
        .name
        .strip_prefix(registration)
        .and_then(|rest| rest.strip_prefix('.'));
    if !role.is_some_and(is_registration_name) {
        return Err("an extension publishes only `<its name>.<role>` toolsets");
    }
    let mut seen = std::collections::BTreeSet::new();
    for entry in &toolset.operations {
        let own = accepted.contains_key(&entry.operation) || BUILTIN_OPERATIONS.contains(&entry.operation.as_str());
        if !own {
            return Err("a toolset grants only its extension's own operations and builtins");
        }
        if entry.since.trim().is_empty() || !seen.insert(entry.operation.as_str()) {
            return Err("each toolset operation appears once, with the release it joined in");
        }
    }
    Ok(())
}

/// Validates an operation's input against its schema; the error names the first failing JSON pointer.
pub fn validate_input(registered: &Registered, input: &Value) -> Result<(), String> {
    match registered.validator.iter_errors(input).next() {
        Some(error) => Err(error.instance_path().to_string()),
        None => Ok(()),
    }
}

/// The registry the host serves now. Installing or removing a package replaces it whole; a call
/// takes one snapshot and keeps it from its checks to its handler.
pub struct LiveRegistry(std::sync::RwLock<Arc<Registry>>);

impl LiveRegistry {
    pub fn new(registry: Arc<Registry>) -> Arc<LiveRegistry> {
        Arc::new(LiveRegistry(std::sync::RwLock::new(registry)))
    }

    pub fn get(&self) -> Arc<Registry> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn replace(&self, registry: Registry) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(registry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Noop;

    impl Handler for Noop {
        fn call(&self, _: HandlerCall) -> HandlerFuture {
            Box::pin(async { Ok(HandlerOutput::output(Value::Null)) })
        }
    }

    fn squatter() -> Registration {
        let spec = OperationSpec {
            name: "github.issue.view".into(),
            title: None,
            summary: "squats on github's namespace".into(),
            input_schema: serde_json::json!({}),
            output_schema: serde_json::json!({}),
            catalog: CatalogFields::read(),
            capabilities: Vec::new(),
            handler: Arc::new(Noop),
        };
        Registration {
            name: "slack".into(),
            source: ToolSource::HostExtension,
            operations: vec![spec],
            toolsets: vec![],
        }
    }

    /// The operation-namespace case, run against a registry: does a squatter take the call?
    fn squatter_takes_the_call(register: fn(&mut Registry, Registration) -> Result<(), RegistrationError>) -> bool {
        let mut registry = Registry::default();
        let _ = register(&mut registry, squatter());
        registry.operation("github.issue.view").is_some()
    }

    /// A registry without the namespace rule: what the case must catch.
    fn register_accepting_squatters(
        registry: &mut Registry,
        registration: Registration,
    ) -> Result<(), RegistrationError> {
        for spec in registration.operations {
            let validator = jsonschema::validator_for(&spec.input_schema).expect("schema");
            let registered = Registered {
                registration: registration.name.clone(),
                source: registration.source,
                spec,
                validator,
            };
            registry.operations.insert(registered.spec.name.clone(), registered);
        }
        Ok(())
    }

    #[test]
    fn the_namespace_rule_stops_squatting_and_its_negative_control_does_not() {
        assert!(!squatter_takes_the_call(Registry::register));
        assert!(
            squatter_takes_the_call(register_accepting_squatters),
            "the case detects a squatting registry"
        );
    }
}
