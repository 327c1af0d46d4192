//! What the toolbelt records about every call: the audit record, and the replay record of a request id.

use serde::Serialize;
use serde_json::Value;

use crate::time::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AuditKind {
    /// The call reached its operation (`toolbelt.called`).
    #[serde(rename = "toolbelt.called")]
    Called,
    /// The call was refused before or by its operation (`toolbelt.rejected`).
    #[serde(rename = "toolbelt.rejected")]
    Rejected,
}

impl AuditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::Called => "toolbelt.called",
            AuditKind::Rejected => "toolbelt.rejected",
        }
    }

    pub fn parse(text: &str) -> Option<AuditKind> {
        [AuditKind::Called, AuditKind::Rejected]
            .into_iter()
            .find(|k| k.as_str() == text)
    }
}

/// The durable record of one toolbelt call. It holds a hash of the input, never the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    pub id: String,
    pub kind: AuditKind,
    pub operation: String,
    /// The execution whose socket the call arrived on.
    pub execution_id: String,
    pub work_id: Option<String>,
    pub scope: Option<String>,
    pub request_id: Option<String>,
    /// `toolbelt.result`: `ok`, `replayed`, or the refusal's code.
    pub result: String,
    /// `toolbelt.gate`: the gate that parked or refused the call.
    pub gate: Option<String>,
    /// `toolbelt.refusal`: a refusal's classification, such as `config_drift`.
    pub refusal: Option<String>,
    /// SHA-256 (hex) of the input's RFC 8785 canonical form.
    pub input_hash: String,
    pub duration_ms: i64,
    pub at: Timestamp,
}

/// What an operator changed: one record per management request that changed something and
/// succeeded, so "who changed what, when" has an answer. It names the route and the request's path
/// (ids in it), never the request's body, and keeps only safe fields of the answer (never a token).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperatorAction {
    pub id: String,
    pub at: Timestamp,
    /// The acting operator: `operator:<name>`.
    pub principal: String,
    /// The route, as the API lists it: `POST /v1/work/{id}/hold`.
    pub route: String,
    /// The request's path.
    pub path: String,
    pub status: u16,
    /// Safe fields of the answer: the generation an apply published, an issued operator's name and
    /// role, the ids of the Work and event a control recorded, ...
    pub detail: Value,
}

/// The committed result of a call made with a request id, replayed to a retry of the same request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    pub execution_id: String,
    pub operation: String,
    pub request_id: String,
    /// SHA-256 (hex) of the canonical input: a retry with another body is a conflict.
    pub body_hash: String,
    pub status: u16,
    pub response: Value,
    pub created_at: Timestamp,
}

/// The causal limits pinned by the first emission off a root; later events of that root keep them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CausalPin {
    pub max_depth: u32,
    pub per_minute: u32,
}
