//! The `slack` extension: Slack's Web API as `slack.context`, `slack.thread` and `slack.reply`
//! (toolset `@slack.responder`), with the bot token from the secret `extensions.slack.token`
//! names, and the Events ingress that turns a mention into a Work on its thread's key.

pub mod events;

use std::sync::Arc;

use conduit_core::tool::{CatalogFields, Egress, ReplayPolicy, SafetyTier, ToolSource};
use conduit_egress::{FetchRequest, Limits, SafeFetch};
use conduit_toolbelt::registry::{
    Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationError, OperationSpec, Registration, ToolsetEntry,
    ToolsetSpec,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::backoff::Backoff;
use super::secret_access::SecretAccess;

pub const NAME: &str = "slack";

/// Messages a read answers at most.
const MAX_MESSAGES: u64 = 200;

#[derive(Clone)]
pub struct Slack {
    fetch: SafeFetch,
    backoff: Backoff,
    secrets: Option<SecretAccess>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Channel {
    channel: String,
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Thread {
    channel: String,
    thread_ts: String,
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    channel: String,
    thread_ts: String,
    text: String,
}

impl Slack {
    pub fn new(secrets: Option<SecretAccess>) -> Slack {
        Slack {
            fetch: SafeFetch::new(Limits::default()),
            backoff: Backoff::default(),
            secrets,
        }
    }

    async fn run(self, call: HandlerCall) -> Result<HandlerOutput, OperationError> {
        let unconfigured = || {
            OperationError::new(
                "extension_unconfigured",
                "Slack is not configured; an operator sets `extensions.slack` (api_url, token)",
            )
        };
        let secrets = self.secrets.clone().ok_or_else(unconfigured)?;
        let settings = secrets.config.get().slack().cloned().ok_or_else(unconfigured)?;
        let token = secrets.named(&settings.token).await?;
        let api = Api {
            slack: &self,
            base: settings.api_url.trim_end_matches('/'),
            token: &token,
        };
        let invalid = |_| OperationError::new("invalid_input", "the input does not match the operation's schema");
        let output = match call.operation.as_str() {
            "slack.context" => {
                api.context(serde_json::from_value(call.input).map_err(invalid)?)
                    .await?
            }
            "slack.thread" => api.thread(serde_json::from_value(call.input).map_err(invalid)?).await?,
            "slack.reply" => api.reply(serde_json::from_value(call.input).map_err(invalid)?).await?,
            _ => {
                return Err(OperationError::new(
                    "operation_failed",
                    "the Slack extension has no such operation",
                ))
            }
        };
        Ok(HandlerOutput::output(output))
    }
}

impl Handler for Slack {
    fn call(&self, call: HandlerCall) -> HandlerFuture {
        Box::pin(self.clone().run(call))
    }
}

struct Api<'a> {
    slack: &'a Slack,
    base: &'a str,
    token: &'a str,
}

impl Api<'_> {
    /// The channel (name, topic) and its latest messages.
    async fn context(&self, input: Channel) -> Result<Value, OperationError> {
        let channel = encode(&input.channel);
        let info = self.get(&format!("conversations.info?channel={channel}")).await?;
        let limit = input.limit.unwrap_or(20).min(MAX_MESSAGES);
        let history = self
            .get(&format!("conversations.history?channel={channel}&limit={limit}"))
            .await?;
        Ok(
            json!({"channel": {"id": info["channel"]["id"], "name": info["channel"]["name"],
                              "topic": info["channel"]["topic"]["value"]},
                  "messages": messages(&history)}),
        )
    }

    /// A thread's messages, oldest first.
    async fn thread(&self, input: Thread) -> Result<Value, OperationError> {
        let limit = input.limit.unwrap_or(100).min(MAX_MESSAGES);
        let path = format!(
            "conversations.replies?channel={}&ts={}&limit={limit}",
            encode(&input.channel),
            encode(&input.thread_ts)
        );
        Ok(json!({"messages": messages(&self.get(&path).await?)}))
    }

    /// Posts `text` in the thread.
    async fn reply(&self, input: Reply) -> Result<Value, OperationError> {
        let body = json!({"channel": input.channel, "thread_ts": input.thread_ts, "text": input.text});
        let posted = self.send("POST", "chat.postMessage", Some(body)).await?;
        Ok(json!({"channel": posted["channel"], "ts": posted["ts"]}))
    }

    async fn get(&self, method: &str) -> Result<Value, OperationError> {
        self.send("GET", method, None).await
    }

    /// One Web API call. Slack answers its refusals `200` with `"ok": false` and a snake_case
    /// `error`, which becomes `slack_<error>`; `429` is `slack_rate_limited` with its Retry-After.
    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, OperationError> {
        self.slack.backoff.check("Slack")?;
        let request = FetchRequest {
            url: format!("{}/{path}", self.base),
            method: Some(method.into()),
            headers: vec![("Content-Type".into(), "application/json; charset=utf-8".into())],
            body: body.map(|b| b.to_string().into_bytes()),
            authorization: Some(format!("Bearer {}", self.token)),
        };
        let response = self
            .slack
            .fetch
            .fetch(request)
            .await
            .map_err(|e| OperationError::new(e.code(), e.message()))?;
        let retry_after = response
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("retry-after"))
            .and_then(|(_, v)| v.trim().parse().ok());
        let refusal = match response.status {
            200 => None,
            429 => Some(OperationError {
                retry_after: Some(retry_after.unwrap_or(30)),
                ..OperationError::new(
                    "slack_rate_limited",
                    "Slack's rate limit is reached; try again after `retry_after` seconds",
                )
            }),
            500..=599 => Some(OperationError {
                retry_after: Some(retry_after.unwrap_or(30)),
                ..OperationError::new("slack_unavailable", "Slack is unavailable; try again later")
            }),
            _ => Some(OperationError::new(
                "slack_unexpected",
                "Slack's answer was not what its API documents",
            )),
        };
        if let Some(refusal) = refusal {
            self.slack.backoff.note(&refusal);
            return Err(refusal);
        }
        let answer: Value = serde_json::from_slice(&response.body)
            .map_err(|_| OperationError::new("slack_unexpected", "Slack's answer was not what its API documents"))?;
        if answer["ok"] == true {
            return Ok(answer);
        }
        let error = answer["error"]
            .as_str()
            .filter(|e| conduit_core::error::is_snake_case(e));
        Err(match error {
            Some(error) => OperationError::new(&format!("slack_{error}"), format!("Slack refused the call ({error})")),
            None => OperationError::new("slack_failed", "Slack refused the call"),
        })
    }
}

fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn messages(answer: &Value) -> Vec<Value> {
    answer["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| json!({"user": m["user"], "text": m["text"], "ts": m["ts"], "thread_ts": m["thread_ts"]}))
        .collect()
}

/// The `slack` registration and its `@slack.responder` toolset.
pub fn registration(handler: Arc<Slack>) -> Registration {
    let string = json!({"type": "string"});
    let limit = json!({"type": "integer", "minimum": 1, "maximum": MAX_MESSAGES});
    let object = |required: &[&str], properties: Value| json!({"type": "object", "additionalProperties": false, "required": required, "properties": properties});
    let read = CatalogFields {
        safety_tier: SafetyTier::Read,
        egress: Egress::SafeFetch,
        replay_policy: ReplayPolicy::NonDeterministic,
        credential_ref: true,
        ..CatalogFields::write()
    };
    let write = CatalogFields {
        safety_tier: SafetyTier::Write,
        replay_policy: ReplayPolicy::Idempotent,
        ..read.clone()
    };
    let spec = |name: &str, title: &str, summary: &str, input: Value, catalog: &CatalogFields| OperationSpec {
        name: name.into(),
        title: Some(title.into()),
        summary: summary.into(),
        input_schema: input,
        output_schema: json!({"type": "object"}),
        catalog: catalog.clone(),
        capabilities: Vec::new(),
        handler: handler.clone(),
    };
    let operations = vec![
        spec(
            "slack.context",
            "A channel's context",
            "The channel's name and topic, and its latest messages (`limit`, default 20).",
            object(&["channel"], json!({"channel": string, "limit": limit})),
            &read,
        ),
        spec(
            "slack.thread",
            "A thread's messages",
            "The messages of the thread started at `thread_ts`, oldest first.",
            object(
                &["channel", "thread_ts"],
                json!({"channel": string, "thread_ts": string, "limit": limit}),
            ),
            &read,
        ),
        spec(
            "slack.reply",
            "Reply in a thread",
            "Posts `text` as a reply in the thread started at `thread_ts`.",
            object(
                &["channel", "thread_ts", "text"],
                json!({"channel": string, "thread_ts": string, "text": string}),
            ),
            &write,
        ),
    ];
    let responder = ToolsetSpec {
        name: "slack.responder".into(),
        operations: ["slack.context", "slack.thread", "slack.reply"]
            .into_iter()
            .map(|op| ToolsetEntry {
                operation: op.into(),
                since: "0.1.0".into(),
            })
            .collect(),
    };
    Registration {
        name: NAME.into(),
        source: ToolSource::HostExtension,
        operations,
        toolsets: vec![responder],
    }
}
