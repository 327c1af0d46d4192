//! Operator credentials: named operators with roles, rotation, and revocation by token id. A new
//! credential's token is answered once and never stored (nor kept in idempotency history).

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_config::Snapshot;
use conduit_core::credential::{is_operator_name, OWNER};
use conduit_core::{ErrorCode, OperatorRecord, Refusal, Role, Timestamp, TokenRecord};
use conduit_scheduler::Operator;
use conduit_store::{new_id, Tx};
use conduit_toolbelt::token::{digest, generate};
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::{admit, operator};
use super::paging::{page_until_now, List};
use super::state::Management;
use crate::clock::now;
use crate::cursor::Paging;
use crate::envelope::{blocking, check_mutation, ok, parse_body, read_body, Answer, Failure};

fn shown(op: &OperatorRecord) -> Value {
    json!({"id": op.id, "name": op.name, "role": op.role, "created_at": op.created_at})
}

/// A credential in the operators list: active, or revoked with when and by whom.
fn listed(op: &OperatorRecord) -> Value {
    let mut shown = shown(op);
    shown["revoked_at"] = json!(op.revoked_at);
    shown["revoked_by"] = json!(op.revoked_by);
    shown
}

/// A new credential for `name` with `role`, and its token (to answer once).
fn credential(name: &str, role: Role) -> (OperatorRecord, String) {
    let token = generate();
    let record = OperatorRecord {
        id: new_id(),
        name: name.to_owned(),
        role,
        digest: digest(&token),
        created_at: now(),
        revoked_at: None,
        revoked_by: None,
    };
    (record, token)
}

fn issued(record: &OperatorRecord, token: &str) -> Value {
    let mut answer = shown(record);
    answer["token"] = Value::from(token);
    answer
}

/// Every operator credential, revoked ones included, by name and newest first, a page at a time.
pub async fn list(State(s): State<Management>, uri: Uri, Query(paging): Query<Paging>) -> Answer {
    let list = List::at(&uri, String::new(), paging.cursor, paging.limit);
    page_until_now(
        &s,
        list,
        |tx, page| Ok(tx.page_operators(page)?.iter().map(listed).collect()),
        |op: &Value| (text(op, "name"), text(op, "id")),
    )
    .await
}

fn text(value: &Value, field: &str) -> String {
    value[field].as_str().unwrap_or_default().to_owned()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Issue {
    name: String,
    role: Option<String>,
}

/// Issues a named operator's credential (admin only); one active credential per name.
pub async fn issue(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    operator(Role::Admin).await?;
    check_mutation(&headers, &uri)?;
    let req: Issue = parse_body(&read_body(body).await?)?;
    if !is_operator_name(&req.name) {
        let refusal = Refusal::new(
            ErrorCode::InvalidRequest,
            "an operator name is [a-z][a-z0-9-]{0,31} and not `local`",
        );
        return Err(Failure(refusal));
    }
    let role = match req.role.as_deref() {
        None => Role::View,
        Some(text) => Role::parse(text)
            .ok_or_else(|| Refusal::new(ErrorCode::InvalidRequest, "a role is view, operate or admin"))?,
    };
    let (record, token) = credential(&req.name, role);
    let store = s.store.clone();
    let answer = issued(&record, &token);
    blocking(move || {
        store.write(|tx| {
            if tx.active_operator(&record.name)?.is_some() {
                return Err(Failure(
                    Refusal::new(ErrorCode::Conflict, "this operator already has an active credential")
                        .with_remedy("revoke it first, or have its holder rotate it"),
                ));
            }
            Ok(tx.insert_operator(&record)?)
        })
    })
    .await?;
    ok(StatusCode::CREATED, &answer)
}

/// Revokes the caller's credential and answers its replacement (same name and role) once. Like
/// every control it needs `operate`; its answer is never kept under an Idempotency-Key.
pub async fn rotate(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let caller = operator(Role::Operate).await?;
    check_mutation(&headers, &uri)?;
    let _: Empty = parse_body(&read_body(body).await?)?;
    let (record, token) = credential(&caller.name, caller.role);
    let answer = issued(&record, &token);
    let store = s.store.clone();
    blocking(move || {
        store.write(|tx| {
            tx.revoke_operator(&caller.id, now(), &caller.principal())?;
            tx.insert_operator(&record)
        })?;
        Ok(())
    })
    .await?;
    ok(StatusCode::OK, &answer)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Revoke {
    token_id: String,
}

/// Revokes a credential by its token id: an execution token, the caller's own credential, or, for
/// an admin, a named operator's. Only the owner revokes the owner's. A control: `operate` and an
/// Idempotency-Key.
pub async fn revoke(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let admitted = admit(&headers, &uri, body, Role::Operate, |_: &Revoke| Ok(())).await?;
    let caller = admitted.operator().clone();
    let run = move |tx: &mut dyn Tx, _: &Snapshot, by: &Operator<'_>, req: Revoke| {
        let kind = revoke_token_id(tx, &caller, by.actor, &req.token_id)?;
        Ok((StatusCode::OK, json!({"revoked": req.token_id, "kind": kind})))
    };
    admitted.once(&s, Box::new(run)).await
}

/// Revokes what `token_id` names for `caller`: an operator credential it may revoke, else a live
/// execution token.
fn revoke_token_id(
    tx: &mut dyn Tx,
    caller: &OperatorRecord,
    by: &str,
    token_id: &str,
) -> Result<&'static str, Failure> {
    if let Some(target) = tx.get_operator(token_id)? {
        check_may_revoke(caller, &target)?;
        tx.revoke_operator(&target.id, now(), by)?;
        return Ok("operator");
    }
    match tx.revoke_token(token_id, now())? {
        true => Ok("execution"),
        false => Err(Failure(Refusal::not_found("live token"))),
    }
}

fn check_may_revoke(caller: &OperatorRecord, target: &OperatorRecord) -> Result<(), Failure> {
    if caller.id == target.id {
        return Ok(());
    }
    if target.name == OWNER {
        return Err(Failure(Refusal::new(
            ErrorCode::ForbiddenRole,
            "only the owner revokes the owner's credential",
        )));
    }
    if caller.role.allows(Role::Admin) {
        Ok(())
    } else {
        Err(role_refusal(Role::Admin))
    }
}

fn role_refusal(required: Role) -> Failure {
    Failure(Refusal::new(
        ErrorCode::ForbiddenRole,
        format!("this needs the {} role", required.as_str()),
    ))
}

/// An execution's token records, oldest first, a page at a time: ids, epochs and states, never
/// the tokens.
pub async fn execution_tokens(
    State(s): State<Management>,
    uri: Uri,
    Path(id): Path<String>,
    Query(paging): Query<Paging>,
) -> Answer {
    let list = List::at(&uri, String::new(), paging.cursor, paging.limit);
    page_until_now(
        &s,
        list,
        move |tx, page| {
            Ok(tx
                .page_tokens_of_execution(&id, page)?
                .iter()
                .map(ShownToken::of)
                .collect())
        },
        |t: &ShownToken| (t.issued_at.0, t.id.clone()),
    )
    .await
}

/// A token record as an operator sees it: never the digest.
#[derive(serde::Serialize)]
struct ShownToken {
    id: String,
    epoch: u32,
    issued_at: Timestamp,
    expires_at: Timestamp,
    revoked_at: Option<Timestamp>,
}

impl ShownToken {
    fn of(t: &TokenRecord) -> ShownToken {
        ShownToken {
            id: t.id.clone(),
            epoch: t.epoch,
            issued_at: t.issued_at,
            expires_at: t.expires_at,
            revoked_at: t.revoked_at,
        }
    }
}
