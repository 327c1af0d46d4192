//! The catalog facts every registered operation declares (RFC 0078 `ToolDescriptor` enums).

use serde::{Deserialize, Serialize};

/// Which surface backs an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolSource {
    /// Builtins and first-party in-process extensions.
    HostExtension,
    /// Installed packages.
    NodePack,
    /// Tools of a mounted MCP server.
    Mcp,
}

/// A catalog's `?source=` filter: one of RFC 0078's five sources. This host backs tools with three;
/// `workflow` and `connector` are valid filters that match nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFilter {
    Served(ToolSource),
    Unserved,
}

impl SourceFilter {
    /// The filter `text` names; `None` for a word that is no RFC 0078 source.
    pub fn parse(text: &str) -> Option<SourceFilter> {
        match text {
            "host-extension" => Some(SourceFilter::Served(ToolSource::HostExtension)),
            "node-pack" => Some(SourceFilter::Served(ToolSource::NodePack)),
            "mcp" => Some(SourceFilter::Served(ToolSource::Mcp)),
            "workflow" | "connector" => Some(SourceFilter::Unserved),
            _ => None,
        }
    }

    /// The filter a `?source=` query gives, or `400 invalid_request` for another word.
    pub fn from_query(text: &str) -> Result<SourceFilter, crate::Refusal> {
        SourceFilter::parse(text).ok_or_else(|| {
            crate::Refusal::new(crate::ErrorCode::InvalidRequest, "unknown tool source")
                .with_remedy("use node-pack, workflow, mcp, connector or host-extension (RFC 0078)")
        })
    }

    pub fn admits(self, source: ToolSource) -> bool {
        self == SourceFilter::Served(source)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SafetyTier {
    Pure,
    Read,
    Write,
    /// Arbitrary-command class: only a `host-extension` may declare it.
    Exec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Egress {
    None,
    SafeFetch,
    HostMediated,
    HostOwned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approval {
    Never,
    Conditional,
    Always,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplayPolicy {
    Deterministic,
    Idempotent,
    NonDeterministic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hint {
    Low,
    Medium,
    High,
}

/// An operation's catalog fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogFields {
    pub safety_tier: SafetyTier,
    pub egress: Egress,
    pub approval: Approval,
    pub replay_policy: ReplayPolicy,
    /// The operation needs a host-held secret (never carried by the catalog).
    pub credential_ref: bool,
    pub cost_hint: Option<Hint>,
    pub latency_hint: Option<Hint>,
}

impl CatalogFields {
    /// A write-tier operation with no egress, no approval and idempotent replay.
    pub fn write() -> CatalogFields {
        CatalogFields {
            safety_tier: SafetyTier::Write,
            egress: Egress::None,
            approval: Approval::Never,
            replay_policy: ReplayPolicy::Idempotent,
            credential_ref: false,
            cost_hint: None,
            latency_hint: None,
        }
    }

    pub fn read() -> CatalogFields {
        CatalogFields {
            safety_tier: SafetyTier::Read,
            ..CatalogFields::write()
        }
    }
}

impl SafetyTier {
    /// RFC 0069: exec is never protocol-tier, so only a host extension may declare it.
    pub fn may_come_from(self, source: ToolSource) -> bool {
        self != SafetyTier::Exec || source == ToolSource::HostExtension
    }
}

/// What a tool needs of its caller: the grant names that authorize it, and whether it uses a
/// host-held secret (a flag only: a descriptor never carries credential material).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolAuth {
    pub scopes: Vec<String>,
    pub credential_ref: bool,
}

/// RFC 0078 `ToolDescriptor`: one per operation, `toolId` being the operation's name exactly as a
/// grant names it. `schemas/tool-descriptor.schema.json` is its wire schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDescriptor {
    pub tool_id: String,
    pub source: ToolSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ToolAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Egress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_policy: Option<ReplayPolicy>,
    pub safety_tier: SafetyTier,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_hint: Option<Hint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hint: Option<Hint>,
}

impl ToolDescriptor {
    /// The descriptor of an operation with these catalog fields, authorized by `scopes`.
    pub fn of(tool_id: &str, source: ToolSource, fields: &CatalogFields, scopes: Vec<String>) -> ToolDescriptor {
        ToolDescriptor {
            tool_id: tool_id.to_owned(),
            source,
            title: None,
            description: None,
            input_schema: None,
            output_schema: None,
            auth: Some(ToolAuth {
                scopes,
                credential_ref: fields.credential_ref,
            }),
            egress: Some(fields.egress),
            approval: Some(fields.approval),
            replay_policy: Some(fields.replay_policy),
            safety_tier: fields.safety_tier,
            cost_hint: fields.cost_hint,
            latency_hint: fields.latency_hint,
        }
    }

    /// The rule the schema cannot state (RFC 0078 §C-1, §F-4): an exec-tier tool is a host extension's.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.safety_tier.may_come_from(self.source) {
            Ok(())
        } else {
            Err("an exec-tier tool must come from a host extension")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rfc_source_is_a_filter_and_only_the_served_ones_match() {
        for source in [ToolSource::HostExtension, ToolSource::NodePack, ToolSource::Mcp] {
            let text = serde_json::to_value(source).unwrap();
            let filter = SourceFilter::parse(text.as_str().unwrap()).unwrap();
            assert!(filter.admits(source));
            assert!(!filter.admits(if source == ToolSource::Mcp {
                ToolSource::NodePack
            } else {
                ToolSource::Mcp
            }));
        }
        for unserved in ["workflow", "connector"] {
            let filter = SourceFilter::parse(unserved).unwrap();
            assert!(!filter.admits(ToolSource::HostExtension), "{unserved}");
        }
        assert_eq!(SourceFilter::parse("plugin"), None);
    }

    #[test]
    fn wire_names_are_the_rfcs() {
        assert_eq!(
            serde_json::to_value(ToolSource::HostExtension).unwrap(),
            "host-extension"
        );
        assert_eq!(serde_json::to_value(Egress::SafeFetch).unwrap(), "safe-fetch");
        assert_eq!(
            serde_json::to_value(ReplayPolicy::NonDeterministic).unwrap(),
            "non-deterministic"
        );
        assert_eq!(serde_json::to_value(SafetyTier::Exec).unwrap(), "exec");
    }

    #[test]
    fn an_exec_tier_descriptor_from_a_node_pack_is_refused() {
        // RFC 0078's negative example, and its positive host-extension shell tool.
        let refused: ToolDescriptor = serde_json::from_value(
            serde_json::json!({"toolId": "openwop:run-shell", "source": "node-pack", "safetyTier": "exec"}),
        )
        .unwrap();
        assert!(refused.check().is_err());
        let shell: ToolDescriptor = serde_json::from_value(serde_json::json!({
            "toolId": "x-host-acme-shell", "source": "host-extension", "safetyTier": "exec",
            "approval": "always", "egress": "host-owned"
        }))
        .unwrap();
        assert_eq!(shell.check(), Ok(()));
    }

    #[test]
    fn a_descriptor_without_a_safety_tier_or_with_an_unknown_property_does_not_parse() {
        let missing = serde_json::json!({"toolId": "x", "source": "mcp"});
        assert!(serde_json::from_value::<ToolDescriptor>(missing).is_err());
        let unknown = serde_json::json!({"toolId": "x", "source": "mcp", "safetyTier": "read", "secret": "s"});
        assert!(serde_json::from_value::<ToolDescriptor>(unknown).is_err());
    }
}
