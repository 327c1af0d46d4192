//! The portable tool catalog (RFC 0078): one `ToolDescriptor` per operation, builtins and registered
//! extensions alike, sorted by `toolId` (the operation's name). `auth.scopes` lists every grant entry
//! that authorizes the operation: its own name and each toolset (`@name`) that holds it.

use conduit_core::names::BUILTIN_TOOLSETS;
use conduit_core::tool::ToolDescriptor;

use crate::builtins::builtin_tools;
use crate::registry::{Registered, Registry};

/// Every operation's descriptor, sorted by `toolId`.
pub fn catalog(registry: &Registry) -> Vec<ToolDescriptor> {
    let mut tools: Vec<ToolDescriptor> = builtin_tools()
        .into_iter()
        .chain(registry.operations().map(extension_tool))
        .collect();
    for tool in &mut tools {
        let granting = toolsets_granting(registry, &tool.tool_id);
        if let Some(auth) = tool.auth.as_mut() {
            auth.scopes.extend(granting);
        }
    }
    tools.sort_by(|a, b| a.tool_id.cmp(&b.tool_id));
    tools
}

fn extension_tool(registered: &Registered) -> ToolDescriptor {
    let spec = &registered.spec;
    ToolDescriptor {
        title: spec.title.clone(),
        description: Some(spec.summary.clone()),
        input_schema: Some(spec.input_schema.clone()),
        output_schema: Some(spec.output_schema.clone()),
        ..ToolDescriptor::of(&spec.name, registered.source, &spec.catalog, vec![spec.name.clone()])
    }
}

/// The grant entries (`@toolset`) of every toolset, the host's and the extensions', that holds `operation`.
fn toolsets_granting(registry: &Registry, operation: &str) -> Vec<String> {
    let builtin = BUILTIN_TOOLSETS
        .iter()
        .filter(|(_, ops)| ops.contains(&operation))
        .map(|(name, _)| format!("@{name}"));
    let registered = registry
        .toolsets()
        .filter(|t| t.operations.iter().any(|e| e.operation == operation))
        .map(|t| format!("@{}", t.name));
    builtin.chain(registered).collect()
}
