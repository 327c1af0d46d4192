//! RFC 8785 canonical JSON and the SHA-256 hashes taken over it.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The RFC 8785 (JCS) serialization of `value`: sorted keys, no whitespace, ECMAScript numbers.
pub fn canonical_json(value: &Value) -> String {
    // Serializing an in-memory `Value` cannot fail: it has no non-string keys or non-finite numbers.
    serde_jcs::to_string(value).unwrap_or_default()
}

/// Lower-case hex SHA-256 of the canonical form of `value`.
pub fn canonical_hash(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [true, null]}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":[true,null],"b":1}"#);
        assert_eq!(canonical_hash(&a), canonical_hash(&json!({"a": [true, null], "b": 1})));
    }

    #[test]
    fn numbers_follow_ecmascript() {
        assert_eq!(canonical_json(&json!(1e21)), "1e+21");
        assert_eq!(canonical_json(&json!(1.0)), "1");
    }
}
