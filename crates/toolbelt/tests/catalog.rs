//! The tool catalog: every descriptor the host builds validates against
//! `schemas/tool-descriptor.schema.json`, and the RFC 0078 examples hold against that schema.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::Noop;
use conduit_core::tool::{CatalogFields, Egress, SafetyTier, ToolSource};
use conduit_toolbelt::registry::{OperationSpec, Registration, ToolsetEntry, ToolsetSpec};
use conduit_toolbelt::Registry;
use serde_json::{json, Value};

fn schema() -> jsonschema::Validator {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas/tool-descriptor.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("the descriptor schema compiles")
}

/// A release with a `notes` extension: a credentialed fetch-backed read, in the `notes.reader` toolset.
fn registry() -> Registry {
    let mut registry = Registry::default();
    let fields = CatalogFields {
        egress: Egress::SafeFetch,
        credential_ref: true,
        ..CatalogFields::read()
    };
    let registration = Registration {
        name: "notes".into(),
        source: ToolSource::HostExtension,
        operations: vec![OperationSpec {
            name: "notes.view".into(),
            title: Some("View a note".into()),
            summary: "Read one note.".into(),
            input_schema: json!({"type": "object", "properties": {"id": {"type": "string"}}}),
            output_schema: json!({"type": "object"}),
            catalog: fields,
            capabilities: Vec::new(),
            handler: Arc::new(Noop),
        }],
        toolsets: vec![ToolsetSpec {
            name: "notes.reader".into(),
            operations: vec![ToolsetEntry {
                operation: "notes.view".into(),
                since: "0.1.0".into(),
            }],
        }],
    };
    registry.register(registration).unwrap();
    registry
}

#[test]
fn every_descriptor_the_host_builds_validates_against_the_schema_file() {
    let schema = schema();
    let registry = registry();
    let tools: Vec<_> = registry.catalog().descriptors().cloned().collect();
    for tool in &tools {
        let wire = serde_json::to_value(tool).unwrap();
        let errors: Vec<String> = schema.iter_errors(&wire).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", tool.tool_id);
        assert_eq!(tool.check(), Ok(()));
    }
    let ids: Vec<&str> = tools.iter().map(|t| t.tool_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "create_work",
            "declare_outcome",
            "emit",
            "notes.view",
            "read_context",
            "wait"
        ],
        "sorted by toolId, which is the operation's name"
    );
}

#[test]
fn builtins_are_described_by_their_tiers_and_the_grants_that_authorize_them() {
    let registry = registry();
    let tools: Vec<_> = registry.catalog().descriptors().cloned().collect();
    let tool = |id: &str| tools.iter().find(|t| t.tool_id == id).unwrap();
    assert_eq!(tool("read_context").safety_tier, SafetyTier::Read);
    for id in ["emit", "create_work", "wait", "declare_outcome"] {
        assert_eq!(
            (tool(id).safety_tier, tool(id).egress),
            (SafetyTier::Write, Some(Egress::None)),
            "{id}"
        );
    }
    let emit = serde_json::to_value(tool("emit")).unwrap();
    assert_eq!(
        emit["auth"],
        json!({"scopes": ["emit", "@core.worker"], "credentialRef": false})
    );
    assert_eq!(emit["approval"], "never");
    let view = serde_json::to_value(tool("notes.view")).unwrap();
    assert_eq!(
        view["auth"],
        json!({"scopes": ["notes.view", "@notes.reader"], "credentialRef": true})
    );
    assert_eq!(
        (view["egress"].as_str(), view["title"].as_str()),
        (Some("safe-fetch"), Some("View a note"))
    );
}

#[test]
fn the_rfcs_examples_hold_against_the_schema() {
    let schema = schema();
    let positive = [
        json!({"toolId": "mcp:fs.read", "source": "mcp", "title": "Read file", "inputSchema": {},
               "auth": {"scopes": ["tools:fs:read"]}, "egress": "none", "approval": "never",
               "replayPolicy": "idempotent", "safetyTier": "read", "costHint": "low", "latencyHint": "low"}),
        json!({"toolId": "x-host-acme-shell", "source": "host-extension", "safetyTier": "exec",
               "approval": "always", "egress": "host-owned"}),
    ];
    for example in &positive {
        assert!(schema.is_valid(example), "{example}");
    }
    let negative = [
        json!({"toolId": "x", "source": "mcp"}),
        json!({"toolId": "x", "source": "mcp", "safetyTier": "read", "credential": "hunter2"}),
        json!({"toolId": "x", "source": "mcp", "safetyTier": "read", "auth": {"token": "t"}}),
        json!({"toolId": "", "source": "mcp", "safetyTier": "read"}),
        json!({"toolId": "x", "source": "plugin", "safetyTier": "read"}),
    ];
    for example in &negative {
        assert!(!schema.is_valid(example), "{example}");
    }
    // §C-1: the schema itself refuses exec from any source but host-extension, as the type does.
    for source in ["node-pack", "workflow", "mcp", "connector"] {
        let exec = json!({"toolId": "openwop:run-shell", "source": source, "safetyTier": "exec"});
        assert!(!schema.is_valid(&exec), "{exec}");
        // The host's own type has no workflow or connector source at all.
        if let Ok(descriptor) = serde_json::from_value::<conduit_core::tool::ToolDescriptor>(exec) {
            assert!(descriptor.check().is_err());
        }
    }
}
