//! A validated configuration generation and the questions the host asks of it.

use std::collections::{BTreeMap, BTreeSet};

use conduit_core::names::type_matches;
use conduit_core::retry::RetryPolicy;
use conduit_core::Work;

use crate::diagnostic::Diagnostic;
use crate::executor::{executable, Executable};
use crate::model::{BindingConfig, Config, Limits, RouteConfig, ScopeConfig};
use crate::reference::Reference;
use crate::rules::Effective;

/// An immutable, validated configuration with its generation number and canonical hash.
/// How an event meets a route (`Snapshot::route_reach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    Matches,
    Skips,
    /// An earlier final route matched.
    NotReached,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    generation: i64,
    hash: String,
    /// The configuration as the operator wrote it, canonically serialized.
    written: String,
    /// The same with every secret reference sealed: what the store keeps (the hash is over this).
    sealed: String,
    config: Config,
    effective: Effective,
    warnings: Vec<Diagnostic>,
}

impl Snapshot {
    pub(crate) fn new(
        generation: i64,
        hash: String,
        (written, sealed): (String, String),
        config: Config,
        effective: Effective,
    ) -> Snapshot {
        Snapshot {
            generation,
            hash,
            written,
            sealed,
            config,
            effective,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn with_warnings(mut self, warnings: Vec<Diagnostic>) -> Snapshot {
        self.warnings = warnings;
        self
    }

    /// What validation found that does not fail the configuration (stale grants, playbooks that need
    /// more than their binding is granted).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The same configuration published as `generation`.
    pub fn at_generation(mut self, generation: i64) -> Snapshot {
        self.generation = generation;
        self
    }

    pub fn generation(&self) -> i64 {
        self.generation
    }

    pub fn hash(&self) -> &str {
        &self.hash
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration as written, canonically serialized: what a daemon keeps privately of a
    /// generation, so that parsing it again yields the same hash.
    pub fn written_json(&self) -> &str {
        &self.written
    }

    /// The configuration with every secret reference sealed, canonically serialized: what the
    /// store keeps of a generation, from which every daemon on it can run it (parsing it again
    /// yields the same hash).
    pub fn sealed_json(&self) -> &str {
        &self.sealed
    }

    /// The reference texts this configuration was written with (not the sealed ones), each with
    /// its sealed form: what a daemon learns to resolve a sealed generation's secrets.
    pub fn references(&self) -> impl Iterator<Item = (String, &str)> {
        self.config
            .secrets
            .values()
            .filter(|r| !matches!(Reference::parse(r), Ok(Reference::Sealed(_))))
            .map(|r| (crate::reference::seal(r), r.as_str()))
    }

    /// The configuration as written with every secret reference replaced by its scheme: what
    /// responses show.
    pub fn redacted_json(&self) -> String {
        let mut value: serde_json::Value = serde_json::from_str(&self.written).unwrap_or_default();
        if let Some(secrets) = value.get_mut("secrets").and_then(serde_json::Value::as_object_mut) {
            for reference in secrets.values_mut() {
                let scheme = reference
                    .as_str()
                    .and_then(|r| Reference::parse(r).ok())
                    .map_or("unknown", |r| r.scheme());
                *reference = serde_json::Value::String(format!("{scheme}:<redacted>"));
            }
        }
        conduit_core::canonical::canonical_json(&value)
    }

    /// The reference of a named secret (for the resolver only; never shown).
    pub fn github(&self) -> Option<&crate::GithubConfig> {
        self.config.extensions.as_ref()?.github.as_ref()
    }

    pub fn slack(&self) -> Option<&crate::SlackConfig> {
        self.config.extensions.as_ref()?.slack.as_ref()
    }

    /// Whether this generation enables the introspection operations.
    pub fn introspection_enabled(&self) -> bool {
        self.config
            .extensions
            .as_ref()
            .is_some_and(|e| e.introspection.is_some())
    }

    /// The scope the ingress `source` (a first-party extension's registration name) accepts its
    /// events in, when it is configured to accept any.
    pub fn ingress_scope(&self, source: &str) -> Option<&str> {
        match source {
            "github" => self.github()?.scope.as_deref(),
            "slack" => self.slack()?.scope.as_deref(),
            _ => None,
        }
    }

    pub fn secret_reference(&self, name: &str) -> Option<&str> {
        self.config.secrets.get(name).map(String::as_str)
    }

    pub fn limits(&self) -> Limits {
        self.config.limits
    }

    /// Whether any grant list (a scope's authorization, a binding's operations) names something in
    /// `namespace`: `ns.op`, `@ns.toolset`, or a denial of either.
    pub fn names_namespace(&self, namespace: &str) -> bool {
        let prefix = format!("{namespace}.");
        let names = |list: &[String]| {
            list.iter().any(|entry| {
                entry
                    .trim_start_matches('!')
                    .trim_start_matches('@')
                    .starts_with(&prefix)
            })
        };
        self.config.scopes.values().any(|scope| {
            names(&scope.authorization.operations) || scope.bindings.values().any(|b| names(&b.operations))
        })
    }

    /// The first approval rule of `scope` that covers `operation` (by name, or through a toolset
    /// `toolset_holds` says holds it).
    pub fn approval_rule(
        &self,
        scope: &str,
        operation: &str,
        toolset_holds: impl Fn(&str, &str) -> bool,
    ) -> Option<&crate::model::ApprovalRule> {
        self.config.scopes.get(scope)?.approvals.iter().find(|rule| {
            rule.operations.iter().any(|entry| match entry.strip_prefix('@') {
                Some(toolset) => toolset_holds(toolset, operation),
                None => entry == operation,
            })
        })
    }

    /// The primitives installed packages are granted (RFC 0076 §A).
    pub fn package_grant(&self) -> Vec<String> {
        let configured = self.config.packages.as_ref().and_then(|p| p.grant.clone());
        configured.unwrap_or_else(|| conduit_core::requires::DEFAULT_GRANT.map(str::to_owned).to_vec())
    }

    /// Whether an installed package's gate is asked about calls in `scope`.
    pub fn package_gates_scope(&self, package: &str, scope: &str) -> bool {
        let gates = self.config.packages.as_ref().and_then(|p| p.gates.get(package));
        gates.is_some_and(|scopes| scopes.iter().any(|s| s == scope))
    }

    /// Whether installs are gated on the grant.
    pub fn package_gating(&self) -> bool {
        self.config.packages.as_ref().and_then(|p| p.gating).unwrap_or(true)
    }

    pub fn scope(&self, id: &str) -> Option<&ScopeConfig> {
        self.config.scopes.get(id)
    }

    pub fn binding(&self, scope: &str, binding: &str) -> Option<&BindingConfig> {
        self.scope(scope)?.bindings.get(binding)
    }

    /// Whether the scope exists and it and every ancestor are enabled.
    pub fn scope_enabled(&self, id: &str) -> bool {
        self.scope(id).is_some() && self.lineage(id).all(|s| s.enabled)
    }

    /// The scope's ceiling check: the scope exists, is enabled, it and every ancestor allow `op`,
    /// and the generation enables the first-party extension `op` belongs to. A grant naming a
    /// disabled extension's operations is thereby narrowed away (the binding keeps running; its
    /// tokens, catalogs and guidance lack them) rather than failing the configuration.
    pub fn authorize_operation(&self, scope: &str, op: &str) -> bool {
        self.scope_enabled(scope)
            && self.effective.ceilings.get(scope).is_some_and(|c| c.contains(op))
            && self.extension_enabled(op)
    }

    /// Whether the generation configures the first-party extension `op` belongs to (`github`,
    /// `slack`, `introspection`); every other operation's owner needs no entry.
    fn extension_enabled(&self, op: &str) -> bool {
        match op.split('.').next() {
            Some("github") => self.github().is_some(),
            Some("slack") => self.slack().is_some(),
            Some("introspection") => self.introspection_enabled(),
            _ => true,
        }
    }

    /// The scope's effective ceiling, with toolsets resolved and within every ancestor's.
    pub fn ceiling(&self, scope: &str) -> BTreeSet<String> {
        self.effective.ceilings.get(scope).cloned().unwrap_or_default()
    }

    /// The operations a binding's executions are granted: its resolved list, within the ceiling.
    pub fn granted_operations(&self, scope: &str, binding: &str) -> Vec<String> {
        let key = (scope.to_owned(), binding.to_owned());
        let granted = self.effective.grants.get(&key).into_iter().flatten();
        granted
            .filter(|op| self.authorize_operation(scope, op))
            .cloned()
            .collect()
    }

    /// What a Work's attempts are granted: its binding's operations, plus those of the binding grants
    /// the Work took, each within its scope's current ceiling.
    pub fn granted_to(&self, work: &Work) -> Vec<String> {
        let mut granted: BTreeSet<String> = self
            .granted_operations(&work.scope, &work.binding)
            .into_iter()
            .collect();
        for grant in &work.grants {
            let key = (work.scope.clone(), work.binding.clone(), grant.clone());
            let ops = self.effective.binding_grants.get(&key).into_iter().flatten();
            granted.extend(ops.filter(|op| self.authorize_operation(&work.scope, op)).cloned());
        }
        granted.into_iter().collect()
    }

    /// The operations the binding's playbook declared when this generation was validated: what a
    /// refusal in it is judged against (`config_drift`), however the playbook has changed since.
    pub fn playbook_operations(&self, scope: &str, binding: &str) -> Option<&BTreeSet<String>> {
        self.effective.playbooks.get(&(scope.to_owned(), binding.to_owned()))
    }

    /// Each playbook this generation's bindings name, with the operations it declared when the
    /// generation was validated (what a later restore pins it to: see [`Registry::with_playbook`]).
    pub fn pinned_playbooks(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut pinned = BTreeMap::new();
        for ((scope, binding), declared) in &self.effective.playbooks {
            if let Some(name) = self.binding(scope, binding).and_then(|b| b.playbook.clone()) {
                pinned.insert(name, declared.clone());
            }
        }
        pinned
    }

    /// Whether the binding offers a binding grant named `grant`.
    pub fn offers_grant(&self, scope: &str, binding: &str, grant: &str) -> bool {
        let key = (scope.to_owned(), binding.to_owned(), grant.to_owned());
        self.effective.binding_grants.contains_key(&key)
    }

    /// The bindings whose routes in `scope` an event of `event_type` reaches and matches, in route
    /// order.
    pub fn routes_for<'a>(&'a self, scope: &str, event_type: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.route_reach(scope, event_type)
            .filter(|(_, reach)| *reach == Reach::Matches)
            .map(|(r, _)| r.binding.as_str())
    }

    /// Whether an event of `event_type` interrupts running Work of `binding` in `scope`: an
    /// interrupting route of that binding reaches and matches it.
    pub fn interrupts(&self, scope: &str, binding: &str, event_type: &str) -> bool {
        self.route_reach(scope, event_type)
            .any(|(route, reach)| reach == Reach::Matches && route.interrupt && route.binding == binding)
    }

    /// How an event of `event_type` meets each of the scope's routes, in order: a final route that
    /// matches is the last one it reaches.
    pub fn route_reach<'a>(
        &'a self,
        scope: &str,
        event_type: &'a str,
    ) -> impl Iterator<Item = (&'a RouteConfig, Reach)> + 'a {
        let mut stopped = false;
        self.scope(scope)
            .into_iter()
            .flat_map(|s| s.routes.iter())
            .map(move |route| {
                let reach = if stopped {
                    Reach::NotReached
                } else if type_matches(&route.on, event_type) {
                    stopped = route.last;
                    Reach::Matches
                } else {
                    Reach::Skips
                };
                (route, reach)
            })
    }

    /// How a binding's executions run (`None` for an executor the host does not run itself).
    pub fn executable(&self, scope: &str, binding: &str) -> Option<Executable> {
        executable("", self.binding(scope, binding)?, None)?.ok()
    }

    /// How the binding's failed attempts are tried again (validation has checked it).
    pub fn retry(&self, scope: &str, binding: &str) -> RetryPolicy {
        self.binding(scope, binding)
            .and_then(|b| crate::retry::policy("", b.retry.as_ref()).ok())
            .unwrap_or_default()
    }

    /// How the binding's executions are confined (validation has checked the setting).
    pub fn sandbox(&self, scope: &str, binding: &str) -> Option<conduit_core::sandbox::Sandbox> {
        let binding = self.binding(scope, binding)?;
        Some(crate::sandbox::setting("", binding.sandbox.as_ref(), None).0)
    }

    /// A scope and its ancestors, nearest first. Validation guarantees the chain ends.
    fn lineage<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a ScopeConfig> + 'a {
        let mut next = self.scope(id);
        std::iter::from_fn(move || {
            let current = next?;
            next = current.parent.as_deref().and_then(|p| self.scope(p));
            Some(current)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::parse;

    #[test]
    fn disabled_ancestor_closes_the_ceiling() {
        let snap = parse(
            br#"{"version":1,"scopes":{
            "p":{"enabled":false,"authorization":{"operations":["emit"]}},
            "c":{"parent":"p","authorization":{"operations":["emit"]}}}}"#,
        )
        .unwrap();
        assert!(!snap.authorize_operation("c", "emit"));
        assert!(!snap.scope_enabled("c"));
        assert!(!snap.authorize_operation("nope", "emit"));
    }

    #[test]
    fn routes_match_patterns_in_order() {
        let snap = parse(
            br#"{"version":1,"scopes":{"s":{
            "bindings":{"a":{"executor":"shell","config":{"command":["x"]}},"b":{"executor":"shell","config":{"command":["y"],"timeout":"5s"}}},
            "routes":[{"on":"demo.*","binding":"b"},{"on":"demo.x","binding":"a"}]}}}"#,
        )
        .unwrap();
        assert_eq!(snap.routes_for("s", "demo.x").collect::<Vec<_>>(), vec!["b", "a"]);
        assert_eq!(snap.executable("s", "b").unwrap().timeout().0, 5000);
        assert_eq!(snap.executable("s", "a").unwrap().timeout().0, 3_600_000);
    }
}

/// The active generation, shared by every component that authorizes against it. Replacing it takes
/// effect at once for the next check, which is how narrowing the config revokes live authority.
#[derive(Debug, Clone)]
pub struct CurrentConfig(std::sync::Arc<std::sync::RwLock<std::sync::Arc<Snapshot>>>);

impl CurrentConfig {
    pub fn new(snapshot: Snapshot) -> CurrentConfig {
        CurrentConfig(std::sync::Arc::new(std::sync::RwLock::new(std::sync::Arc::new(
            snapshot,
        ))))
    }

    pub fn get(&self) -> std::sync::Arc<Snapshot> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn replace(&self, snapshot: Snapshot) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = std::sync::Arc::new(snapshot);
    }
}
