//! `GET /.well-known/openwop`: the capability document, served without authentication on every
//! listener. It carries only capability flags, never anything about Work, scopes or credentials.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use conduit_config::Snapshot;
use conduit_core::requires::PRIMITIVES;
use conduit_core::tool::ToolSource;
use conduit_core::tool_call::Transport;
use conduit_egress::request::METHODS;
use conduit_egress::Limits;
use conduit_toolbelt::Registry;
use serde_json::{json, Value};

use crate::envelope::{ok, Answer};

/// The capability families at the document root, as OpenWOP hosts publish them. This host runs no
/// OpenWOP envelopes, so it lists none and its envelope limits are zero. `packRuntime` is the RFC
/// 0076 §A gate: the vocabulary this host understands, what it grants packages now, and whether it
/// gates at all.
pub fn document(registry: &Registry, config: &Snapshot) -> Value {
    let sources: BTreeSet<ToolSource> = registry.catalog().descriptors().map(|t| t.source).collect();
    let mut document = json!({
        "protocolVersion": "1.0",
        "supportedEnvelopes": [],
        "schemaVersions": {"toolDescriptor": "1.0"},
        "limits": {"clarificationRounds": 0, "schemaRounds": 0, "envelopesPerTurn": 0},
        "toolCatalog": {"supported": true, "sources": sources, "sessionLifecycle": true},
        "toolHooks": {"supported": true, "prePostEvents": true},
        "packRuntime": {
            "requires": PRIMITIVES,
            "grant": config.package_grant(),
            "gating": config.package_gating(),
        },
    });
    if registry.transport("http.fetch") == Transport::Http {
        document["httpClient"] = http_client();
    }
    document
}

/// The guarded HTTP client's clamps; installed packages reach it as `http.safeFetch`.
fn http_client() -> Value {
    let limits = Limits::default();
    json!({
        "supported": true,
        "ssrfGuard": true,
        "maxResponseBodyBytes": limits.max_response_bytes,
        "requestTimeoutMs": limits.timeout.as_millis() as u64,
        "methods": METHODS,
        "safeFetch": {"supported": true},
    })
}

pub fn answer(registry: &Registry, config: &Snapshot) -> Answer {
    ok(StatusCode::OK, &document(registry, config))
}
