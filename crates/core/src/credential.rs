//! Credentials as the store keeps them: digests and pinned authority, never plaintext.

use serde::Serialize;

use crate::time::Timestamp;

/// An execution token's record. The plaintext exists only in the issuer's hands and the run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Also the token's revocation id.
    pub id: String,
    /// SHA-256 of the plaintext token.
    pub digest: [u8; 32],
    pub execution_id: String,
    pub work_id: String,
    pub scope: String,
    pub binding: String,
    pub epoch: u32,
    pub owner: String,
    pub generation: i64,
    /// The operations granted when the token was issued (the binding's grant within the ceiling).
    pub operations: Vec<String>,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

impl TokenRecord {
    /// Whether the token is usable at `now`: not revoked, and `now` strictly before its expiry.
    pub fn is_live_at(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && now < self.expires_at
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    View,
    Operate,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::View => "view",
            Role::Operate => "operate",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        [Role::View, Role::Operate, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == text)
    }

    /// Whether this role may do what `required` may: admin includes operate, which includes view.
    pub fn allows(self, required: Role) -> bool {
        let rank = |r: Role| match r {
            Role::View => 0,
            Role::Operate => 1,
            Role::Admin => 2,
        };
        rank(self) >= rank(required)
    }
}

/// The owner's operator name: the credential in the state directory.
pub const OWNER: &str = "local";

/// What a starting daemon does about the owner's credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerAtStart {
    /// The state directory's token file holds the active owner credential.
    Keep,
    /// Issue a new one into the token file, revoking the active one if any.
    Issue,
    /// Another daemon on the shared store holds the active owner credential: revoking it would
    /// lock that daemon's operator out, so the operator copies the token here, or recovers.
    LeaveToOperator,
}

/// The owner credential a daemon starts with, from whether its token file holds the active one,
/// whether there is an active one at all, and whether other daemons share the store.
pub fn owner_at_start(token_file_is_active: bool, owner_is_active: bool, shared_store: bool) -> OwnerAtStart {
    match (token_file_is_active, owner_is_active, shared_store) {
        (true, _, _) => OwnerAtStart::Keep,
        (false, true, true) => OwnerAtStart::LeaveToOperator,
        _ => OwnerAtStart::Issue,
    }
}

/// A named operator's name: `[a-z][a-z0-9-]{0,31}`, and not the owner's.
pub fn is_operator_name(name: &str) -> bool {
    name.len() <= 32
        && name != OWNER
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorRecord {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub digest: [u8; 32],
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// Who revoked it: an operator's principal, or `host:recovery` for the locked local path.
    pub revoked_by: Option<String>,
}

/// Who revokes the owner's credential when the daemon issues it a new one under the state lock.
pub const RECOVERY: &str = "host:recovery";

impl OperatorRecord {
    /// The principal stamped as the actor of this operator's events.
    pub fn principal(&self) -> String {
        format!("operator:{}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_expiry_is_exclusive() {
        let t = TokenRecord {
            id: "t".into(),
            digest: [0; 32],
            execution_id: "x".into(),
            work_id: "w".into(),
            scope: "s".into(),
            binding: "b".into(),
            epoch: 1,
            owner: "o".into(),
            generation: 1,
            operations: vec![],
            issued_at: Timestamp(0),
            expires_at: Timestamp(10),
            revoked_at: None,
        };
        assert!(t.is_live_at(Timestamp(9)));
        assert!(!t.is_live_at(Timestamp(10)));
        assert!(!TokenRecord {
            revoked_at: Some(Timestamp(1)),
            ..t
        }
        .is_live_at(Timestamp(2)));
    }
}
