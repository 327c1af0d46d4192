//! The HMAC-SHA256 signatures services put on their deliveries (GitHub's `X-Hub-Signature-256`,
//! Slack's `X-Slack-Signature`), checked in constant time. Pure: no I/O.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Whether `hex` is the HMAC-SHA256 under `secret` of `parts` joined end to end.
pub fn hmac_hex_matches(secret: &[u8], parts: &[&[u8]], hex: &str) -> bool {
    let Some(expected) = decode_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(&expected).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
pub fn sign_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("any key length"));
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}
