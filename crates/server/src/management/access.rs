//! How a management handler reaches the store: the operator's credential and role, a read in one
//! transaction (with an ETag for single records), and an admitted mutation run once per key.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{post, MethodRouter};
use conduit_config::Snapshot;
use conduit_core::canonical::canonical_hash;
use conduit_core::{ErrorCode, OperatorRecord, Refusal, Role};
use conduit_scheduler::Operator;
use conduit_store::Tx;
use conduit_toolbelt::token::digest;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::state::Management;
use crate::envelope::{bearer, blocking, check_mutation, ok, parse_body, read_body, Answer, Failure};
use crate::idempotency::{once, once_outside, Keyed};

/// Authenticates an operator credential and checks its role against what the route requires, before
/// the body is read. An execution token is `wrong_credential_class`; anything else unknown or revoked
/// is `unauthenticated`; a role below `required` is `forbidden_role`.
pub(crate) async fn operator(
    state: &Management,
    headers: &HeaderMap,
    required: Role,
) -> Result<OperatorRecord, Failure> {
    let op = credential(state, headers).await?;
    if !op.role.allows(required) {
        return Err(Failure(
            Refusal::new(
                ErrorCode::ForbiddenRole,
                format!("this needs the {} role", required.as_str()),
            )
            .with_remedy("ask an admin for a credential with that role"),
        ));
    }
    Ok(op)
}

pub(super) async fn credential(state: &Management, headers: &HeaderMap) -> Result<OperatorRecord, Failure> {
    let presented = digest(&bearer(headers)?);
    let store = state.store.clone();
    blocking(move || {
        store.read(|tx| {
            if let Some(op) = tx.operator_by_digest(&presented)?.filter(|o| o.revoked_at.is_none()) {
                return Ok(op);
            }
            if tx.token_by_digest(&presented)?.is_some() {
                return Err(Failure(Refusal::wrong_credential_class()));
            }
            Err(Failure(
                Refusal::new(
                    ErrorCode::Unauthenticated,
                    "the operator credential is unknown or revoked",
                )
                .with_remedy("use the token in <state>/private/operator.token"),
            ))
        })
    })
    .await
}

/// A mutation's request, admitted: its operator, its body parsed strictly and checked, and its
/// Idempotency-Key.
pub(super) struct Admitted<B> {
    op: OperatorRecord,
    keyed: Keyed,
    request: B,
}

/// Admits a mutation: the operator holds `role`, the request is a mutation, the body parses strictly
/// and passes `check`, and it carries an Idempotency-Key, in that order. Nothing is written yet.
pub(super) async fn admit<B: DeserializeOwned>(
    s: &Management,
    headers: &HeaderMap,
    uri: &Uri,
    body: Body,
    role: Role,
    check: impl FnOnce(&B) -> Result<(), Refusal>,
) -> Result<Admitted<B>, Failure> {
    let op = operator(s, headers, role).await?;
    check_mutation(headers, uri)?;
    let body = read_body(body).await?;
    let request: B = parse_body(&body)?;
    check(&request)?;
    let keyed = Keyed::new(&op, headers, "POST", uri.path(), &body)?;
    Ok(Admitted { op, keyed, request })
}

/// What a mutation does in its transaction, given the operator as the actor of what it records.
pub(super) type Mutation<B> =
    dyn FnOnce(&mut dyn Tx, &Snapshot, &Operator<'_>, B) -> Result<(StatusCode, Value), Failure> + Send;

impl<B: Send + 'static> Admitted<B> {
    /// The operator whose request it is.
    pub(super) fn operator(&self) -> &OperatorRecord {
        &self.op
    }

    /// Runs the mutation once per key, in one transaction, then wakes the scheduler.
    pub(super) async fn once(self, s: &Management, run: Box<Mutation<B>>) -> Answer {
        let Admitted { op, keyed, request } = self;
        let config = s.config.get();
        let answer = once(s.store.clone(), keyed, move |tx, seed| {
            let by = Operator {
                actor: &op.principal(),
                seed,
            };
            run(tx, &config, &by, request)
        })
        .await?;
        s.kick.notify_one();
        Ok(answer)
    }

    /// Runs the mutation once per key outside any transaction: a daemon service does the work and
    /// only the answer is recorded under the key.
    pub(super) async fn once_outside(
        self,
        s: &Management,
        run: impl FnOnce(B) -> Result<(StatusCode, Value), Failure> + Send + 'static,
    ) -> Answer {
        let request = self.request;
        once_outside(s.store.clone(), self.keyed, move || run(request)).await
    }
}

/// A control's effect on the resource `id` names, with the operator as its actor.
pub(super) type Control<B> = fn(&mut dyn Tx, &Snapshot, &str, &Operator<'_>, B) -> Reply;

/// What a control answers: its JSON, or the refusal.
pub(super) type Reply = Result<Value, Failure>;

/// An operator control on the resource `{id}` names: the `operate` role, a strict body, an
/// Idempotency-Key, one transaction, and `200` with what `run` answers.
pub(super) fn control<B: DeserializeOwned + Send + 'static>(run: Control<B>) -> MethodRouter<Management> {
    post(
        move |State(s): State<Management>, headers: HeaderMap, uri: Uri, Path(id): Path<String>, body: Body| async move {
            let admitted = admit(&s, &headers, &uri, body, Role::Operate, |_: &B| Ok(())).await?;
            let run = move |tx: &mut dyn Tx, config: &Snapshot, by: &Operator<'_>, request: B| {
                Ok((StatusCode::OK, run(tx, config, &id, by, request)?))
            };
            admitted.once(&s, Box::new(run)).await
        },
    )
}

/// The body of a control that takes none: `{}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoBody {}

/// Authenticates an operator, then answers `200` with what `f` reads in one read transaction.
pub(crate) async fn read<T: Serialize + Send + 'static>(
    s: &Management,
    headers: &HeaderMap,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Answer {
    ok(StatusCode::OK, &viewed(s, headers, f).await?)
}

/// What `f` reads in one read transaction, for an operator with the `view` role.
async fn viewed<T: Send + 'static>(
    s: &Management,
    headers: &HeaderMap,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    operator(s, headers, Role::View).await?;
    let store = s.store.clone();
    blocking(move || store.read(f)).await
}

/// A single read: `200` with a revision ETag (a digest of the answer), or `304` when the request's
/// `If-None-Match` already names it.
pub(super) async fn read_one<T: Serialize + Send + 'static>(
    s: &Management,
    headers: &HeaderMap,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Answer {
    let body = serde_json::to_value(viewed(s, headers, f).await?).unwrap_or_default();
    let etag = format!("\"{}\"", &canonical_hash(&body)[..32]);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag || tag.trim() == "*"));
    let status = if cached {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let mut response = if cached {
        status.into_response()
    } else {
        (status, axum::Json(body)).into_response()
    };
    if let Ok(value) = header::HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}

pub(super) fn found<T>(record: Option<T>, what: &str) -> Result<T, Failure> {
    record.ok_or_else(|| Failure(Refusal::not_found(what)))
}
