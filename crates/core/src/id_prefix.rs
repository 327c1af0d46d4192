//! Ids abbreviated to a unique prefix, as git abbreviates commits: the operator types the first
//! few characters of a Work's, an execution's, an event's or an approval's id, and the host answers
//! the one id that starts with them.

use crate::{ErrorCode, Refusal};

/// The fewest characters a prefix may have: shorter ones match too much to be worth a lookup.
pub const MIN_PREFIX: usize = 4;
/// The length of a full id (a UUID in its hyphenated form).
pub const FULL_ID: usize = 36;
/// How many of an ambiguous prefix's matches the refusal names.
pub const SHOWN_MATCHES: usize = 5;

/// The kinds of record whose ids may be abbreviated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Work,
    Execution,
    Event,
    Approval,
}

impl IdKind {
    pub const ALL: [IdKind; 4] = [IdKind::Work, IdKind::Execution, IdKind::Event, IdKind::Approval];

    /// The kind's name on the wire (`?kind=`).
    pub fn as_str(self) -> &'static str {
        match self {
            IdKind::Work => "work",
            IdKind::Execution => "execution",
            IdKind::Event => "event",
            IdKind::Approval => "approval",
        }
    }

    pub fn parse(text: &str) -> Option<IdKind> {
        IdKind::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// Whether `text` has the shape of a full id, so it needs no lookup.
pub fn is_full_id(text: &str) -> bool {
    text.len() == FULL_ID && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// Whether `text` could abbreviate an id: what [`parse_prefix`] accepts.
pub fn is_prefix(text: &str) -> bool {
    (MIN_PREFIX..=FULL_ID).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The prefix to look up: at least [`MIN_PREFIX`] and at most [`FULL_ID`] hexadecimal digits and
/// hyphens, in lower case (as ids are written).
pub fn parse_prefix(text: &str) -> Result<String, Refusal> {
    match is_prefix(text) {
        true => Ok(text.to_ascii_lowercase()),
        false => Err(Refusal::invalid_input(format!(
            "an id prefix is {MIN_PREFIX} to {FULL_ID} hexadecimal digits and hyphens"
        ))),
    }
}

/// The one id among `matches` (the ids of `kind` starting with `prefix`, at most
/// [`SHOWN_MATCHES`] + 1 of them), or why there is none.
pub fn resolve(kind: IdKind, prefix: &str, mut matches: Vec<String>) -> Result<String, Refusal> {
    match matches.len() {
        0 => Err(Refusal::not_found(&format!("{} {prefix}", noun(kind)))),
        1 => Ok(matches.remove(0)),
        n => {
            let more = n > SHOWN_MATCHES;
            matches.truncate(SHOWN_MATCHES);
            let count = if more {
                format!("more than {SHOWN_MATCHES}")
            } else {
                n.to_string()
            };
            Err(Refusal::new(
                ErrorCode::AmbiguousId,
                format!("{count} {} ids start with {prefix}", kind.as_str()),
            )
            .with_remedy("give more of the id's characters")
            .with_field("matches", matches.into()))
        }
    }
}

fn noun(kind: IdKind) -> &'static str {
    match kind {
        IdKind::Work => "Work",
        other => other.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0193ab12-3456-7890-abcd-ef0123456789";

    #[test]
    fn prefixes_are_four_to_thirty_six_hex_digits_and_hyphens() {
        for good in ["0193", "0193AB12-", ID] {
            assert!(parse_prefix(good).is_ok(), "{good}");
        }
        assert_eq!(parse_prefix("0193AB").unwrap(), "0193ab");
        let too_long = format!("{ID}0");
        for bad in ["", "019", "0193_", "01%3", "0193 ab", "zzzz", too_long.as_str()] {
            assert_eq!(parse_prefix(bad).unwrap_err().code, ErrorCode::InvalidInput, "{bad}");
        }
    }

    #[test]
    fn one_match_is_the_id_none_is_not_found_several_are_ambiguous() {
        assert_eq!(resolve(IdKind::Work, "0193", vec![ID.into()]).unwrap(), ID);
        let none = resolve(IdKind::Work, "ffff", vec![]).unwrap_err();
        assert_eq!(
            (none.code, none.message.as_str()),
            (ErrorCode::NotFound, "Work ffff not found")
        );
        let two = resolve(IdKind::Event, "0193", vec!["0193a".into(), "0193b".into()]).unwrap_err();
        assert_eq!(two.code, ErrorCode::AmbiguousId);
        assert_eq!(two.message, "2 event ids start with 0193");
        let many: Vec<String> = (0..=SHOWN_MATCHES).map(|n| format!("0193{n}")).collect();
        let many = resolve(IdKind::Event, "0193", many).unwrap_err();
        assert!(many.message.starts_with("more than 5"), "{}", many.message);
    }

    #[test]
    fn only_a_full_id_skips_the_lookup() {
        assert!(is_full_id(ID));
        assert!(!is_full_id(&ID[..35]));
        assert!(!is_full_id("log:0193ab12-3456-7890-abcd-ef01234567"));
    }

    #[test]
    fn kinds_read_back_from_their_wire_names() {
        for kind in IdKind::ALL {
            assert_eq!(IdKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(IdKind::parse("token"), None);
    }
}
