//! Toolsets: published by registrations, granted by name, narrowed to ceilings, and resolved against
//! the running release, so a release that adds an operation to a toolset grants it unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::Noop;
use conduit_config::parse_with;
use conduit_core::tool::{CatalogFields, ToolSource};
use conduit_toolbelt::registry::{OperationSpec, Registration, ToolsetEntry, ToolsetSpec};
use conduit_toolbelt::Registry;
use serde_json::json;

fn operation(name: &str) -> OperationSpec {
    OperationSpec {
        name: name.into(),
        title: None,
        summary: name.into(),
        input_schema: json!({}),
        output_schema: json!({}),
        catalog: CatalogFields::write(),
        capabilities: Vec::new(),
        handler: Arc::new(Noop),
    }
}

fn toolset(name: &str, ops: &[&str]) -> ToolsetSpec {
    versioned(name, &ops.iter().map(|o| (*o, "0.1.0")).collect::<Vec<_>>())
}

fn versioned(name: &str, ops: &[(&str, &str)]) -> ToolsetSpec {
    let entry = |(op, since): &(&str, &str)| ToolsetEntry {
        operation: (*op).into(),
        since: (*since).into(),
    };
    ToolsetSpec {
        name: name.into(),
        operations: ops.iter().map(entry).collect(),
    }
}

/// The `notes` extension of a release whose `notes.writer` toolset holds `writer`.
fn release(writer: &[&str]) -> Registry {
    let mut registry = Registry::default();
    let registration = Registration {
        name: "notes".into(),
        source: ToolSource::HostExtension,
        operations: vec![operation("notes.add"), operation("notes.fail")],
        toolsets: vec![toolset("notes.writer", writer)],
    };
    registry.register(registration).unwrap();
    registry
}

fn config(ceiling: &[&str], grant: &[&str]) -> String {
    json!({"version": 1, "scopes": {"s": {
        "authorization": {"operations": ceiling},
        "bindings": {"b": {"executor": "shell", "config": {"command": ["x"]}, "operations": grant}}}}})
    .to_string()
}

fn diagnostics(text: &str, registry: &Registry) -> Vec<(String, &'static str)> {
    parse_with(text.as_bytes(), &registry.config_registry())
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|d| (d.pointer, d.code))
        .collect()
}

#[test]
fn a_toolset_is_narrowed_to_the_ceiling_while_a_name_outside_it_is_refused() {
    let registry = release(&["notes.add", "notes.fail", "emit"]);
    let narrowed = parse_with(
        config(&["read_context", "notes.add"], &["@notes.writer"]).as_bytes(),
        &registry.config_registry(),
    );
    assert_eq!(narrowed.unwrap().granted_operations("s", "b"), vec!["notes.add"]);
    let widening = config(&["read_context", "notes.add"], &["@notes.writer", "emit"]);
    assert_eq!(
        diagnostics(&widening, &registry),
        vec![("/scopes/s/bindings/b/operations/1".into(), "authority_widening")]
    );
    let denied = config(&["@notes.writer", "!notes.fail"], &["notes.fail"]);
    assert_eq!(
        diagnostics(&denied, &registry),
        vec![("/scopes/s/bindings/b/operations/0".into(), "operation_denied")]
    );
}

#[test]
fn a_child_scopes_toolset_is_narrowed_to_its_parent() {
    let registry = release(&["notes.add", "notes.fail"]);
    let text = json!({"version": 1, "scopes": {
        "parent": {"authorization": {"operations": ["notes.add"]}},
        "child": {"parent": "parent", "authorization": {"operations": ["@notes.writer"]},
            "bindings": {"b": {"executor": "shell", "config": {"command": ["x"]}, "operations": ["@notes.writer"]}}}}})
    .to_string();
    let snapshot = parse_with(text.as_bytes(), &registry.config_registry()).unwrap();
    assert_eq!(snapshot.granted_operations("child", "b"), vec!["notes.add"]);
    assert!(!snapshot.authorize_operation("child", "notes.fail"));
}

#[test]
fn a_release_that_grows_a_toolset_grants_more_with_the_same_hash() {
    let text = config(&["@notes.writer", "@core.worker"], &["@notes.writer", "read_context"]);
    let before = parse_with(text.as_bytes(), &release(&["notes.add"]).config_registry()).unwrap();
    let after = parse_with(
        text.as_bytes(),
        &release(&["notes.add", "notes.fail"]).config_registry(),
    )
    .unwrap();
    assert_eq!(before.hash(), after.hash(), "the configuration did not change");
    assert_eq!(before.granted_operations("s", "b"), vec!["notes.add", "read_context"]);
    assert_eq!(
        after.granted_operations("s", "b"),
        vec!["notes.add", "notes.fail", "read_context"]
    );
}

#[test]
fn unknown_toolsets_and_denials_are_references() {
    let registry = release(&["notes.add"]);
    let text = config(&["@notes.writr", "!notes.ad"], &[]);
    assert_eq!(
        diagnostics(&text, &registry),
        vec![
            ("/scopes/s/authorization/operations/0".into(), "unknown_reference"),
            ("/scopes/s/authorization/operations/1".into(), "unknown_reference"),
        ]
    );
}

#[test]
fn a_toolset_grants_only_its_own_operations_and_builtins() {
    let cases = [
        ("outside the namespace", toolset("other.writer", &["notes.add"])),
        ("another's operation", toolset("notes.writer", &["github.issue.view"])),
        (
            "an operation twice",
            toolset("notes.writer", &["notes.add", "notes.add"]),
        ),
    ];
    for (what, spec) in cases {
        let registration = Registration {
            name: "notes".into(),
            source: ToolSource::HostExtension,
            operations: vec![operation("notes.add")],
            toolsets: vec![spec],
        };
        let mut registry = Registry::default();
        let err = registry.register(registration).unwrap_err();
        assert_eq!(err.code, "invalid", "{what}");
        assert!(registry.operation("notes.add").is_none(), "{what}: nothing registered");
    }
}

#[test]
fn a_list_enumerating_an_older_toolset_is_warned_with_the_command_that_grants_it() {
    let mut registry = Registry::default();
    let registration = Registration {
        name: "notes".into(),
        source: ToolSource::HostExtension,
        operations: vec![operation("notes.add"), operation("notes.fail")],
        toolsets: vec![versioned(
            "notes.writer",
            &[("notes.add", "0.1.0"), ("emit", "0.1.0"), ("notes.fail", "0.10.0")],
        )],
    };
    registry.register(registration).unwrap();
    let text = config(&["@notes.writer"], &["notes.add", "emit"]);
    let snapshot = parse_with(text.as_bytes(), &registry.config_registry()).expect("a warning never fails the config");
    let warnings = snapshot.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        (warnings[0].pointer.as_str(), warnings[0].code),
        ("/scopes/s/bindings/b/operations", "toolset_enumerated")
    );
    assert!(warnings[0].message.contains("notes.fail") && warnings[0].message.contains("0.1.0"));
    assert_eq!(
        warnings[0].remedy,
        "open-conduit config set /scopes/s/bindings/b/operations/- '\"@notes.writer\"'"
    );
    let current = config(&["@notes.writer"], &["@notes.writer"]);
    assert!(parse_with(current.as_bytes(), &registry.config_registry())
        .unwrap()
        .warnings()
        .is_empty());
}
