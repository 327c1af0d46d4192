//! Operator credentials: the operators, and the answers to `auth operators add|rotate|recover|revoke`.

use serde_json::Value;

use super::layout::list;
use crate::text::field;

const OPERATOR_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/id"),
    ("NAME", "/name"),
    ("ROLE", "/role"),
    ("REVOKED", "/revoked_at"),
    ("BY", "/revoked_by"),
];

pub fn operator_table(answer: &Value) -> String {
    list(answer, &OPERATOR_COLUMNS)
}

/// A new operator credential: its name and role, and the token, shown this once.
pub fn issued(answer: &Value) -> String {
    format!(
        "{} ({}): {}\nthis token is shown once; hand it to its operator now",
        field(answer, "/name"),
        field(answer, "/role"),
        field(answer, "/token")
    )
}

/// A rotation: where the new token was written (the token itself is never printed).
pub fn rotated(answer: &Value) -> String {
    format!(
        "rotated {}; the new token is in {}",
        field(answer, "/name"),
        field(answer, "/token")
    )
}

/// A recovery of the owner's credential.
pub fn recovered(answer: &Value) -> String {
    format!("issued the owner a new credential in {}", field(answer, "/token_file"))
}

/// A revocation.
pub fn revoked(answer: &Value) -> String {
    format!("revoked {} token {}", field(answer, "/kind"), field(answer, "/revoked"))
}
