//! Secrets for an attempt: resolved immediately before it starts, outside any transaction, and handed
//! to the executor as environment variables. Only names that both the attempt's pinned generation and
//! the current one give its binding are resolved, each by the current generation's reference.

use super::{Resolver, Secret, SecretError};
use conduit_config::Snapshot;
use conduit_core::toolbelt_env::secret_env_name;

/// A secret of an attempt that did not resolve: its name, the stable code and what to do about it,
/// all safe to log.
#[derive(Debug, PartialEq, Eq)]
pub struct Unresolved {
    pub name: String,
    pub code: &'static str,
    pub remedy: String,
}

impl Unresolved {
    pub fn new(name: &str, code: &'static str, remedy: impl Into<String>) -> Unresolved {
        Unresolved {
            name: name.to_owned(),
            code,
            remedy: remedy.into(),
        }
    }
}

/// The environment variables of an attempt's secrets, or the first secret that could not be resolved.
pub fn resolve_for(
    resolver: &Resolver,
    pinned: &Snapshot,
    current: &Snapshot,
    scope: &str,
    binding: &str,
) -> Result<Vec<(String, Secret)>, Unresolved> {
    let selected = |s: &Snapshot| s.binding(scope, binding).map(|b| b.secrets.clone()).unwrap_or_default();
    let pinned_names = selected(pinned);
    selected(current)
        .into_iter()
        .filter(|name| pinned_names.contains(name))
        .map(|name| {
            let missing = || Unresolved::new(&name, "not_found", "give the secret a reference under `secrets`");
            let reference = current.secret_reference(&name).ok_or_else(missing)?;
            let failed = |e: SecretError| Unresolved::new(&name, e.code(), resolver.remedy(e));
            let value = resolver.resolve(reference).map_err(failed)?;
            Ok((secret_env_name(&name), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::secrets::{KeyringBackend, KeyringUnavailable};
    use conduit_config::parse;
    use serde_json::json;

    use super::*;

    struct NoKeyring;

    impl KeyringBackend for NoKeyring {
        fn get(&self, _: &str, _: &str) -> Result<Option<String>, KeyringUnavailable> {
            Err(KeyringUnavailable)
        }
    }

    fn snapshot(binding_secrets: &[&str]) -> Snapshot {
        let config = json!({"version": 1,
            "secrets": {"alpha": "cmd:printf a", "beta": "cmd:printf b", "broken": "env:OPEN_CONDUIT_UNSET_FOR_TEST"},
            "scopes": {"s": {"bindings": {"b": {"executor": "shell", "config": {"command": ["x"]}, "secrets": binding_secrets}}}}});
        parse(config.to_string().as_bytes()).unwrap()
    }

    fn resolver() -> Resolver {
        Resolver::new("/nonexistent/secrets.json".into(), Arc::new(NoKeyring))
    }

    #[test]
    fn only_names_both_generations_grant_are_resolved() {
        let env = resolve_for(
            &resolver(),
            &snapshot(&["alpha", "beta"]),
            &snapshot(&["beta"]),
            "s",
            "b",
        )
        .unwrap();
        let pairs: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k, v.expose().to_owned())).collect();
        assert_eq!(pairs, vec![("BETA".to_owned(), "b".to_owned())]);
    }

    #[test]
    fn a_failure_names_the_secret_and_its_code() {
        let both = snapshot(&["broken"]);
        assert_eq!(
            resolve_for(&resolver(), &both, &both, "s", "b").unwrap_err(),
            Unresolved::new("broken", "env_unset", SecretError::EnvUnset.remedy())
        );
    }
}
