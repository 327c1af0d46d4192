//! The ordered authority checks every toolbelt call passes, reads included.
//!
//! 1. digest lookup, revocation and exclusive expiry;
//! 2. narrowing assertions (the socket asserts its execution; `scope_id`/`work_id`/`execution_id`);
//! 3. the operation is declared and in the token's allowlist;
//! 4. the current configuration's ceiling (so narrowing the config revokes at once);
//! 5. the lease guard, in the call's transaction: the execution runs at the token's epoch under the
//!    token's owner with a live lease, its Work runs in the token's scope, and the segment has not
//!    declared. A genuine token whose segment declared is `authority_released`; every other failure
//!    is the bare `forbidden`, which says nothing of which check failed.
//!
//! Past the checks, a call that is not a retry of a committed one meets the Work's store quota
//! ([`within_quota`]).

use conduit_config::Snapshot;
use conduit_core::{quota, ExecutionState, Refusal, Timestamp, TokenRecord, WorkState};
use conduit_scheduler::HostError;
use conduit_store::{TokenLease, Tx};

pub use crate::authority::Authority;
use crate::registry::Registry;
use crate::token::{digest, digests_match};
use crate::CallRequest;

/// Checks 2 to 5 for `request`, on a token and its lease's rows read together ([`live_lease`]).
pub fn authorize_lease(
    config: &Snapshot,
    registry: &Registry,
    lease: TokenLease,
    request: &CallRequest,
    now: Timestamp,
) -> Result<Authority, HostError> {
    check_claims(config, registry, &lease.token, request)?;
    check_lease(lease, now)
}

/// Checks 2 to 4: the narrowing assertions, the token's allowlist and the configuration's ceiling.
fn check_claims(
    config: &Snapshot,
    registry: &Registry,
    token: &TokenRecord,
    request: &CallRequest,
) -> Result<(), Refusal> {
    check_assertions(token, request)?;
    check_allowlist(token, registry, &request.operation)?;
    if !config.authorize_operation(&token.scope, &request.operation) {
        return Err(Refusal::forbidden());
    }
    Ok(())
}

/// A call that would write more for a Work past its store quota is refused; a retry of a committed
/// call is not a new write, so this comes after the replay lookup.
pub fn within_quota(tx: &mut dyn Tx, config: &Snapshot, a: &Authority, operation: &str) -> Result<(), HostError> {
    let stored = tx.work_stored_bytes(&a.work.id)?;
    Ok(quota::check(stored, config.limits().work_store_bytes, operation)?)
}

/// Check 1, and the socket's own execution assertion: a live token issued to this socket's execution.
/// An operator credential presented here is `wrong_credential_class`.
pub fn live_token(
    tx: &mut dyn Tx,
    socket_execution: &str,
    bearer: &str,
    now: Timestamp,
) -> Result<TokenRecord, HostError> {
    let presented = digest(bearer);
    let found = tx.token_by_digest(&presented)?;
    check_live(tx, found.as_ref(), &presented, socket_execution, now)?;
    found.ok_or_else(|| Refusal::forbidden().into())
}

/// Check 1, as [`live_token`], with the rows check 5 judges read in the same statement.
pub fn live_lease(
    tx: &mut dyn Tx,
    socket_execution: &str,
    bearer: &str,
    now: Timestamp,
) -> Result<TokenLease, HostError> {
    let presented = digest(bearer);
    let found = tx.token_lease_by_digest(&presented)?;
    check_live(tx, found.as_ref().map(|l| &l.token), &presented, socket_execution, now)?;
    found.ok_or_else(|| Refusal::forbidden().into())
}

/// Check 1 on what the presented digest found.
fn check_live(
    tx: &mut dyn Tx,
    found: Option<&TokenRecord>,
    presented: &[u8; 32],
    socket_execution: &str,
    now: Timestamp,
) -> Result<(), HostError> {
    let Some(token) = found else {
        if tx.operator_by_digest(presented)?.is_some() {
            return Err(Refusal::wrong_credential_class().into());
        }
        return Err(Refusal::forbidden().into());
    };
    if !digests_match(&token.digest, presented) || !token.is_live_at(now) || token.execution_id != socket_execution {
        return Err(Refusal::forbidden().into());
    }
    Ok(())
}

fn check_assertions(token: &TokenRecord, request: &CallRequest) -> Result<(), Refusal> {
    let asserted = [
        (&request.execution_id, &token.execution_id),
        (&request.work_id, &token.work_id),
        (&request.scope_id, &token.scope),
    ];
    if asserted
        .iter()
        .all(|(claim, actual)| claim.as_ref().is_none_or(|c| c == *actual))
    {
        Ok(())
    } else {
        Err(Refusal::forbidden())
    }
}

fn check_allowlist(token: &TokenRecord, registry: &Registry, operation: &str) -> Result<(), Refusal> {
    if registry.declares(operation) && token.operations.iter().any(|o| o == operation) {
        Ok(())
    } else {
        Err(Refusal::forbidden())
    }
}

/// Check 5, the lease guard. An extension's results are committed only after passing it again.
pub fn lease_guard(tx: &mut dyn Tx, token: TokenRecord, now: Timestamp) -> Result<Authority, HostError> {
    let execution = tx.get_execution(&token.execution_id)?;
    let work = tx.get_work(&token.work_id)?;
    let cause = match &execution {
        Some(x) => tx.get_event(&x.cause_event)?,
        None => None,
    };
    check_lease(
        TokenLease {
            token,
            execution,
            work,
            cause,
        },
        now,
    )
}

/// Check 5 on the rows read: the execution runs at the token's epoch under the token's owner with
/// a live lease, its Work runs in the token's scope, and the segment has not declared.
pub fn check_lease(lease: TokenLease, now: Timestamp) -> Result<Authority, HostError> {
    let TokenLease {
        token,
        execution,
        work,
        cause,
    } = lease;
    let (execution, work) = execution.zip(work).ok_or_else(Refusal::forbidden)?;
    let holds_lease = execution.state == ExecutionState::Running
        && execution.epoch == token.epoch
        && execution.owner == token.owner
        && execution.lease_live_at(now);
    if !holds_lease || work.state != WorkState::Running || work.scope != token.scope {
        return Err(Refusal::forbidden().into());
    }
    if execution.declaration.is_some() {
        return Err(Refusal::authority_released().into());
    }
    Ok(Authority {
        token,
        execution,
        work,
        cause,
    })
}
