//! RFC 0076 §A: the closed vocabulary of platform primitives a package's runtime code may exercise
//! (`runtime.requires[]`), and the install gate's rule: what a package requires that the host's
//! grant set does not give is unmet.

/// The vocabulary, version 1. A token outside it is refused (`invalid_manifest`): a host never
/// grants a primitive it has not specified.
pub const PRIMITIVES: [&str; 8] = [
    "net.dns",
    "net.outbound",
    "crypto",
    "subprocess",
    "fs.read",
    "fs.write",
    "env.read",
    "clock",
];

/// The grant set a host uses when the configuration names none: primitives that reach nothing
/// outside the package's own process (outbound HTTP goes through the host's `http.safeFetch`).
pub const DEFAULT_GRANT: [&str; 2] = ["crypto", "clock"];

pub fn is_primitive(token: &str) -> bool {
    PRIMITIVES.contains(&token)
}

/// The first token that is not in the vocabulary, or that repeats an earlier one.
pub fn invalid_token(requires: &[String]) -> Option<(usize, &str)> {
    requires
        .iter()
        .enumerate()
        .find(|(i, t)| !is_primitive(t) || requires[..*i].contains(t))
        .map(|(i, t)| (i, t.as_str()))
}

/// What `requires` needs that `grant` does not give, in the package's own order.
pub fn unmet(requires: &[String], grant: &[String]) -> Vec<String> {
    requires.iter().filter(|t| !grant.contains(t)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(tokens: &[&str]) -> Vec<String> {
        tokens.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn every_vocabulary_token_is_accepted_and_nothing_else() {
        assert_eq!(invalid_token(&list(&PRIMITIVES)), None);
        assert_eq!(invalid_token(&[]), None, "absent and empty are the same");
        for bad in ["node:dns/promises", "net", "fs", "net.outbound.http", "NET.DNS", ""] {
            assert_eq!(invalid_token(&list(&["clock", bad])), Some((1, bad)), "{bad:?}");
        }
        assert_eq!(
            invalid_token(&list(&["clock", "crypto", "clock"])),
            Some((2, "clock")),
            "duplicates"
        );
    }

    #[test]
    fn unmet_is_what_the_grant_lacks_in_the_packages_order() {
        let grant = list(&["net.dns", "clock"]);
        assert_eq!(
            unmet(&list(&["subprocess", "clock", "fs.write"]), &grant),
            list(&["subprocess", "fs.write"])
        );
        assert!(unmet(&list(&["clock"]), &grant).is_empty());
        assert!(unmet(&[], &[]).is_empty());
    }
}
