//! An entry's check: what tells a whole entry of this store's log from a torn one, one of another
//! store's, or garbage. XXH3-64, since schema version 27; the start of a SHA-256 before it.

use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::Xxh3;

/// An entry's check: XXH3-64 of the store's identity, the entry's number and its body.
pub(super) fn check(identity: &[u8], number: u64, body: &[u8]) -> [u8; 8] {
    let mut hash = Xxh3::new();
    hash.update(identity);
    hash.update(&number.to_le_bytes());
    hash.update(body);
    hash.digest().to_le_bytes()
}

/// Whether `found` is the entry's check, or the one a log written before XXH3 gave it.
pub(super) fn checks_out(identity: &[u8], number: u64, body: &[u8], found: &[u8]) -> bool {
    found == check(identity, number, body) || found == sha256_check(identity, number, body)
}

/// The check of a log from before XXH3: the start of the SHA-256 of the same bytes.
pub(super) fn sha256_check(identity: &[u8], number: u64, body: &[u8]) -> [u8; 8] {
    let digest = Sha256::new()
        .chain_update(identity)
        .chain_update(number.to_le_bytes())
        .chain_update(body)
        .finalize();
    let mut check = [0; 8];
    check.copy_from_slice(&digest[..8]);
    check
}
