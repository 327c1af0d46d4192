//! Execution tokens: 32 random bytes, unpadded base64url, stored only as a SHA-256 digest.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use conduit_core::{Duration, Execution, Timestamp, TokenRecord, Work};
use conduit_store::{new_id, StoreError, Tx};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A fresh plaintext token from the OS random source.
pub fn generate() -> String {
    let mut bytes = [0u8; 32];
    #[allow(
        clippy::expect_used,
        reason = "the OS RNG failing is unrecoverable: no safe token can be made without it"
    )]
    getrandom::fill(&mut bytes).expect("the operating system's random source is unavailable");
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A bearer token as an execution presented it, known from here on by its digest only. The server
/// hashes it where the request arrives, so no store transaction (which runs on the store's one
/// thread) spends its time on SHA-256.
pub struct Presented {
    digest: [u8; 32],
}

impl Presented {
    pub fn new(bearer: &str) -> Presented {
        Presented { digest: digest(bearer) }
    }

    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

/// Compares digests in constant time, so the comparison leaks nothing about how much matched.
pub fn digests_match(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.ct_eq(b).into()
}

/// Issues the token for an attempt's current epoch and revokes every lower-epoch token of its Work.
/// The token expires at the attempt deadline (or sooner with `lifetime`), so it never outlives its
/// authority. Returns the plaintext, which is not kept anywhere by the host but the run directory.
pub fn issue(
    tx: &mut dyn Tx,
    execution: &Execution,
    work: &Work,
    operations: Vec<String>,
    lifetime: Option<Duration>,
    now: Timestamp,
) -> Result<String, StoreError> {
    tx.revoke_tokens_below(&work.id, execution.epoch, now)?;
    let plaintext = generate();
    let expires_at = expiry(execution, lifetime, now);
    tx.insert_token(&TokenRecord {
        id: new_id(),
        digest: digest(&plaintext),
        execution_id: execution.id.clone(),
        work_id: work.id.clone(),
        scope: work.scope.clone(),
        binding: work.binding.clone(),
        epoch: execution.epoch,
        owner: execution.owner.clone(),
        generation: execution.generation,
        operations,
        issued_at: now,
        expires_at,
        revoked_at: None,
    })?;
    Ok(plaintext)
}

/// When a token issued at `now` expires: at the attempt deadline, or sooner with a `lifetime`.
pub fn expiry(execution: &Execution, lifetime: Option<Duration>, now: Timestamp) -> Timestamp {
    lifetime.map_or(execution.deadline_at, |l| now.plus(l).min(execution.deadline_at))
}

/// Issues the successor of a live token, for the same attempt and the same pinned grant, so an
/// attempt that outlives a short token lifetime keeps its authority. `None` when the current token is
/// no longer live or its attempt no longer runs at its epoch.
pub fn rotate(
    tx: &mut dyn Tx,
    current: &str,
    lifetime: Option<Duration>,
    now: Timestamp,
) -> Result<Option<(String, Timestamp)>, StoreError> {
    let Some(token) = tx.token_by_digest(&digest(current))?.filter(|t| t.is_live_at(now)) else {
        return Ok(None);
    };
    let (Some(execution), Some(work)) = (tx.get_execution(&token.execution_id)?, tx.get_work(&token.work_id)?) else {
        return Ok(None);
    };
    if execution.epoch != token.epoch || execution.state != conduit_core::ExecutionState::Running {
        return Ok(None);
    }
    let plaintext = issue(tx, &execution, &work, token.operations, lifetime, now)?;
    Ok(Some((plaintext, expiry(&execution, lifetime, now))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_43_chars_of_unpadded_base64url() {
        let t = generate();
        assert_eq!(t.len(), 43);
        assert!(t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(t, generate());
    }

    #[test]
    fn digest_comparison() {
        let d = digest("abc");
        assert!(digests_match(&d, &digest("abc")));
        assert!(!digests_match(&d, &digest("abd")));
    }
}
