//! The extensions' ingresses: a delivery to `POST /v1/ingress/{source}` is verified as its source
//! signs it, then what it says is accepted as events of that source in the configured scope, on
//! the keys the extension's scheme gives (each waking the waits and routes it matches).

use std::sync::Arc;

use conduit_config::Snapshot;
use conduit_core::{Causation, ErrorCode, NewEvent, Refusal, Source};
use conduit_scheduler::{accept, HostError};
use conduit_server::{now, Delivery, Ingress, IngressFuture};
use conduit_store::{new_id, Store};
use conduit_toolbelt::Generations;
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::github::webhook;
use super::secret_access::SecretAccess;
use super::slack::events;
use crate::store_thread::on_store_thread;

/// One event to accept: its type, key, data and the identity that makes a redelivery a no-op.
struct Incoming {
    event_type: String,
    key: String,
    data: Value,
    delivery_id: String,
}

/// What a verified delivery asks: an answer of its own (Slack's URL check), or events in a scope.
enum Verified {
    Answer(Value),
    Events(String, Vec<Incoming>),
}

pub struct Ingresses {
    pub store: Arc<dyn Store>,
    pub secrets: SecretAccess,
    /// On a shared store, the generation another daemon committed is run before a delivery is
    /// judged, so a rotated secret or a moved scope applies on every daemon at once.
    pub generations: Arc<dyn Generations>,
    /// Wakes the scheduler: an event may have made Work ready.
    pub kick: Arc<Notify>,
}

impl Ingress for Ingresses {
    fn deliver(&self, source: String, delivery: Delivery) -> IngressFuture {
        let store = self.store.clone();
        let secrets = self.secrets.clone();
        let kick = self.kick.clone();
        let generations = self.generations.clone();
        Box::pin(async move {
            if generations.shared() {
                tokio::task::spawn_blocking(move || generations.catch_up())
                    .await
                    .map_err(|_| Refusal::internal())??;
            }
            // One generation judges the delivery and accepts its events.
            let config = secrets.config.get();
            let verified = match source.as_str() {
                webhook::SOURCE => github(&secrets, &config, &delivery).await?,
                events::SOURCE => slack(&secrets, &config, &delivery).await?,
                _ => return Err(Refusal::not_found("ingress")),
            };
            let (scope, incoming) = match verified {
                Verified::Answer(answer) => return Ok(answer),
                Verified::Events(scope, incoming) => (scope, incoming),
            };
            let accepted = record(store, config, source, scope, incoming).await?;
            kick.notify_one();
            Ok(json!({"accepted": accepted}))
        })
    }
}

/// A GitHub webhook delivery: signed with the configured secret (`X-Hub-Signature-256`), of the
/// type `X-GitHub-Event` names, identified by `X-GitHub-Delivery`.
async fn github(secrets: &SecretAccess, config: &Snapshot, delivery: &Delivery) -> Result<Verified, Refusal> {
    let settings = config.github();
    let configured = (
        settings.and_then(|s| s.webhook_secret.clone()),
        settings.and_then(|s| s.scope.clone()),
    );
    const SETTING: &str = "extensions.github.webhook_secret";
    // Nothing is resolved for a request that could not verify.
    let signature = delivery
        .header("x-hub-signature-256")
        .filter(|s| s.starts_with("sha256="));
    let (secret, scope) = signing(secrets, configured, SETTING, signature.is_some()).await?;
    if !webhook::signature_valid(secret.as_bytes(), &delivery.body, signature) {
        return Err(unsigned("X-Hub-Signature-256", SETTING));
    }
    let event = delivery.header("x-github-event").unwrap_or_default();
    let id = delivery.header("x-github-delivery").unwrap_or_default();
    if event.is_empty() || id.is_empty() {
        return Err(Refusal::invalid_input(
            "a delivery names its X-GitHub-Event and X-GitHub-Delivery",
        ));
    }
    let payload: Value = serde_json::from_slice(&delivery.body)
        .map_err(|_| Refusal::invalid_input("the delivery's body is not JSON"))?;
    let body = conduit_core::canonical::sha256_hex(&delivery.body);
    let incoming = webhook::events(event, &payload)
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, d)| Incoming {
            event_type: d.event_type,
            key: d.key,
            data: d.data,
            // The body is signed and the delivery id is not: a body replayed under a new id is
            // still the same delivery.
            delivery_id: format!("{}:{body}/{i}", webhook::SOURCE),
        })
        .collect();
    Ok(Verified::Events(scope, incoming))
}

/// A Slack Events request: signed with the signing secret over its timestamp and body
/// (`X-Slack-Signature`), and within five minutes of now, so an old request replayed is refused.
async fn slack(secrets: &SecretAccess, config: &Snapshot, delivery: &Delivery) -> Result<Verified, Refusal> {
    let settings = config.slack();
    let configured = (
        settings.and_then(|s| s.signing_secret.clone()),
        settings.and_then(|s| s.scope.clone()),
    );
    const SETTING: &str = "extensions.slack.signing_secret";
    let timestamp = delivery.header("x-slack-request-timestamp").unwrap_or_default();
    let signature = delivery.header("x-slack-signature").filter(|s| s.starts_with("v0="));
    let (secret, scope) = signing(secrets, configured, SETTING, signature.is_some()).await?;
    if !events::signature_valid(secret.as_bytes(), timestamp, &delivery.body, signature) {
        return Err(unsigned("X-Slack-Signature", SETTING));
    }
    if !events::fresh(timestamp, now().0 / 1000) {
        return Err(Refusal::new(
            ErrorCode::Unauthenticated,
            "the request's timestamp is outside the five-minute window",
        )
        .with_remedy("a replayed or delayed request is refused; Slack sends a fresh one"));
    }
    let payload: Value =
        serde_json::from_slice(&delivery.body).map_err(|_| Refusal::invalid_input("the request's body is not JSON"))?;
    match events::read(&payload) {
        Some(events::Request::Challenge(challenge)) => Ok(Verified::Answer(json!({"challenge": challenge}))),
        Some(events::Request::Events(found)) => {
            let incoming = found
                .into_iter()
                .map(|e| Incoming {
                    event_type: e.event_type.into(),
                    key: e.key,
                    data: e.data,
                    delivery_id: format!("{}:{}", events::SOURCE, e.event_id),
                })
                .collect();
            Ok(Verified::Events(scope, incoming))
        }
        None => Err(Refusal::invalid_input("the request is not a Slack Events API request")),
    }
}

/// The ingress's secret (resolved) and scope, when both are configured and the request is signed
/// at all (an unsigned one resolves nothing: a `cmd:` secret may take seconds).
async fn signing(
    secrets: &SecretAccess,
    configured: (Option<String>, Option<String>),
    setting: &str,
    signed: bool,
) -> Result<(String, String), Refusal> {
    let (Some(name), Some(scope)) = configured else {
        return Err(Refusal::not_found("ingress").with_remedy(format!("configure `{setting}` and its `scope`")));
    };
    if !signed {
        return Err(unsigned("signature", setting));
    }
    let secret = secrets.named(&name).await.map_err(|e| {
        Refusal::new(ErrorCode::Internal, "the ingress's secret could not be resolved")
            .with_field("reason", e.code.into())
    })?;
    Ok((secret, scope))
}

fn unsigned(header: &str, setting: &str) -> Refusal {
    Refusal::new(
        ErrorCode::Unauthenticated,
        format!("the request's {header} does not verify"),
    )
    .with_remedy(format!("sign requests with the secret `{setting}` names"))
}

/// Accepts the events in one transaction; a delivery seen before accepts nothing again. Answers
/// the ids of the events (new or earlier).
async fn record(
    store: Arc<dyn Store>,
    config: Arc<Snapshot>,
    source: String,
    scope: String,
    incoming: Vec<Incoming>,
) -> Result<Vec<String>, Refusal> {
    let written = on_store_thread(store, move |store| {
        store.write(|tx| -> Result<Vec<String>, HostError> {
            let mut ids = Vec::new();
            for event in incoming {
                if let Some(earlier) = tx.event_by_delivery(&event.delivery_id)? {
                    ids.push(earlier.id);
                    continue;
                }
                let id = new_id();
                let at = now();
                let new = NewEvent {
                    id: id.clone(),
                    event_type: event.event_type,
                    source: Source::Ingress(source.clone()),
                    scope: scope.clone(),
                    work_id: None,
                    execution_id: None,
                    correlation_key: Some(event.key),
                    causation: Causation::root(&id),
                    actor: None,
                    data: event.data,
                    accepted_at: at,
                    delivery_id: Some(event.delivery_id),
                };
                ids.push(accept(tx, &config, new, at)?.id);
            }
            Ok(ids)
        })
    })
    .await;
    written.map_err(|e| e.refusal())
}
