//! The schemas of the two configuration fields whose shape serde cannot describe: a binding's
//! `config` (its shape depends on `executor`; the schema module adds the cases) and its `sandbox`
//! (`"off"` or a spec).

use schemars::{json_schema, Schema, SchemaGenerator};

/// A binding's `config` field; its shape per executor is added to the binding by [`schema`].
pub(crate) fn executor_config(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "The executor's own settings: for the host's executors, the shape named under `executor` (an extension's executor defines its own)."
    })
}

/// A binding's `sandbox` field: `"off"` or the confinement's trees and network.
pub(crate) fn sandbox_setting(generator: &mut SchemaGenerator) -> Schema {
    let spec = generator.subschema_for::<conduit_core::sandbox::SandboxSpec>();
    json_schema!({
        "description": "How the binding's executions are confined: `\"off\"` (warning `sandbox_disabled`) or {network, read, write}; absent, the default confinement.",
        "oneOf": [{"const": "off"}, spec]
    })
}
