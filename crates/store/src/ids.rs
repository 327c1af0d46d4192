/// A fresh time-ordered id (UUIDv7): sorting ids sorts by creation time.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A stable id derived from `parts` (a UUIDv8 over their SHA-256), so a retried request allocates the
/// same ids it allocated the first time.
pub fn derived_id(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Uuid::new_v8(bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_unambiguous() {
        assert_eq!(derived_id(&["a", "b"]), derived_id(&["a", "b"]));
        assert_ne!(derived_id(&["a", "b"]), derived_id(&["ab"]));
        assert_ne!(derived_id(&["a", "bc"]), derived_id(&["ab", "c"]));
    }
}
