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

use std::sync::Arc;

use conduit_config::Snapshot;
use conduit_core::{quota, Event, Execution, ExecutionState, Refusal, Timestamp, TokenRecord, Work, WorkState};
use conduit_scheduler::HostError;
use conduit_store::{TokenLease, Tx};

pub use crate::authority::Authority;
use crate::registry::Registry;
use crate::token::{digests_match, Presented};
use crate::CallRequest;

/// A refusal at checks 2 to 5, with the genuine token it refused (a call classifies it).
pub struct Refused {
    pub error: HostError,
    pub token: Arc<TokenRecord>,
}

impl Refused {
    fn new(refusal: Refusal, token: Arc<TokenRecord>) -> Refused {
        Refused {
            error: refusal.into(),
            token,
        }
    }
}

impl From<Refused> for HostError {
    fn from(refused: Refused) -> HostError {
        refused.error
    }
}

/// Checks 2 to 5 for `request`, on a token and its lease's rows read together ([`live_lease`]).
pub fn authorize(
    config: &Snapshot,
    registry: &Registry,
    lease: TokenLease,
    request: &CallRequest,
    now: Timestamp,
) -> Result<Authority, Refused> {
    match check_claims(config, registry, &lease.token, request) {
        Err(refusal) => Err(Refused::new(refusal, lease.token)),
        Ok(()) => held_lease(lease, now),
    }
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
    presented: &Presented,
    now: Timestamp,
) -> Result<TokenRecord, HostError> {
    let found = tx.token_by_digest(presented.digest())?;
    check_live(tx, found, |t| t, presented.digest(), socket_execution, now)
}

/// Check 1, as [`live_token`], with the rows check 5 judges read in the same statement. Should
/// those rows fail to read, check 1 still decides first: a token it refuses gets its refusal, not
/// the store's error.
pub fn live_lease(
    tx: &mut dyn Tx,
    socket_execution: &str,
    presented: &Presented,
    now: Timestamp,
) -> Result<TokenLease, HostError> {
    match tx.token_lease_by_digest(presented.digest()) {
        Ok(found) => check_live(tx, found, |l| &l.token, presented.digest(), socket_execution, now),
        Err(e) => {
            live_token(tx, socket_execution, presented, now)?;
            Err(e.into())
        }
    }
}

/// Check 1 on what the presented digest found (`token` is the token's record in it).
fn check_live<T>(
    tx: &mut dyn Tx,
    found: Option<T>,
    token: fn(&T) -> &TokenRecord,
    presented: &[u8; 32],
    socket_execution: &str,
    now: Timestamp,
) -> Result<T, HostError> {
    let Some(found) = found else {
        if tx.operator_by_digest(presented)?.is_some() {
            return Err(Refusal::wrong_credential_class().into());
        }
        return Err(Refusal::forbidden().into());
    };
    let t = token(&found);
    if !digests_match(&t.digest, presented) || !t.is_live_at(now) || t.execution_id != socket_execution {
        return Err(Refusal::forbidden().into());
    }
    Ok(found)
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

/// Check 5, the lease guard, on rows it reads afresh: an extension's results are committed only
/// after passing it again. The cause event is read once the rest has passed.
pub fn lease_guard(tx: &mut dyn Tx, token: Arc<TokenRecord>, now: Timestamp) -> Result<Authority, HostError> {
    let lease = TokenLease {
        execution: tx.get_execution(&token.execution_id)?.map(Arc::new),
        work: tx.get_work(&token.work_id)?.map(Arc::new),
        token,
        cause: None,
    };
    let mut authority = check_lease(lease, now)?;
    authority.cause = tx.get_event(&authority.execution.cause_event)?.map(Arc::new);
    Ok(authority)
}

/// Check 5 on rows already read: they are the token's own (its execution, its Work, the
/// execution's cause), the execution runs at the token's epoch under the token's owner with a live
/// lease, its Work runs in the token's scope, and the segment has not declared.
pub fn check_lease(lease: TokenLease, now: Timestamp) -> Result<Authority, HostError> {
    Ok(held_lease(lease, now)?)
}

/// [`check_lease`], answering the token with its refusal.
fn held_lease(lease: TokenLease, now: Timestamp) -> Result<Authority, Refused> {
    let TokenLease {
        token,
        execution,
        work,
        cause,
    } = lease;
    let (Some(execution), Some(work)) = (execution, work) else {
        return Err(Refused::new(Refusal::forbidden(), token));
    };
    match lease_refusal(&token, &execution, &work, cause.as_deref(), now) {
        Some(refusal) => Err(Refused::new(refusal, token)),
        None => Ok(Authority {
            token,
            execution,
            work,
            cause,
        }),
    }
}

/// Why check 5 refuses the token's rows, if it does.
fn lease_refusal(
    token: &TokenRecord,
    execution: &Execution,
    work: &Work,
    cause: Option<&Event>,
    now: Timestamp,
) -> Option<Refusal> {
    let own_rows = execution.id == token.execution_id
        && work.id == token.work_id
        && execution.work_id == token.work_id
        && cause.is_none_or(|c| c.id == execution.cause_event);
    let holds_lease = execution.state == ExecutionState::Running
        && execution.epoch == token.epoch
        && execution.owner == token.owner
        && execution.lease_live_at(now);
    if !own_rows || !holds_lease || work.state != WorkState::Running || work.scope != token.scope {
        return Some(Refusal::forbidden());
    }
    execution.declaration.is_some().then(Refusal::authority_released)
}
