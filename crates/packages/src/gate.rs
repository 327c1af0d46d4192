//! The install gate (RFC 0076 §A): a gating host refuses a package that requires a primitive its
//! grant set does not give, with the RFC's payload; a non-gating host installs it and shows what
//! it requires. An installed package is re-judged against every later grant set.

use conduit_core::Refusal;
use serde::{Deserialize, Serialize};

use crate::Manifest;

/// What an install was approved against: the grant set and whether the host gated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub grant: Vec<String>,
    pub gating: bool,
}

/// Whether the host installs `manifest` under `grant`.
pub fn check(manifest: &Manifest, grant: &[String], gating: bool) -> Result<Approval, Refusal> {
    manifest.requirement().check(grant, gating)?;
    Ok(Approval {
        grant: grant.to_vec(),
        gating,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(requires: &[&str]) -> Manifest {
        let text = serde_json::json!({"name": "cron", "version": "1.0.0",
            "runtime": {"language": "process", "entry": "bin/cron", "requires": requires}});
        Manifest::parse(text.to_string().as_bytes()).unwrap()
    }

    fn list(tokens: &[&str]) -> Vec<String> {
        tokens.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn a_gating_host_refuses_with_exactly_the_rfc_payload() {
        let refused = check(&manifest(&["clock", "subprocess"]), &list(&["clock"]), true).unwrap_err();
        let bytes = serde_json::to_string(&refused).unwrap();
        assert!(
            bytes.starts_with(
                r#"{"error":"pack_runtime_requirement_unmet","unmet":["subprocess"],"manifest":"cron@1.0.0","advice":""#
            ),
            "{bytes}"
        );
    }

    #[test]
    fn a_granted_or_non_gating_install_is_approved_with_its_grant() {
        let approved = check(&manifest(&["clock"]), &list(&["clock", "crypto"]), true).unwrap();
        assert_eq!(approved.grant, list(&["clock", "crypto"]));
        assert!(
            check(&manifest(&["subprocess"]), &[], false).is_ok(),
            "a non-gating host installs"
        );
        assert!(
            check(&manifest(&[]), &[], true).is_ok(),
            "no requirements, nothing to refuse"
        );
    }

    #[test]
    fn a_tightened_grant_flags_an_installed_package() {
        use conduit_core::requires::unmet_now;
        let requires = list(&["net.dns", "clock"]);
        assert!(unmet_now(&requires, &list(&["net.dns", "clock"]), true).is_empty());
        assert_eq!(unmet_now(&requires, &list(&["clock"]), true), list(&["net.dns"]));
        assert!(unmet_now(&requires, &[], false).is_empty());
    }
}
