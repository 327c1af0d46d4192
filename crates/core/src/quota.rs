//! A Work's share of the store. Every event on a Work's log and every replay record of its calls is
//! charged to the Work as it is written; once the charges reach `limits.work_store_bytes`, the
//! Work's calls that would write more are refused, while it can still end or park.

use crate::{ErrorCode, Refusal};

/// What a record costs beyond its JSON text: its ids, type, key, timestamps and index entries.
pub const ROW_BYTES: u64 = 256;

/// The charge of a record whose JSON text (an event's data, a replay record's answer) is
/// `text_bytes` long.
pub fn charge(text_bytes: usize) -> u64 {
    (text_bytes as u64).saturating_add(ROW_BYTES)
}

/// Whether a Work that has been charged `stored` bytes may make a call to `operation` under
/// `quota`. Declaring an outcome or a wait is always allowed, so a Work past its quota can finish.
pub fn check(stored: u64, quota: u64, operation: &str) -> Result<(), Refusal> {
    if stored < quota || matches!(operation, "declare_outcome" | "wait") {
        return Ok(());
    }
    Err(Refusal::new(
        ErrorCode::QuotaExceeded,
        format!("this Work has written its {quota} bytes of events and replay records"),
    )
    .with_remedy("declare an outcome, and do the rest in new Work; or raise limits.work_store_bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_stop_at_the_quota_but_a_work_can_still_end_or_park() {
        assert!(check(999, 1000, "emit").is_ok());
        let refused = check(1000, 1000, "emit").unwrap_err();
        assert_eq!(refused.code, ErrorCode::QuotaExceeded);
        assert!(check(5000, 1000, "github.issue.view").is_err());
        for ending in ["declare_outcome", "wait"] {
            assert!(check(5000, 1000, ending).is_ok(), "{ending}");
        }
    }

    #[test]
    fn a_record_costs_its_text_and_a_row() {
        assert_eq!(charge(0), ROW_BYTES);
        assert_eq!(charge(1000), 1000 + ROW_BYTES);
        assert_eq!(charge(usize::MAX), u64::MAX);
    }
}
