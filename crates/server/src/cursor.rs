//! List cursors: opaque, HMAC-authenticated, bound to the endpoint, its filters, an upper bound
//! captured by the first page (so a traversal never sees rows committed after it began), and a
//! 15-minute expiry. A tampered, expired or mismatched cursor is `400 invalid_cursor`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use conduit_core::{Duration, ErrorCode, Refusal, Timestamp};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::envelope::Failure;

/// How long a cursor stays valid.
pub const CURSOR_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// What a cursor carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The list's path.
    pub endpoint: String,
    /// The list's filters, canonically written.
    pub filters: String,
    /// The upper bound the first page captured.
    pub upper: i64,
    /// Where the next page starts (an acceptance sequence, or `[time, id]`).
    pub after: Value,
    pub expires: i64,
}

/// The name of the cursors' key in the store ([`conduit_store::OperatorRows::shared_key`]): one key
/// for every daemon on the store, so a cursor one daemon sealed opens on another.
pub const CURSOR_KEY: &str = "cursors";

/// Seals and opens cursors with the daemon's cursor key.
#[derive(Clone)]
pub struct Cursors {
    key: [u8; 32],
}

impl Cursors {
    pub fn new(key: [u8; 32]) -> Cursors {
        Cursors { key }
    }

    /// Cursors sealed with the store's shared key, made from a fresh random key by whichever
    /// daemon asks first.
    pub fn of_store(store: &dyn conduit_store::Store) -> Result<Cursors, conduit_store::StoreError> {
        let fresh = conduit_toolbelt::token::generate();
        let key = store.write(|tx| tx.shared_key(CURSOR_KEY, fresh.as_bytes()))?;
        Ok(Cursors::of_shared_key(&key))
    }

    /// Cursors sealed with `key`, the store's shared key as [`CURSOR_KEY`] names it.
    pub fn of_shared_key(key: &[u8]) -> Cursors {
        Cursors::new(Sha256::digest(key).into())
    }

    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        #[allow(clippy::expect_used, reason = "HMAC takes a key of any length")]
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(payload);
        mac
    }

    pub fn seal(&self, position: &Position) -> String {
        let payload = serde_json::to_vec(position).unwrap_or_default();
        let tag = self.mac(&payload).finalize().into_bytes();
        format!("{}.{}", URL_SAFE_NO_PAD.encode(&payload), URL_SAFE_NO_PAD.encode(tag))
    }

    /// Opens a cursor for `endpoint` with `filters` at `now`: authentic, unexpired and bound to them.
    pub fn open(&self, cursor: &str, endpoint: &str, filters: &str, now: Timestamp) -> Result<Position, Failure> {
        let (payload, tag) = cursor.split_once('.').ok_or_else(invalid)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| invalid())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid())?;
        self.mac(&payload).verify_slice(&tag).map_err(|_| invalid())?;
        let position: Position = serde_json::from_slice(&payload).map_err(|_| invalid())?;
        if position.endpoint != endpoint || position.filters != filters || now.0 >= position.expires {
            return Err(invalid());
        }
        Ok(position)
    }
}

fn invalid() -> Failure {
    Failure(
        Refusal::new(
            ErrorCode::InvalidCursor,
            "the cursor is not valid for this list (tampered, expired, or for other filters)",
        )
        .with_remedy("start the listing again without a cursor"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position() -> Position {
        Position {
            endpoint: "/v1/events".into(),
            filters: "work=a".into(),
            upper: 10,
            after: Value::from(3),
            expires: 1_000,
        }
    }

    #[test]
    fn a_sealed_cursor_opens_only_where_it_was_made() {
        let cursors = Cursors::new([7; 32]);
        let sealed = cursors.seal(&position());
        assert_eq!(
            cursors.open(&sealed, "/v1/events", "work=a", Timestamp(999)).unwrap(),
            position()
        );
        assert!(
            cursors.open(&sealed, "/v1/work", "work=a", Timestamp(0)).is_err(),
            "another endpoint"
        );
        assert!(
            cursors.open(&sealed, "/v1/events", "work=b", Timestamp(0)).is_err(),
            "other filters"
        );
        assert!(
            cursors.open(&sealed, "/v1/events", "work=a", Timestamp(1_000)).is_err(),
            "expired"
        );
        assert!(
            Cursors::new([8; 32])
                .open(&sealed, "/v1/events", "work=a", Timestamp(0))
                .is_err(),
            "another key"
        );
        let (payload, tag) = sealed.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD
            .encode(br#"{"endpoint":"/v1/events","filters":"work=a","upper":99,"after":3,"expires":1000}"#);
        assert!(
            cursors
                .open(&format!("{forged}.{tag}"), "/v1/events", "work=a", Timestamp(0))
                .is_err(),
            "tampered"
        );
        assert!(
            cursors.open(payload, "/v1/events", "work=a", Timestamp(0)).is_err(),
            "no tag"
        );
    }
}

/// A list request's paging parameters.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Paging {
    pub cursor: Option<String>,
    pub limit: Option<usize>,
}

/// Rows per page when the request names none, and the most it may ask for.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 500;

impl Paging {
    pub fn limit(&self) -> Result<usize, Failure> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            Some(_) => Err(Failure(Refusal::new(
                ErrorCode::InvalidRequest,
                "limit is between 1 and 500",
            ))),
        }
    }
}
