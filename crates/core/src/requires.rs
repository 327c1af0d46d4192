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

use crate::Refusal;

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

/// What is unmet under the host's current grant set: nothing on a host that does not gate.
pub fn unmet_now(requires: &[String], grant: &[String], gating: bool) -> Vec<String> {
    if gating {
        unmet(requires, grant)
    } else {
        Vec::new()
    }
}

/// What an installed package's runtime code exercises, judged at install and again at every call
/// and catalog read (the grant set may have shrunk since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// `name@version`.
    pub manifest: String,
    pub requires: Vec<String>,
}

impl Requirement {
    /// RFC 0076's refusal when the grant set does not cover the requirement, the same payload at
    /// install and at call time.
    pub fn check(&self, grant: &[String], gating: bool) -> Result<(), Refusal> {
        let unmet = unmet_now(&self.requires, grant, gating);
        if unmet.is_empty() {
            return Ok(());
        }
        let advice = format!(
            "the host's package grant set does not include {}: add it to /packages/grant (open-conduit config set) if you accept what it allows, or do without this package",
            unmet.join(", ")
        );
        Err(Refusal::requirement_unmet(unmet, self.manifest.clone(), advice))
    }
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
