//! Grammars of the names the product accepts: event types, type patterns, registration names.

/// Event families the host alone may emit.
pub const RESERVED_FAMILIES: [&str; 4] = ["core", "agent", "tool", "toolbelt"];

/// The host's builtin toolbelt operations; they belong to no registration and pass no gate.
pub const BUILTIN_OPERATIONS: [&str; 5] = ["create_work", "declare_outcome", "emit", "read_context", "wait"];

/// The builtins that declare, ending the segment's authority: never made inside a tool session.
pub const DECLARING_OPERATIONS: [&str; 2] = ["wait", "declare_outcome"];

/// The host's toolsets of builtins, granted as `@core.worker`.
pub const BUILTIN_TOOLSETS: [(&str, &[&str]); 1] = [("core.worker", &BUILTIN_OPERATIONS)];

const MAX_TYPE_LEN: usize = 128;

/// The longest correlation key, request id or Idempotency-Key, in bytes.
pub const MAX_KEY_BYTES: usize = 200;

/// A correlation key, a request id or an Idempotency-Key: 1 to 200 bytes with no control character.
/// Each is stored (and indexed) as given, so its size is bounded where it enters.
pub fn is_key(text: &str) -> bool {
    !text.is_empty() && text.len() <= MAX_KEY_BYTES && !text.chars().any(char::is_control)
}

/// The longest operation name a call may give, in bytes: a call is audited with the name it gave,
/// declared or not.
pub const MAX_OPERATION_BYTES: usize = 128;

/// Text a call gives as an operation name: 1 to 128 bytes with no control character. (Whether such
/// an operation is declared is the checks' question; this only bounds what the audit keeps.)
pub fn is_operation_text(text: &str) -> bool {
    !text.is_empty() && text.len() <= MAX_OPERATION_BYTES && !text.chars().any(char::is_control)
}

/// An event type is namespaced: two or more dot-separated segments, each a letter followed by letters,
/// digits, `_` or `-` (`demo.hello`, `agent.toolCalled`).
pub fn is_event_type(text: &str) -> bool {
    text.len() <= MAX_TYPE_LEN && text.split('.').count() >= 2 && text.split('.').all(is_segment)
}

fn is_segment(seg: &str) -> bool {
    let mut chars = seg.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The family of an event type: its first segment.
pub fn family(event_type: &str) -> &str {
    event_type.split('.').next().unwrap_or(event_type)
}

pub fn is_reserved_type(event_type: &str) -> bool {
    RESERVED_FAMILIES.contains(&family(event_type))
}

/// A type pattern is an event type, a family wildcard `demo.*` (any type under `demo.`), or `*`.
pub fn is_type_pattern(pattern: &str) -> bool {
    match pattern.strip_suffix(".*") {
        _ if pattern == "*" => true,
        Some(prefix) => prefix.split('.').all(is_segment),
        None => is_event_type(pattern),
    }
}

pub fn type_matches(pattern: &str, event_type: &str) -> bool {
    match pattern.strip_suffix(".*") {
        _ if pattern == "*" => true,
        Some(prefix) => event_type
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.')),
        None => pattern == event_type,
    }
}

/// A registration (extension or package) name: a lower-case letter, then lower-case letters, digits,
/// `-` or `_`, and no dot, so two namespaces never nest.
pub fn is_registration_name(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Key namespaces the host itself uses (`work:<id>`, ...): no registration may be named after one,
/// or its waits would count another Work's own key as its namespace's.
pub const HOST_KEY_NAMESPACES: [&str; 3] = ["work", "core", "execution"];

/// A name an extension or package may register under: a registration name that is not one of the
/// host's key namespaces.
pub fn is_extension_name(text: &str) -> bool {
    is_registration_name(text) && !HOST_KEY_NAMESPACES.contains(&text)
}

/// A capability an operation serves (`git.credential`): two or more dotted segments, each a
/// registration name.
pub fn is_capability_name(name: &str) -> bool {
    name.split('.').count() >= 2 && name.split('.').all(is_registration_name)
}

/// The correlation key every Work owns.
pub fn work_key(work_id: &str) -> String {
    format!("work:{work_id}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_extension_is_never_named_after_a_host_key_namespace() {
        for (name, ok) in [
            ("github", true),
            ("work", false),
            ("core", false),
            ("execution", false),
            ("works", true),
        ] {
            assert_eq!(is_extension_name(name), ok, "{name}");
        }
    }

    use super::*;

    #[test]
    fn event_type_grammar() {
        for ok in ["demo.hello", "agent.toolCalled", "a.b.c", "x-1.y_2"] {
            assert!(is_event_type(ok), "{ok}");
        }
        for bad in [
            "demo",
            "",
            "demo.",
            ".demo",
            "1demo.x",
            "demo..x",
            "demo.h llo",
            "demo.*",
        ] {
            assert!(!is_event_type(bad), "{bad}");
        }
        assert!(!is_event_type(&format!("a.{}", "b".repeat(MAX_TYPE_LEN))));
    }

    #[test]
    fn patterns_match_whole_segments() {
        assert!(type_matches("demo.*", "demo.hello"));
        assert!(type_matches("demo.*", "demo.a.b"));
        assert!(!type_matches("demo.*", "demonstration.hello"));
        assert!(!type_matches("demo.*", "demo"));
        assert!(type_matches("*", "anything.at_all"));
        assert!(type_matches("demo.hello", "demo.hello"));
        assert!(!type_matches("demo.hello", "demo.hello2"));
        assert!(is_type_pattern("demo.*") && is_type_pattern("*") && !is_type_pattern("demo*"));
    }

    #[test]
    fn reserved_families_are_the_hosts() {
        for t in ["core.work.created", "agent.toolCalled", "tool.x", "toolbelt.called"] {
            assert!(is_reserved_type(t), "{t}");
        }
        assert!(!is_reserved_type("corey.x"));
    }

    #[test]
    fn registration_names_never_nest() {
        assert!(is_registration_name("github"));
        assert!(is_registration_name("my-ext_2"));
        for bad in ["", "GitHub", "git.hub", "1x", "-x"] {
            assert!(!is_registration_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_key_is_one_to_two_hundred_bytes_of_text() {
        assert!(is_key("work:01h") && is_key(&"k".repeat(MAX_KEY_BYTES)));
        for bad in [
            String::new(),
            "k".repeat(MAX_KEY_BYTES + 1),
            "a\nb".into(),
            "tab\there".into(),
        ] {
            assert!(!is_key(&bad), "{bad:?}");
        }
    }
}
