//! The serving route's answer: which operations serve a capability that the token could call now
//! (granted, within the live ceiling), and what a registration may declare it serves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use conduit_config::default_config_json;
use conduit_core::tool::{CatalogFields, ToolSource};
use conduit_core::ErrorCode;
use conduit_toolbelt::registry::{OperationSpec, Registration};
use conduit_toolbelt::Registry;
use serde_json::json;

fn operation(name: &str, capabilities: &[&str]) -> OperationSpec {
    OperationSpec {
        name: name.into(),
        title: None,
        summary: format!("{name} for tests"),
        input_schema: json!({"type": "object"}),
        output_schema: json!({"type": "object"}),
        catalog: CatalogFields::read(),
        capabilities: capabilities.iter().map(|c| (*c).to_owned()).collect(),
        handler: Arc::new(Noop),
    }
}

/// `vault.git` and `vault.spare` serve `git.credential`; `vault.list` serves nothing.
fn registration(capability: &str) -> Registration {
    Registration {
        name: "vault".into(),
        source: ToolSource::HostExtension,
        operations: vec![
            operation("vault.git", &[capability]),
            operation("vault.spare", &[capability]),
            operation("vault.list", &[]),
        ],
        toolsets: vec![],
    }
}

/// The default configuration with `extra` granted in the setup scope's ceiling and binding.
fn granting(extra: &str) -> String {
    let builtins = r#""emit", "read_context", "declare_outcome", "wait", "create_work""#;
    default_config_json().replace(builtins, &format!("{builtins}{extra}"))
}

fn harness() -> Harness {
    let mut registry = Registry::default();
    registry.register(registration("git.credential")).unwrap();
    Harness::with_registry(&granting(r#", "vault.git", "vault.list""#), registry)
}

fn serving(h: &Harness, execution: &str, token: &str, capability: &str) -> Result<Vec<String>, ErrorCode> {
    let answer = h.toolbelt.serving(execution, token, capability).map_err(|r| r.code)?;
    assert_eq!(answer["capability"], capability);
    Ok(serde_json::from_value(answer["operations"].clone()).unwrap())
}

#[test]
fn only_granted_operations_that_serve_the_capability_are_answered() {
    let h = harness();
    let (claim, token) = h.attempt();
    let id = claim.execution.id.as_str();
    assert_eq!(
        serving(&h, id, &token, "git.credential"),
        Ok(vec!["vault.git".to_owned()]),
        "vault.spare serves it but is not granted; vault.list is granted but serves nothing"
    );
    assert_eq!(serving(&h, id, &token, "slack.reply"), Ok(vec![]));
    assert_eq!(
        serving(&h, id, "not-the-token", "git.credential"),
        Err(ErrorCode::Forbidden)
    );
}

#[test]
fn a_narrowed_ceiling_removes_what_the_token_was_granted() {
    let h = harness();
    let (claim, token) = h.attempt();
    let id = claim.execution.id.as_str();
    h.config.replace(h.snapshot(&granting(r#", "vault.list""#)));
    assert_eq!(
        serving(&h, id, &token, "git.credential"),
        Ok(vec![]),
        "narrowed at once"
    );
    h.config
        .replace(h.snapshot(&granting(r#", "vault.git", "vault.list""#)));
    assert_eq!(
        serving(&h, id, &token, "git.credential"),
        Ok(vec!["vault.git".to_owned()]),
        "control: served again once the ceiling allows it"
    );
}

#[test]
fn a_registration_declares_only_well_formed_capabilities() {
    for bad in ["git", "Git.Credential", "git..credential", "git.credential!", ""] {
        let refused = Registry::default().register(registration(bad)).unwrap_err();
        assert_eq!(refused.code, "invalid", "{bad:?}");
    }
    assert!(Registry::default().register(registration("git.credential")).is_ok());
}
