//! The release's first-party extensions (`http.fetch` behind the egress guard, human approvals,
//! GitHub, Slack, introspection) and the registry that serves them beside the installed packages.

pub mod approvals;
pub mod backoff;
pub mod github;
pub mod http_fetch;
pub mod ingress;
pub mod introspection;
pub mod secret_access;
pub mod signature;
pub mod slack;

use std::sync::Arc;

use conduit_toolbelt::Registry;

/// What the release's extensions serve from: the secrets they resolve, the human approvals gate,
/// and the store introspection reads.
pub struct Live {
    pub secrets: secret_access::SecretAccess,
    pub approvals: Arc<dyn conduit_toolbelt::gate::Gate>,
    pub store: Arc<dyn conduit_store::Store>,
}

/// The release's extensions (serving from `live`; without it they only name their operations),
/// then the installed packages' registrations. A package whose names no longer fit (a later
/// release took one) is left out and logged, never fatal.
pub fn registry_with(live: Option<Live>, packages: Vec<conduit_toolbelt::registry::Registration>) -> Registry {
    let mut registry = Registry::default();
    let secrets = live.as_ref().map(|l| l.secrets.clone());
    let github = Arc::new(github::Github::new(secrets.clone()));
    let slack = Arc::new(slack::Slack::new(secrets.clone()));
    let reads = live.as_ref().map(|l| (l.store.clone(), l.secrets.config.clone()));
    let introspection = Arc::new(introspection::Introspection::new(reads));
    let fetch = Arc::new(http_fetch::HttpFetch::new(secrets));
    #[allow(
        clippy::expect_used,
        reason = "the release's own registrations are constants, tested"
    )]
    registry
        .register(http_fetch::registration(fetch))
        .and_then(|()| registry.register(approvals::registration()))
        .and_then(|()| registry.register(github::registration(github)))
        .and_then(|()| registry.register(slack::registration(slack)))
        .and_then(|()| registry.register(introspection::registration(introspection)))
        .and_then(|()| registry.set_samples(github::NAME, github::webhook::samples()))
        .and_then(|()| registry.set_samples(slack::NAME, slack::events::samples()))
        .expect("the release's own registrations are valid");
    if let Some(live) = live {
        #[allow(clippy::expect_used, reason = "the human registration was just registered")]
        registry
            .set_gate(approvals::NAME, live.approvals)
            .expect("the human registration is registered");
    }
    for package in packages {
        let name = package.name.clone();
        if let Err(e) = registry.register(package) {
            tracing::warn!(package = %name, error = %e, "an installed package was not loaded");
        }
    }
    registry
}
