//! Operator credentials: named operators with roles, rotation, and revocation by token id. A new
//! credential's token is answered once and never stored (nor kept in idempotency history).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_core::credential::{is_operator_name, OWNER};
use conduit_core::{ErrorCode, OperatorRecord, Refusal, Role};
use conduit_store::new_id;
use conduit_toolbelt::token::{digest, generate};
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::{operator, read};
use super::state::Management;
use crate::clock::now;
use crate::envelope::{blocking, check_mutation, ok, parse_body, read_body, Answer, Failure};

fn shown(op: &OperatorRecord) -> Value {
    json!({"id": op.id, "name": op.name, "role": op.role, "created_at": op.created_at})
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
    };
    (record, token)
}

fn issued(record: &OperatorRecord, token: &str) -> Value {
    let mut answer = shown(record);
    answer["token"] = Value::from(token);
    answer
}

pub async fn list(State(s): State<Management>, headers: HeaderMap) -> Answer {
    read(&s, &headers, |tx| {
        Ok(json!({"items": tx.list_operators()?.iter().map(shown).collect::<Vec<_>>()}))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Issue {
    name: String,
    role: Option<String>,
}

/// Issues a named operator's credential (admin only); one active credential per name.
pub async fn issue(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    operator(&s, &headers, Role::Admin).await?;
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

/// Revokes the caller's credential and answers its replacement (same name and role) once.
pub async fn rotate(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let caller = operator(&s, &headers, Role::View).await?;
    check_mutation(&headers, &uri)?;
    let _: Empty = parse_body(&read_body(body).await?)?;
    let (record, token) = credential(&caller.name, caller.role);
    let answer = issued(&record, &token);
    let store = s.store.clone();
    blocking(move || {
        store.write(|tx| {
            tx.revoke_operator(&caller.id, now())?;
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

/// Revokes a credential by its token id: an execution token (operate), the caller's own credential,
/// or, for an admin, a named operator's. Only the owner revokes the owner's.
pub async fn revoke(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let caller = operator(&s, &headers, Role::View).await?;
    check_mutation(&headers, &uri)?;
    let req: Revoke = parse_body(&read_body(body).await?)?;
    let (store, revoked) = (s.store.clone(), req.token_id.clone());
    let kind = blocking(move || {
        store.write(|tx| -> Result<&'static str, Failure> {
            if let Some(target) = tx.get_operator(&req.token_id)? {
                check_may_revoke(&caller, &target)?;
                tx.revoke_operator(&target.id, now())?;
                return Ok("operator");
            }
            if !caller.role.allows(Role::Operate) {
                return Err(role_refusal(Role::Operate));
            }
            match tx.revoke_token(&req.token_id, now())? {
                true => Ok("execution"),
                false => Err(Failure(Refusal::not_found("live token"))),
            }
        })
    })
    .await?;
    ok(StatusCode::OK, &json!({"revoked": revoked, "kind": kind}))
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

/// An execution's token records: ids, epochs and states, never the tokens.
pub async fn execution_tokens(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    read(&s, &headers, move |tx| {
        let tokens = tx.tokens_of_execution(&id)?;
        let items: Vec<Value> = tokens
            .iter()
            .map(|t| json!({"id": t.id, "epoch": t.epoch, "issued_at": t.issued_at, "expires_at": t.expires_at, "revoked_at": t.revoked_at}))
            .collect();
        Ok::<_, Failure>(json!({ "items": items }))
    })
    .await
}
