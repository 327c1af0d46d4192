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

#[cfg(test)]
mod tests {
    use super::*;

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
}
