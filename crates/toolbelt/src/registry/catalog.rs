//! The portable tool catalog (RFC 0078): one `ToolDescriptor` per operation, builtins and registered
//! extensions alike, sorted by `toolId` (the operation's name). `auth.scopes` lists every grant entry
//! that authorizes the operation: its own name and each toolset (`@name`) that holds it.

use std::collections::HashMap;

use conduit_core::names::BUILTIN_TOOLSETS;
use conduit_core::tool::{Approval, ToolDescriptor};

use super::{Registered, Registry};
use crate::builtins::builtin_tools;

/// A release's catalog, built once (the registry does not change while the daemon runs): every
/// operation's descriptor with its JSON, sorted by `toolId`, so a read only filters and concatenates.
pub struct Catalog {
    entries: Vec<CatalogEntry>,
}

pub struct CatalogEntry {
    pub descriptor: ToolDescriptor,
    json: String,
    /// The same descriptor with `approval: "always"`, for readers an approval rule covers it for.
    gated_json: String,
}

impl CatalogEntry {
    fn json(&self, gated: bool) -> &str {
        if gated {
            &self.gated_json
        } else {
            &self.json
        }
    }
}

impl Catalog {
    pub fn of(registry: &Registry) -> Catalog {
        let entries = descriptors(registry)
            .into_iter()
            .map(|descriptor| {
                let gated = ToolDescriptor {
                    approval: Some(Approval::Always),
                    ..descriptor.clone()
                };
                CatalogEntry {
                    json: serde_json::to_string(&descriptor).unwrap_or_default(),
                    gated_json: serde_json::to_string(&gated).unwrap_or_default(),
                    descriptor,
                }
            })
            .collect();
        Catalog { entries }
    }

    pub fn descriptors(&self) -> impl Iterator<Item = &ToolDescriptor> {
        self.entries.iter().map(|e| &e.descriptor)
    }

    /// The JSON of one tool.
    pub fn find(&self, tool_id: &str) -> Option<&str> {
        self.find_gated(tool_id, false)
    }

    /// The JSON of one tool, with `approval: "always"` when `gated`.
    pub fn find_gated(&self, tool_id: &str, gated: bool) -> Option<&str> {
        let at = self
            .entries
            .binary_search_by(|e| e.descriptor.tool_id.as_str().cmp(tool_id))
            .ok()?;
        Some(self.entries[at].json(gated))
    }

    /// A bare JSON array of the tools `keep` keeps, in `toolId` order.
    pub fn select(&self, keep: impl Fn(&ToolDescriptor) -> bool) -> String {
        self.select_gated(keep, |_| false)
    }

    /// [`Catalog::select`], with `approval: "always"` on the tools `gated` says an approval rule
    /// covers for this reader.
    pub fn select_gated(&self, keep: impl Fn(&ToolDescriptor) -> bool, gated: impl Fn(&str) -> bool) -> String {
        let kept: Vec<&str> = self
            .entries
            .iter()
            .filter(|e| keep(&e.descriptor))
            .map(|e| e.json(gated(&e.descriptor.tool_id)))
            .collect();
        format!("[{}]", kept.join(","))
    }
}

/// Every operation's descriptor, sorted by `toolId`.
fn descriptors(registry: &Registry) -> Vec<ToolDescriptor> {
    let mut granting = toolsets_by_operation(registry);
    let mut tools: Vec<ToolDescriptor> = builtin_tools()
        .into_iter()
        .chain(
            registry
                .operations()
                .map(|r| extension_tool(r, registry.policy_gated(&r.spec.name))),
        )
        .collect();
    for tool in &mut tools {
        if let (Some(auth), Some(toolsets)) = (tool.auth.as_mut(), granting.remove(tool.tool_id.as_str())) {
            auth.scopes.extend(toolsets);
        }
    }
    tools.sort_by(|a, b| a.tool_id.cmp(&b.tool_id));
    tools
}

/// An extension's operation; `policy_gated` when a package's gate may park it, which makes an
/// approval it would never need `conditional`.
fn extension_tool(registered: &Registered, policy_gated: bool) -> ToolDescriptor {
    let spec = &registered.spec;
    let mut tool = ToolDescriptor {
        title: spec.title.clone(),
        description: Some(spec.summary.clone()),
        input_schema: Some(spec.input_schema.clone()),
        output_schema: Some(spec.output_schema.clone()),
        ..ToolDescriptor::of(&spec.name, registered.source, &spec.catalog, vec![spec.name.clone()])
    };
    if policy_gated && tool.approval == Some(Approval::Never) {
        tool.approval = Some(Approval::Conditional);
    }
    tool
}

/// For each operation, the grant entries (`@toolset`) of every toolset that holds it, the host's
/// first, then the extensions' in name order: one pass over all toolsets.
fn toolsets_by_operation(registry: &Registry) -> HashMap<&str, Vec<String>> {
    let builtin = BUILTIN_TOOLSETS
        .iter()
        .flat_map(|(name, ops)| ops.iter().map(move |op| (*op, *name)));
    let registered = registry.toolsets().flat_map(|t| {
        t.operations
            .iter()
            .map(move |e| (e.operation.as_str(), t.name.as_str()))
    });
    let mut by_operation: HashMap<&str, Vec<String>> = HashMap::new();
    for (operation, toolset) in builtin.chain(registered) {
        by_operation.entry(operation).or_default().push(format!("@{toolset}"));
    }
    by_operation
}
