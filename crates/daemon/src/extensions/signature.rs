//! The HMAC-SHA256 signatures services put on their deliveries (GitHub's `X-Hub-Signature-256`,
//! Slack's `X-Slack-Signature`), checked in constant time. Pure: no I/O.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Whether `signature` (hex) is the HMAC-SHA256 under `secret` of `parts` joined end to end.
pub fn hmac_hex_matches(secret: &[u8], parts: &[&[u8]], signature: &str) -> bool {
    let Ok(expected) = hex::decode(signature) else {
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

#[cfg(test)]
pub fn sign_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("any key length"));
    for part in parts {
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}
