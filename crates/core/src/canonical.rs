//! RFC 8785 canonical JSON and the SHA-256 hashes taken over it.
//!
//! Every toolbelt call hashes its input, so the common case is written straight from the value:
//! a `Value` whose numbers are integers a double holds exactly and whose keys sort alike as bytes
//! and as UTF-16 prints the same through `serde_json`'s compact writer as through `serde_jcs`
//! (which buffers and sorts every object again). Anything else goes through `serde_jcs`.

use std::io::Write;
use std::sync::LazyLock;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The RFC 8785 (JCS) serialization of `value`: sorted keys, no whitespace, ECMAScript numbers.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write_canonical(&mut out, value);
    // Both writers emit only UTF-8 (the text of a `Value`, escapes and ASCII digits).
    String::from_utf8(out).unwrap_or_default()
}

/// Lower-case hex SHA-256 of the canonical form of `value`, hashed as it is written.
pub fn canonical_hash(value: &Value) -> String {
    let mut hasher = Sha256::new();
    write_canonical(&mut hasher, value);
    hex::encode(hasher.finalize())
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Writes the canonical form of `value` into `out`, an in-memory writer (a buffer or a hasher).
fn write_canonical(out: &mut impl Write, value: &Value) {
    // Serializing a `Value` into memory cannot fail: it has no non-string keys and no non-finite
    // numbers.
    let _ = if *DIRECT_PATH_HOLDS && prints_canonically(value) {
        serde_json::to_writer(out, value)
    } else {
        serde_jcs::to_writer(out, value)
    };
}

/// Every integer up to this magnitude is exactly a double; past it, not every one is, and the
/// scheme prints the nearest double, not the integer.
const EXACT_INTEGER: u64 = 1 << 53;

/// Whether this build's `serde_json` keeps an object's keys sorted and its numbers as machine
/// integers and doubles, as the direct path needs: its `preserve_order` (keys in insertion order)
/// or `arbitrary_precision` (numbers as their text, so `-0` reads as the integer 0) features, which
/// a dependency could turn on for the whole build, would each break it. Probed once.
static DIRECT_PATH_HOLDS: LazyLock<bool> = LazyLock::new(|| {
    let probe: Value = serde_json::from_str(r#"{"b": -0, "a": 1}"#).unwrap_or_default();
    let sorted = probe
        .as_object()
        .and_then(|m| m.keys().next())
        .is_some_and(|k| k == "a");
    sorted && probe["b"].is_f64()
});

/// Whether `serde_json`'s compact form of `value` is already its RFC 8785 form. Strings escape
/// alike in both (the same short escapes, `\u00xx` in lower case, nothing else); what can differ is
/// numbers (the scheme prints every number as a double does) and key order (the scheme sorts keys
/// by UTF-16 code units, which orders as UTF-8 bytes, `serde_json`'s map order, unless keys hold
/// both characters from U+E000 to U+FFFF and ones past U+FFFF; any key from U+E000 up is sent to
/// `serde_jcs`, more than needed, so the rule stays one byte test).
fn prints_canonically(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => true,
        Value::Number(n) => integer_magnitude(n).is_some_and(|m| m <= EXACT_INTEGER),
        Value::Array(items) => items.iter().all(prints_canonically),
        Value::Object(map) => map.iter().all(|(k, v)| orders_as_utf16(k) && prints_canonically(v)),
    }
}

/// Whether every integer in `value` is one a double holds exactly (|n| <= 2^53), as I-JSON
/// (RFC 7493), the input RFC 8785 is defined on, requires: past it the scheme prints the nearest
/// double, so two different integers would share a canonical form and a hash (and an approval or
/// a replay keyed by it). Fractions and exponents are doubles already, and are exact.
pub fn integers_are_exact(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => true,
        Value::Number(n) => integer_magnitude(n).is_none_or(|m| m <= EXACT_INTEGER),
        Value::Array(items) => items.iter().all(integers_are_exact),
        Value::Object(map) => map.values().all(integers_are_exact),
    }
}

/// The magnitude of a number `serde_json` holds as an integer; `None` for a double.
fn integer_magnitude(n: &serde_json::Number) -> Option<u64> {
    n.as_u64().or_else(|| n.as_i64().map(i64::unsigned_abs))
}

/// Whether `key` holds no character from U+E000 up (its UTF-8 starts at byte 0xEE), so that its
/// bytes and its UTF-16 code units order it alike against any other such key.
fn orders_as_utf16(key: &str) -> bool {
    !key.bytes().any(|b| b >= 0xEE)
}

#[cfg(test)]
mod tests;
