//! The `http` extension: `http.fetch`, an execution's HTTP client behind the SSRF guard
//! (conduit-egress). An `Authorization` header is only ever built here, from a secret the caller's
//! binding is granted: the input names the secret, never carries it.

use std::sync::Arc;

use super::secret_access::SecretAccess;
use base64::Engine;
use conduit_core::tool::{CatalogFields, Egress, ReplayPolicy, SafetyTier, ToolSource};
use conduit_egress::{FetchRequest, FetchResponse, Limits, SafeFetch};
use conduit_toolbelt::registry::{
    Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationError, OperationSpec, Registration,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};

#[derive(Clone)]
pub struct HttpFetch {
    fetch: SafeFetch,
    secrets: Option<SecretAccess>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FetchInput {
    url: String,
    method: Option<String>,
    #[serde(default)]
    headers: Map<String, Value>,
    body: Option<String>,
    /// A secret the binding is granted, sent as `Authorization: Bearer <value>`.
    secret: Option<String>,
}

impl HttpFetch {
    pub fn new(secrets: Option<SecretAccess>) -> HttpFetch {
        HttpFetch {
            fetch: SafeFetch::new(Limits::default()),
            secrets,
        }
    }

    async fn run(self, call: HandlerCall) -> Result<HandlerOutput, OperationError> {
        let input: FetchInput = serde_json::from_value(call.input.clone()).map_err(|_| {
            OperationError::new(
                "invalid_input",
                "the input is not {url, method?, headers?, body?, secret?}",
            )
        })?;
        let headers = input
            .headers
            .into_iter()
            .map(|(k, v)| v.as_str().map(|v| (k, v.to_owned())))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| OperationError::new("invalid_input", "`headers` maps names to string values"))?;
        let authorization = match &input.secret {
            Some(name) => Some(format!("Bearer {}", self.secret(&call, name).await?)),
            None => None,
        };
        let request = FetchRequest {
            url: input.url,
            method: input.method,
            headers,
            body: input.body.map(String::into_bytes),
            authorization,
        };
        let response = self
            .fetch
            .fetch(request)
            .await
            .map_err(|e| OperationError::new(e.code(), e.message()))?;
        Ok(HandlerOutput::output(output(response)))
    }

    /// A secret the calling binding is granted now, resolved off the runtime (a `cmd:` may take
    /// seconds).
    async fn secret(&self, call: &HandlerCall, name: &str) -> Result<String, OperationError> {
        let not_granted = || OperationError::new("secret_not_granted", "the binding is not granted that secret");
        let access = self.secrets.clone().ok_or_else(not_granted)?;
        let config = access.config.get();
        let granted = config
            .binding(&call.scope, &call.binding)
            .is_some_and(|b| b.secrets.iter().any(|s| s == name));
        let reference = config
            .secret_reference(name)
            .filter(|_| granted)
            .ok_or_else(not_granted)?
            .to_owned();
        access.resolve(&reference).await
    }
}

impl Handler for HttpFetch {
    fn call(&self, call: HandlerCall) -> HandlerFuture {
        Box::pin(self.clone().run(call))
    }
}

/// The answer: status, final URL, headers (repeats joined with `, `), and the body as text, or as
/// base64 when it is not UTF-8.
pub(crate) fn output(response: FetchResponse) -> Value {
    let mut headers = Map::new();
    for (name, value) in response.headers {
        let joined = match headers.get(&name).and_then(Value::as_str) {
            Some(earlier) => format!("{earlier}, {value}"),
            None => value,
        };
        headers.insert(name, Value::String(joined));
    }
    let mut out = json!({"status": response.status, "url": response.url, "headers": headers});
    match String::from_utf8(response.body) {
        Ok(text) => out["body"] = Value::String(text),
        Err(e) => out["body_base64"] = Value::String(base64::engine::general_purpose::STANDARD.encode(e.as_bytes())),
    }
    out
}

/// The `http` registration: `http.fetch`, a write-tier operation whose egress is the guard.
pub fn registration(handler: Arc<HttpFetch>) -> Registration {
    let string = json!({"type": "string"});
    let fields = CatalogFields {
        safety_tier: SafetyTier::Write,
        egress: Egress::SafeFetch,
        replay_policy: ReplayPolicy::NonDeterministic,
        credential_ref: true,
        ..CatalogFields::write()
    };
    Registration {
        name: "http".into(),
        source: ToolSource::HostExtension,
        operations: vec![OperationSpec {
            name: "http.fetch".into(),
            title: Some("Fetch a URL".into()),
            summary: "Fetch a public http or https URL through the host's SSRF guard; `secret` names a granted secret sent as a bearer Authorization.".into(),
            input_schema: json!({"type": "object", "additionalProperties": false, "required": ["url"],
                "properties": {"url": string, "method": string, "body": string, "secret": string,
                    "headers": {"type": "object", "additionalProperties": string}}}),
            output_schema: json!({"type": "object", "required": ["status", "url", "headers"],
                "properties": {"status": {"type": "integer"}, "url": string, "body": string, "body_base64": string,
                    "headers": {"type": "object", "additionalProperties": string}}}),
            catalog: fields,
            capabilities: Vec::new(),
            handler,
        }],
        toolsets: vec![],
    }
}
