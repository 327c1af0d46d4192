//! `Idempotency-Key` for operators' mutations: bound to the principal, method, path and the body's
//! canonical hash, kept 30 days. A replay answers the original status and body; the same key with
//! another request is `409 idempotency_conflict`. Durable identities derive from the key (prefixed
//! with a named operator's principal), so a retried timed-out request completes the same operation.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use conduit_core::canonical::canonical_hash;
use conduit_core::credential::OWNER;
use conduit_core::names::is_key;
use conduit_core::{Duration, ErrorCode, OperatorRecord, Refusal, Timestamp};
use conduit_store::{IdempotentRecord, Store, Tx};
use serde_json::Value;

use crate::clock::now;
use crate::envelope::{blocking, Answer, Failure};
use crate::recording::Recording;

/// How long a key's answer is kept.
pub const KEPT: Duration = Duration::from_secs(30 * 24 * 3600);

/// One keyed mutation: who sent it, under which key, and what it was.
pub struct Keyed {
    principal: String,
    key: String,
    /// Where durable identities derive from: the key, prefixed with a named operator's principal.
    pub seed: String,
    method: &'static str,
    path: String,
    body_hash: String,
}

impl Keyed {
    /// The mutation's key (required), bound to the operator, the route and the body.
    pub fn new(
        operator: &OperatorRecord,
        headers: &HeaderMap,
        method: &'static str,
        path: &str,
        body: &Bytes,
    ) -> Result<Keyed, Failure> {
        let key = headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|k| is_key(k))
            .ok_or_else(|| {
                Failure(
                    Refusal::new(
                        ErrorCode::IdempotencyKeyRequired,
                        "this mutation needs an Idempotency-Key header of 1 to 200 bytes",
                    )
                    .with_remedy("send `Idempotency-Key: <a unique value>`, and the same value when you retry"),
                )
            })?
            .to_owned();
        let principal = operator.principal();
        let seed = if operator.name == OWNER {
            key.clone()
        } else {
            format!("{principal}/{key}")
        };
        let body: Value = serde_json::from_slice(body).unwrap_or_default();
        Ok(Keyed {
            principal,
            key,
            seed,
            method,
            path: path.to_owned(),
            body_hash: canonical_hash(&body),
        })
    }

    /// The committed answer under this key, if any; a different request under it is a conflict.
    fn replay(&self, tx: &mut dyn Tx) -> Result<Option<(StatusCode, Value)>, Failure> {
        let Some(record) = tx.get_idempotent(&self.principal, &self.key)? else {
            return Ok(None);
        };
        if record.method != self.method || record.path != self.path || record.body_hash != self.body_hash {
            return Err(Failure(
                Refusal::new(
                    ErrorCode::IdempotencyConflict,
                    "this Idempotency-Key was used for a different request",
                )
                .with_remedy("use a new key for a new request"),
            ));
        }
        Ok(Some((
            StatusCode::from_u16(record.status).unwrap_or(StatusCode::OK),
            record.response,
        )))
    }

    /// Records what the operator changed, in the change's own transaction, when the router opened a
    /// recording for the request.
    fn record_action(
        &self,
        tx: &mut dyn Tx,
        recording: Option<&Recording>,
        status: StatusCode,
        answer: &Value,
    ) -> Result<(), Failure> {
        let Some(recording) = recording else {
            return Ok(());
        };
        let action = recording.keyed_action(&self.key, &self.body_hash, status.as_u16(), answer, now());
        Ok(tx.record_operator_action(&action)?)
    }

    fn record(&self, tx: &mut dyn Tx, status: StatusCode, response: &Value, at: Timestamp) -> Result<(), Failure> {
        tx.insert_idempotent(&IdempotentRecord {
            principal: self.principal.clone(),
            key: self.key.clone(),
            method: self.method.to_owned(),
            path: self.path.clone(),
            body_hash: self.body_hash.clone(),
            status: status.as_u16(),
            response: response.clone(),
            created_at: at,
        })?;
        Ok(())
    }
}

/// Runs a store mutation once per key: the replay lookup, the mutation and its record share one
/// transaction, so an answer is recorded exactly when its effect commits.
pub async fn once(
    store: std::sync::Arc<dyn Store>,
    keyed: Keyed,
    run: impl FnOnce(&mut dyn Tx, &str) -> Result<(StatusCode, Value), Failure> + Send + 'static,
) -> Answer {
    let recording = Recording::current();
    let open = recording.clone();
    let (status, body) = blocking(move || {
        store.write(|tx| {
            if let Some(replayed) = keyed.replay(tx)? {
                return Ok(replayed);
            }
            let (status, body) = run(tx, &keyed.seed)?;
            keyed.record(tx, status, &body, now())?;
            keyed.record_action(tx, open.as_ref(), status, &body)?;
            Ok((status, body))
        })
    })
    .await?;
    recording.inspect(|r| r.mark_written());
    Ok((status, Json(body)).into_response())
}

/// Runs a mutation that is not one store transaction (configuration apply) once per key: replay
/// lookup, then the mutation, then its record. A crash between the two runs it again on retry, which
/// for apply answers the same generation.
pub async fn once_outside(
    store: std::sync::Arc<dyn Store>,
    keyed: Keyed,
    run: impl FnOnce() -> Result<(StatusCode, Value), Failure> + Send + 'static,
) -> Result<Response, Failure> {
    let recording = Recording::current();
    let open = recording.clone();
    let (status, body) = blocking(move || {
        if let Some(replayed) = store.write(|tx| keyed.replay(tx))? {
            return Ok(replayed);
        }
        let (status, body) = run()?;
        store.write(|tx| {
            keyed.record(tx, status, &body, now())?;
            keyed.record_action(tx, open.as_ref(), status, &body)
        })?;
        Ok((status, body))
    })
    .await?;
    recording.inspect(|r| r.mark_written());
    Ok((status, Json(body)).into_response())
}
