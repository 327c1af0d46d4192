#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every example configuration, and the built-in default, is accepted by the JSON Schema editors use
//! and by the parser with this release's operations.

use std::path::Path;

use serde_json::Value;

fn examples() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| (path.display().to_string(), std::fs::read(&path).unwrap()))
        .collect();
    found.push((
        "the built-in default".into(),
        conduit_config::default_config_json().into(),
    ));
    found
}

#[test]
fn every_example_is_accepted_by_the_schema_and_the_parser() {
    let validator = jsonschema::validator_for(&conduit_config::schema::schema()).unwrap();
    let release = conduit_daemon::release_registry().config_registry();
    let examples = examples();
    assert!(examples.len() >= 5, "the examples directory was not found");
    for (name, bytes) in examples {
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| format!("{} {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name} fails the schema: {errors:?}");
        let parsed = conduit_config::parse_with(&bytes, &release);
        assert!(parsed.is_ok(), "{name} fails the parser: {:?}", parsed.err());
    }
}
