//! Every validation rule, as a negative mutation of one valid configuration: each row changes one
//! thing and expects exactly its diagnostics (pointer and code), in order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_config::{parse, parse_with, Registry};
use serde_json::{json, Value};

fn base() -> Value {
    json!({
        "version": 1,
        "secrets": {"token": "env:TOKEN"},
        "scopes": {
            "root": {"authorization": {"operations": ["@core.worker"]}},
            "team": {
                "parent": "root",
                "authorization": {"operations": ["emit", "read_context", "declare_outcome", "wait", "!create_work"]},
                "bindings": {"shell": {
                    "executor": "shell",
                    "config": {"command": ["/bin/sh", "-c", "true"], "timeout": "5m"},
                    "operations": ["emit", "read_context"],
                    "emits": ["demo.*"],
                    "secrets": ["token"]
                }},
                "routes": [{"on": "demo.requested", "binding": "shell"}]
            }
        },
        "limits": {"causal_max_depth": 8, "causal_per_minute": 60}
    })
}

fn set(mut doc: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    match doc.pointer_mut(parent).unwrap() {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
        }
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
        _ => panic!("{pointer}"),
    }
    doc
}

fn remove(mut doc: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    doc.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key);
    doc
}

fn d(pointer: &str, code: &'static str) -> (String, &'static str) {
    (pointer.to_owned(), code)
}

fn found(text: &str) -> Vec<(String, &'static str)> {
    match parse(text.as_bytes()) {
        Ok(_) => vec![],
        Err(found) => found.into_iter().map(|d| (d.pointer, d.code)).collect(),
    }
}

#[test]
fn the_base_is_valid() {
    assert_eq!(found(&base().to_string()), vec![]);
}

#[test]
fn every_mutation_gets_exactly_its_diagnostics() {
    let b = "/scopes/team/bindings/shell";
    /// What the mutation does, the mutated document, and the diagnostics it must get.
    type Row<'a> = (&'a str, Value, Vec<(String, &'static str)>);
    let rows: Vec<Row> = vec![
        (
            "version 2",
            set(base(), "/version", json!(2)),
            vec![d("/version", "unsupported_version")],
        ),
        (
            "version missing",
            remove(base(), "/version"),
            vec![d("", "missing_field")],
        ),
        (
            "unknown top-level field",
            set(base(), "/extra", json!(1)),
            vec![d("/extra", "unknown_field")],
        ),
        (
            "unknown scope field",
            set(base(), "/scopes/team/owner", json!("x")),
            vec![d("/scopes/team/owner", "unknown_field")],
        ),
        (
            "wrong type",
            set(base(), "/limits/causal_max_depth", json!("8")),
            vec![d("/limits/causal_max_depth", "invalid_type")],
        ),
        (
            "zero limit",
            set(base(), "/limits/causal_per_minute", json!(0)),
            vec![d("/limits", "invalid_value")],
        ),
        (
            "bad scope id",
            set(base(), "/scopes/Team", json!({})),
            vec![d("/scopes/Team", "invalid_name")],
        ),
        (
            "unknown parent",
            set(base(), "/scopes/team/parent", json!("nope")),
            vec![d("/scopes/team/parent", "unknown_reference")],
        ),
        (
            "parent cycle",
            set(base(), "/scopes/root/parent", json!("team")),
            vec![
                d("/scopes/root/parent", "parent_cycle"),
                d("/scopes/team/parent", "parent_cycle"),
            ],
        ),
        (
            "unknown operation in a ceiling",
            set(base(), "/scopes/team/authorization/operations/0", json!("emitt")),
            vec![d("/scopes/team/authorization/operations/0", "unknown_reference")],
        ),
        (
            "unknown toolset",
            set(base(), "/scopes/root/authorization/operations/0", json!("@core.wroker")),
            vec![d("/scopes/root/authorization/operations/0", "unknown_reference")],
        ),
        (
            "a child widening its parent",
            set(
                base(),
                "/scopes/root/authorization/operations",
                json!(["emit", "read_context"]),
            ),
            vec![
                d("/scopes/team/authorization/operations/2", "authority_widening"),
                d("/scopes/team/authorization/operations/3", "authority_widening"),
            ],
        ),
        (
            "a binding widening its scope",
            set(base(), &format!("{b}/operations/1"), json!("wait")),
            vec![],
        ),
        (
            "a binding naming what its scope denies",
            set(base(), &format!("{b}/operations/1"), json!("create_work")),
            vec![d(&format!("{b}/operations/1"), "operation_denied")],
        ),
        (
            "unknown executor",
            set(base(), &format!("{b}/executor"), json!("docker")),
            vec![d(&format!("{b}/executor"), "unknown_reference")],
        ),
        (
            "empty argv",
            set(base(), &format!("{b}/config/command"), json!([])),
            vec![d(&format!("{b}/config/command"), "invalid_executor_config")],
        ),
        (
            "bad timeout",
            set(base(), &format!("{b}/config/timeout"), json!("soon")),
            vec![d(&format!("{b}/config/timeout"), "invalid_executor_config")],
        ),
        (
            "unknown executor field",
            set(base(), &format!("{b}/config/shell"), json!(true)),
            vec![d(&format!("{b}/config/shell"), "unknown_field")],
        ),
        (
            "reserved emits",
            set(base(), &format!("{b}/emits/0"), json!("core.*")),
            vec![d(&format!("{b}/emits/0"), "invalid_value")],
        ),
        (
            "unknown secret",
            set(base(), &format!("{b}/secrets/0"), json!("nope")),
            vec![d(&format!("{b}/secrets/0"), "unknown_reference")],
        ),
        (
            "bad secret scheme",
            set(base(), "/secrets/token", json!("vault:x")),
            vec![d("/secrets/token", "invalid_reference")],
        ),
        (
            "secret shadowing PATH",
            set(base(), "/secrets/path", json!("env:X")),
            vec![d("/secrets/path", "invalid_name")],
        ),
        (
            "bad route pattern",
            set(base(), "/scopes/team/routes/0/on", json!("demo*")),
            vec![d("/scopes/team/routes/0/on", "invalid_value")],
        ),
        (
            "route to a missing binding",
            set(base(), "/scopes/team/routes/0/binding", json!("nope")),
            vec![d("/scopes/team/routes/0/binding", "unknown_reference")],
        ),
        (
            "null",
            set(base(), "/scopes/team/parent", Value::Null),
            vec![d("/scopes/team/parent", "null_value")],
        ),
    ];
    for (what, doc, expected) in rows {
        assert_eq!(found(&doc.to_string()), expected, "{what}");
    }
}

#[test]
fn duplicate_keys_are_refused_at_any_depth() {
    let text = base()
        .to_string()
        .replacen(r#""timeout":"5m""#, r#""timeout":"5m","timeout":"6m""#, 1);
    assert_eq!(
        found(&text),
        vec![d("/scopes/team/bindings/shell/config/timeout", "duplicate_key")]
    );
}

#[test]
fn no_diagnostic_echoes_a_value() {
    let planted = "planted-7f3a";
    let doc = set(
        set(base(), "/secrets/token", json!(format!("vault:{planted}"))),
        "/version",
        json!(planted),
    );
    let text = format!("{:?}", parse(doc.to_string().as_bytes()).unwrap_err());
    assert!(!text.contains(planted), "{text}");
}

#[test]
fn diagnostics_come_in_a_deterministic_order() {
    let doc = set(
        set(base(), "/scopes/zeta", json!({"parent": "nope"})),
        "/scopes/alpha",
        json!({"parent": "nope"}),
    );
    let first = found(&doc.to_string());
    assert_eq!(first, found(&doc.to_string()));
    assert!(first.windows(2).all(|w| w[0] <= w[1]), "{first:?}");
}

#[test]
fn registered_operations_are_known_only_to_their_release() {
    let doc = set(
        base(),
        "/scopes/root/authorization/operations",
        json!(["@core.worker", "notes.add"]),
    );
    assert_eq!(
        found(&doc.to_string()),
        vec![d("/scopes/root/authorization/operations/1", "unknown_reference")]
    );
    let release = Registry::with_operations(["notes.add".to_owned()]);
    assert!(parse_with(doc.to_string().as_bytes(), &release).is_ok());
}
