//! The JSON Schema of configuration version 1, derived from the very types [`crate::parse`]
//! deserializes into, and the reference page rendered from it (`docs/configuration.md`).
//!
//! The parser stays the authority: it refuses nulls and duplicate keys and checks what a schema
//! cannot say (ceilings, pointers between scopes, durations). The schema gives editors the shape.

mod markdown;

use schemars::generate::SchemaSettings;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::executor::{Agent, GITHUB_HOLD, SHELL};
use crate::model::{AgentConfig, BindingConfig, Config, HoldConfig, ShellConfig};

pub use markdown::markdown;

/// The schema's identifier; the file itself is `schemas/config.schema.json` in the repository.
pub const SCHEMA_ID: &str = "urn:open-conduit:config:1";

/// The schema document (JSON Schema 2020-12).
pub fn schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let cases: Vec<Value> = executor_shapes()
        .into_iter()
        .map(|(executor, shape)| executor_case(executor, shape(&mut generator)))
        .collect();
    let mut root = generator.into_root_schema_for::<Config>().to_value();
    root["$defs"][BindingConfig::schema_name().as_ref()]["allOf"] = Value::Array(cases);
    root["$id"] = SCHEMA_ID.into();
    strip_nulls(&mut root);
    root
}

type Shape = fn(&mut SchemaGenerator) -> Schema;

/// Each executor the host runs itself, with the shape its `config` must have: the shell, every
/// agent CLI, and the GitHub hold (the executors [`crate::executor`] checks).
fn executor_shapes() -> Vec<(&'static str, Shape)> {
    let agents = Agent::ALL.map(|agent| (agent.executor(), (|g| g.subschema_for::<AgentConfig>()) as Shape));
    std::iter::once((SHELL, (|g| g.subschema_for::<ShellConfig>()) as Shape))
        .chain(agents)
        .chain([(GITHUB_HOLD, (|g| g.subschema_for::<HoldConfig>()) as Shape)])
        .collect()
}

/// `if executor = X then config has X's shape`.
fn executor_case(executor: &str, shape: Schema) -> Value {
    json_schema!({
        "if": {"properties": {"executor": {"const": executor}}, "required": ["executor"]},
        "then": {"properties": {"config": shape}, "required": ["config"]}
    })
    .to_value()
}

/// The parser refuses `null` anywhere, so the schema does too: an `Option` field may be absent,
/// never null.
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(object) => {
            drop_null_type(object);
            object.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn drop_null_type(object: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".into(), only);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = object.get_mut(key) {
            options.retain(|o| o.get("type").is_none_or(|t| t != "null"));
        }
    }
    if object.get("default") == Some(&Value::Null) {
        object.remove("default");
    }
}

#[cfg(test)]
mod tests;
