#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `schemas/config.schema.json` and `docs/configuration.md` are what the parser's types generate,
//! and what the parser refuses on shape the schema refuses too. (That every example is accepted by
//! both is `conduit-daemon`'s `config_examples` test: the examples name this release's operations.)

use std::path::{Path, PathBuf};

use conduit_config::schema::{markdown, schema};
use serde_json::{json, Value};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compares `generated` with the committed file; `OPEN_CONDUIT_BLESS=1` rewrites the file instead.
fn check_committed(relative: &str, generated: &str) {
    let path = repository().join(relative);
    if std::env::var_os("OPEN_CONDUIT_BLESS").is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{relative} is not what the configuration types generate; \
         run `OPEN_CONDUIT_BLESS=1 cargo test -p conduit-config --test schema` and commit the result"
    );
}

#[test]
fn the_committed_schema_and_reference_are_generated_from_the_types() {
    let schema = schema();
    check_committed(
        "schemas/config.schema.json",
        &(serde_json::to_string_pretty(&schema).unwrap() + "\n"),
    );
    check_committed("docs/configuration.md", &markdown(&schema));
}

/// Every field of every object, as `Type.field`, with its schema.
fn fields(schema: &Value) -> Vec<(String, &Value)> {
    let objects = std::iter::once(("Config", schema)).chain(
        schema["$defs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, s)| (name.as_str(), s)),
    );
    objects
        .flat_map(|(name, object)| {
            object["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(move |(f, s)| (format!("{name}.{f}"), s))
        })
        .collect()
}

#[test]
fn every_field_is_described() {
    let schema = schema();
    let bare: Vec<String> = fields(&schema)
        .into_iter()
        .filter(|(_, s)| s.get("description").is_none())
        .map(|(f, _)| f)
        .collect();
    assert!(bare.is_empty(), "fields without a doc comment: {bare:?}");
}

/// The negative controls: what the parser refuses on shape, the schema refuses too.
#[test]
fn what_the_parser_refuses_on_shape_the_schema_refuses() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let binding = |b: Value| json!({"version": 1, "scopes": {"s": {"bindings": {"b": b}}}});
    let refused = [
        json!({"version": 1, "scpoes": {}}),
        json!({"version": 1, "limits": {"event_data_bytes": "big"}}),
        json!({"version": 1, "secrets": {"k": null}}),
        binding(json!({"executor": "shell", "config": {"comand": ["true"]}})),
        binding(json!({"executor": "shell"})),
        binding(json!({"executor": "codex", "config": {"command": "codex"}})),
        binding(json!({"executor": "shell", "config": {"command": ["true"]}, "sandbox": "on"})),
        binding(json!({"executor": "shell", "config": {"command": ["true"]}, "sandbox": {"network": "lan"}})),
    ];
    for config in refused {
        assert!(!validator.is_valid(&config), "the schema accepts {config}");
        assert!(
            conduit_config::parse(config.to_string().as_bytes()).is_err(),
            "the parser accepts {config}"
        );
    }
    let accepted = binding(json!({"executor": "shell", "config": {"command": ["true"]}, "sandbox": "off"}));
    assert!(validator.is_valid(&accepted));
}
