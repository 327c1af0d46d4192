//! The semantic rules of configuration version 1, each reporting diagnostics by JSON pointer.

use std::collections::{BTreeMap, BTreeSet};

use conduit_core::names::{is_registration_name, is_type_pattern};
use conduit_core::toolbelt_env::{secret_env_name, OS_ENDPOINT, OS_PLAYBOOK_DIR, OS_TOKEN_FILE};
use conduit_core::Duration;

use crate::diagnostic::{push_pointer, Diagnostic};
use crate::grants::{resolve, Registry, Resolved};
use crate::model::{Config, ScopeConfig};
use crate::reference::Reference;

mod binding;

use binding::BindingGrants;

const SUPPORTED_VERSION: u32 = 1;

/// Environment variables an execution gets from the host, which a secret may not shadow.
const RESERVED_ENV: [&str; 12] = [
    OS_ENDPOINT,
    OS_TOKEN_FILE,
    OS_PLAYBOOK_DIR,
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TERM",
    "TMPDIR",
];

/// Operation lists with their toolsets resolved: each scope's effective ceiling (within its
/// ancestors') and each binding's grant (within its scope's ceiling).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effective {
    pub ceilings: BTreeMap<String, BTreeSet<String>>,
    pub grants: BTreeMap<(String, String), BTreeSet<String>>,
    /// Each binding grant's operations, by scope, binding and grant name.
    pub binding_grants: BTreeMap<(String, String, String), BTreeSet<String>>,
    /// The operations each binding's playbook declared when this configuration was validated.
    pub playbooks: BTreeMap<(String, String), BTreeSet<String>>,
}

/// Every independent diagnostic of a typed configuration, and its resolved operation lists.
pub fn check(config: &Config, registry: &Registry) -> (Vec<Diagnostic>, Effective) {
    let mut checker = Checker {
        config,
        registry,
        found: Vec::new(),
    };
    checker.version_and_limits();
    checker.secrets();
    checker.packages();
    crate::extensions::check(config, &mut checker.found);
    let own = checker.own_ceilings();
    let ceilings = checker.ceilings(&own);
    let mut effective = Effective::default();
    for (id, scope) in &config.scopes {
        for (binding, granted) in checker.scope(id, scope, ceilings[id].as_ref(), &own[id].denied) {
            for (grant, ops) in granted.grants {
                let key = (id.clone(), binding.clone(), grant);
                effective.binding_grants.insert(key, ops);
            }
            if let Some(declared) = granted.playbook {
                effective.playbooks.insert((id.clone(), binding.clone()), declared);
            }
            effective.grants.insert((id.clone(), binding), granted.operations);
        }
    }
    effective.ceilings = ceilings
        .into_iter()
        .map(|(id, c)| (id, c.unwrap_or_default()))
        .collect();
    (checker.found, effective)
}

struct Checker<'a> {
    config: &'a Config,
    registry: &'a Registry,
    found: Vec<Diagnostic>,
}

impl Checker<'_> {
    fn report(&mut self, pointer: impl Into<String>, code: &'static str, message: &str, remedy: &str) {
        self.found.push(Diagnostic::error(pointer, code, message, remedy));
    }

    fn version_and_limits(&mut self) {
        if self.config.version != SUPPORTED_VERSION {
            self.report(
                "/version",
                "unsupported_version",
                "only configuration version 1 is supported",
                "set \"version\": 1",
            );
        }
        let limits = self.config.limits;
        let counts = [
            limits.causal_max_depth,
            limits.causal_per_minute,
            limits.header_timeout_seconds,
            limits.body_timeout_seconds,
            limits.toolbelt_connections,
            limits.management_connections,
            limits.event_data_bytes,
        ];
        if counts.contains(&0) || limits.work_store_bytes == 0 || limits.attempt_output_bytes == 0 {
            self.report(
                "/limits",
                "invalid_value",
                "every limit must be at least 1",
                "raise the limit or remove it to take the default",
            );
        }
    }

    /// An approval rule names known operations or toolsets (a builtin passes no gate, so naming
    /// one is a warning: it would promise an approval that never happens), operator names, and a
    /// positive timeout.
    fn approval_rule(&mut self, pointer: &str, rule: &crate::model::ApprovalRule) {
        for (i, entry) in rule.operations.iter().enumerate() {
            let at = format!("{pointer}/operations/{i}");
            match entry.strip_prefix('@') {
                Some(toolset) if self.registry.toolset(toolset).is_some() => {}
                // A warning, not an error: the rule is valid, this entry just never applies.
                None if conduit_core::names::BUILTIN_OPERATIONS.contains(&entry.as_str()) => {
                    self.found.push(Diagnostic::warning(
                        at,
                        "operation_not_gateable",
                        "builtins pass no gate, so no approval holds this operation",
                        "name extension operations or toolsets; this entry has no effect".into(),
                    ))
                }
                None if self.registry.knows(entry) => {}
                _ => self.report(
                    at,
                    "unknown_reference",
                    "no registered operation or toolset has this name",
                    "check the spelling",
                ),
            }
        }
        for (i, name) in rule.approvers.iter().enumerate() {
            if !conduit_core::credential::is_operator_name(name) && name != conduit_core::credential::OWNER {
                self.report(
                    format!("{pointer}/approvers/{i}"),
                    "invalid_name",
                    "an approver is an operator name ([a-z][a-z0-9-]{0,31}) or `local`",
                    "use the name the operator was issued with",
                );
            }
        }
        let timeout_ok = rule
            .timeout
            .as_deref()
            .is_none_or(|t| Duration::parse(t).is_some_and(|d| d.0 > 0));
        if !timeout_ok {
            self.report(
                format!("{pointer}/timeout"),
                "invalid_value",
                "the timeout is a positive duration",
                "write it like `1h` or `30m`",
            );
        }
    }

    /// The package grant set names vocabulary tokens, each once; package gates name scopes.
    fn packages(&mut self) {
        let gates = self.config.packages.as_ref().map(|p| &p.gates);
        for (package, scopes) in gates.into_iter().flatten() {
            for (i, scope) in scopes.iter().enumerate() {
                if !self.config.scopes.contains_key(scope) {
                    self.report(
                        format!("{}/{i}", push_pointer("/packages/gates", package)),
                        "unknown_reference",
                        "no scope has this id",
                        "name a scope of this configuration",
                    );
                }
            }
        }
        let grant = self
            .config
            .packages
            .as_ref()
            .and_then(|p| p.grant.as_deref())
            .unwrap_or_default();
        if let Some((i, _)) = conduit_core::requires::invalid_token(grant) {
            self.report(
                format!("/packages/grant/{i}"),
                "unknown_reference",
                "not a runtime primitive, or named twice",
                "use net.dns, net.outbound, crypto, subprocess, fs.read, fs.write, env.read or clock, once each",
            );
        }
    }

    /// Secret names are environment-safe identifiers; references use a known scheme. Neither the
    /// reference nor any part of it is ever quoted back.
    fn secrets(&mut self) {
        for (name, reference) in &self.config.secrets {
            let pointer = push_pointer("/secrets", name);
            if !is_secret_name(name) || RESERVED_ENV.contains(&secret_env_name(name).as_str()) {
                self.report(
                    pointer.clone(),
                    "invalid_name",
                    "a secret name is a lower-case letter followed by lower-case letters, digits or `_`, and \
                     does not shadow a variable the host sets (os_endpoint, os_token_file, path, home, ...)",
                    "rename the secret",
                );
            }
            if Reference::parse(reference).is_err() {
                self.report(
                    pointer,
                    "invalid_reference",
                    "a secret reference is `keyring:<service>/<account>`, `file:<key>`, `env:<NAME>`, `cmd:<command>` \
                     or `sealed:<sha256>`",
                    "fix the reference",
                );
            }
        }
    }

    /// Each scope's own authorization list, resolved.
    fn own_ceilings(&mut self) -> BTreeMap<String, Resolved> {
        let mut own = BTreeMap::new();
        for (id, scope) in &self.config.scopes {
            let pointer = format!("{}/authorization/operations", push_pointer("/scopes", id));
            self.enumeration_warnings(&scope.authorization.operations, &pointer);
            own.insert(
                id.clone(),
                resolve(
                    &scope.authorization.operations,
                    self.registry,
                    &pointer,
                    &mut self.found,
                ),
            );
        }
        own
    }

    /// Each scope's effective ceiling: its own operations within every ancestor's. A toolset is
    /// narrowed to the parent's ceiling; a name the parent does not allow is `authority_widening`.
    /// Reports unknown parents and cycles. A ceiling is unknown (`None`) when its chain is broken or a
    /// list in it has an unknown entry: nothing is checked against it, so each mistake is reported
    /// once, where it is, and not again at everything that depends on it.
    fn ceilings(&mut self, own: &BTreeMap<String, Resolved>) -> BTreeMap<String, Option<BTreeSet<String>>> {
        let scopes = &self.config.scopes;
        let mut ceilings = BTreeMap::new();
        for id in scopes.keys() {
            let pointer = push_pointer("/scopes", id);
            let mine = &own[id];
            let ceiling = match ancestor_ceiling(id, scopes, own) {
                Ok(Some(Some(parent))) => {
                    for (i, op) in &mine.explicit {
                        if !parent.contains(op) {
                            self.widening(format!("{pointer}/authorization/operations/{i}"), "its parent scope");
                        }
                    }
                    Some(mine.granted.intersection(&parent).cloned().collect())
                }
                Ok(Some(None)) => None,
                Ok(None) => Some(mine.granted.clone()),
                Err(code) => {
                    self.parent(&pointer, code);
                    None
                }
            };
            ceilings.insert(id.clone(), ceiling.filter(|_| mine.complete));
        }
        ceilings
    }

    fn parent(&mut self, scope_pointer: &str, code: &'static str) {
        let message = match code {
            "parent_cycle" => "the scope's parents form a cycle",
            _ => "the parent scope (or one of its ancestors) does not exist",
        };
        self.report(
            format!("{scope_pointer}/parent"),
            code,
            message,
            "name an existing scope that is not a descendant",
        );
    }

    fn widening(&mut self, pointer: String, ceiling_of: &str) {
        let message = format!("this operation is outside the ceiling of {ceiling_of}");
        self.report(
            pointer,
            "authority_widening",
            &message,
            "remove the operation, or allow it in the ceiling first",
        );
    }

    /// Checks a scope and its bindings, returning each binding's resolved grants.
    fn scope(
        &mut self,
        id: &str,
        scope: &ScopeConfig,
        ceiling: Option<&BTreeSet<String>>,
        denied: &BTreeSet<String>,
    ) -> BTreeMap<String, BindingGrants> {
        let mut grants = BTreeMap::new();
        let pointer = push_pointer("/scopes", id);
        if !is_registration_name(id) {
            self.report(
                pointer.clone(),
                "invalid_name",
                "a scope id is a lower-case letter followed by lower-case letters, digits, `-` or `_`",
                "rename the scope",
            );
        }
        for (name, binding) in &scope.bindings {
            let grant = self.binding(
                &push_pointer(&format!("{pointer}/bindings"), name),
                binding,
                ceiling,
                denied,
            );
            grants.insert(name.clone(), grant);
        }
        for (i, rule) in scope.approvals.iter().enumerate() {
            self.approval_rule(&format!("{pointer}/approvals/{i}"), rule);
        }
        for (i, route) in scope.routes.iter().enumerate() {
            let route_pointer = format!("{pointer}/routes/{i}");
            if !is_type_pattern(&route.on) {
                self.report(
                    format!("{route_pointer}/on"),
                    "invalid_value",
                    "a route matches an event type (`demo.requested`) or a family (`demo.*`)",
                    "fix the pattern",
                );
            }
            if !scope.bindings.contains_key(&route.binding) {
                self.report(
                    format!("{route_pointer}/binding"),
                    "unknown_reference",
                    "no binding of this scope has this name",
                    "name a binding declared under this scope's `bindings`",
                );
            }
        }
        grants
    }

    /// A list that names, one by one, every operation an older release's toolset had, but not the
    /// toolset, lacks what the toolset gained since: a warning with the command that grants it.
    fn enumeration_warnings(&mut self, list: &[String], pointer: &str) {
        let named: BTreeSet<&str> = list.iter().map(String::as_str).collect();
        for (toolset, entries) in self.registry.toolset_versions() {
            if named.contains(format!("@{toolset}").as_str()) {
                continue;
            }
            let Some((release, gained)) = enumerated_release(entries, &named) else {
                continue;
            };
            self.found.push(Diagnostic::warning(
                pointer,
                "toolset_enumerated",
                format!(
                    "this list names each operation `@{toolset}` had in release {release} but not the toolset, so it lacks what the toolset gained since: {}",
                    gained.join(", ")
                ),
                format!("open-conduit config set {pointer}/- '\"@{toolset}\"'"),
            ));
        }
    }
}

/// The newest older release whose toolset `named` enumerates completely, and the operations the
/// toolset gained after it that `named` lacks.
fn enumerated_release(entries: &BTreeMap<String, String>, named: &BTreeSet<&str>) -> Option<(String, Vec<String>)> {
    let mut releases: Vec<&String> = entries.values().collect();
    releases.sort_by_key(|r| release_key(r));
    releases.dedup();
    releases.pop(); // the current release: naming all of it is not stale
    releases.into_iter().rev().find_map(|release| {
        let key = release_key(release);
        let had = |since: &String| release_key(since) <= key;
        let complete = entries
            .iter()
            .filter(|(_, s)| had(s))
            .all(|(op, _)| named.contains(op.as_str()));
        let gained: Vec<String> = entries
            .iter()
            .filter(|(op, s)| !had(s) && !named.contains(op.as_str()))
            .map(|(op, _)| op.clone())
            .collect();
        (complete && !gained.is_empty()).then(|| (release.clone(), gained))
    })
}

/// A release's sort key: its dot-separated numbers (`0.10.0` after `0.9.1`).
fn release_key(release: &str) -> Vec<u64> {
    release.split('.').map(|part| part.parse().unwrap_or(0)).collect()
}

fn is_secret_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The intersection of the resolved lists of `id`'s ancestors: `None` for a root scope, `Some(None)`
/// when an ancestor's list is incomplete.
fn ancestor_ceiling(
    id: &str,
    scopes: &BTreeMap<String, ScopeConfig>,
    own: &BTreeMap<String, Resolved>,
) -> Result<Option<Option<BTreeSet<String>>>, &'static str> {
    let mut seen = BTreeSet::from([id.to_owned()]);
    let mut ceiling: Option<BTreeSet<String>> = None;
    let mut complete = true;
    let mut current = scopes.get(id).and_then(|s| s.parent.as_deref());
    while let Some(parent_id) = current {
        if !seen.insert(parent_id.to_owned()) {
            return Err("parent_cycle");
        }
        let parent = scopes.get(parent_id).ok_or("unknown_reference")?;
        let Some(ops) = own.get(parent_id).filter(|r| r.complete).map(|r| r.granted.clone()) else {
            complete = false;
            current = parent.parent.as_deref();
            continue;
        };
        ceiling = Some(match ceiling {
            Some(c) => c.intersection(&ops).cloned().collect(),
            None => ops,
        });
        current = parent.parent.as_deref();
    }
    let is_root = seen.len() == 1;
    Ok((!is_root).then(|| ceiling.filter(|_| complete)))
}
