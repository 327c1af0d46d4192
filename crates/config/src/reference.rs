//! Secret references: `keyring:<service>/<account>`, `file:<key>` (a key of the owner-only
//! `secrets.json`), `env:<NAME>` or `cmd:<shell command>`; and `sealed:<sha256>`, which is how a
//! generation in the store names a reference without holding its text (a daemon resolves it with
//! the references it has itself been given). This is the one parser: validation
//! refuses what it refuses and the daemon's resolver resolves what it accepts, so a configuration
//! that passes `config check` never names a reference the resolver calls malformed.

/// A parsed reference, borrowing the reference text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference<'a> {
    Keyring {
        service: &'a str,
        account: &'a str,
    },
    File(&'a str),
    Env(&'a str),
    Cmd(&'a str),
    /// The SHA-256 (lower-case hex) of a reference's text.
    Sealed(&'a str),
}

/// Why a reference was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceError {
    /// The text before the first `:` is not one of the four schemes.
    UnsupportedScheme,
    /// The scheme is known but what follows it names nothing it could resolve.
    Invalid,
}

impl<'a> Reference<'a> {
    pub fn parse(reference: &'a str) -> Result<Reference<'a>, ReferenceError> {
        let (scheme, target) = reference.split_once(':').ok_or(ReferenceError::Invalid)?;
        let parsed = match scheme {
            "keyring" => split_keyring(target).map(|(service, account)| Reference::Keyring { service, account }),
            "file" => Some(Reference::File(target)).filter(|_| !target.is_empty()),
            "env" => Some(Reference::Env(target)).filter(|_| is_var_name(target)),
            "cmd" => Some(Reference::Cmd(target)).filter(|_| !target.trim().is_empty() && !target.contains('\0')),
            "sealed" => Some(Reference::Sealed(target)).filter(|_| is_digest(target)),
            _ => return Err(ReferenceError::UnsupportedScheme),
        };
        parsed.ok_or(ReferenceError::Invalid)
    }

    pub fn scheme(&self) -> &'static str {
        match self {
            Reference::Keyring { .. } => "keyring",
            Reference::File(_) => "file",
            Reference::Env(_) => "env",
            Reference::Cmd(_) => "cmd",
            Reference::Sealed(_) => "sealed",
        }
    }
}

/// A reference as the store keeps it: `sealed:` and the SHA-256 of its text, which names it
/// without revealing it. A sealed reference stays as it is.
pub fn seal(reference: &str) -> String {
    match Reference::parse(reference) {
        Ok(Reference::Sealed(_)) => reference.to_owned(),
        _ => format!("sealed:{}", conduit_core::canonical::sha256_hex(reference.as_bytes())),
    }
}

fn is_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A portable variable name: a letter or `_`, then letters, digits or `_`.
pub fn is_var_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits `<service>/<account>` at the first `/`; both parts must be non-empty.
fn split_keyring(target: &str) -> Option<(&str, &str)> {
    target
        .split_once('/')
        .filter(|(service, account)| !service.is_empty() && !account.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_scheme() {
        let sealed = seal("env:GITHUB_TOKEN");
        let keyring = Reference::Keyring {
            service: "open-conduit",
            account: "github",
        };
        let rows = [
            ("keyring:open-conduit/github", keyring),
            (
                "keyring:svc/a/b",
                Reference::Keyring {
                    service: "svc",
                    account: "a/b",
                },
            ),
            ("file:github token", Reference::File("github token")),
            ("env:GITHUB_TOKEN", Reference::Env("GITHUB_TOKEN")),
            ("env:_x1", Reference::Env("_x1")),
            ("cmd:pass show x:y", Reference::Cmd("pass show x:y")),
            (&sealed, Reference::Sealed(&sealed[7..])),
        ];
        for (text, expected) in rows {
            assert_eq!(Reference::parse(text), Ok(expected), "{text:?}");
        }
        assert_eq!(keyring.scheme(), "keyring");
    }

    #[test]
    fn refuses_malformed_references() {
        let upper = format!("sealed:{}", "A".repeat(64));
        let invalid = [
            "",
            "plain",
            "keyring:",
            "keyring:svc",
            "keyring:/acct",
            "keyring:svc/",
            "file:",
            "env:",
            "env:1BAD",
            "env:A-B",
            "env:A B",
            "env:A=B",
            "cmd:",
            "cmd:  ",
            "cmd:a\0b",
            "sealed:",
            "sealed:abc",
            upper.as_str(),
        ];
        for reference in invalid {
            assert_eq!(
                Reference::parse(reference),
                Err(ReferenceError::Invalid),
                "{reference:?}"
            );
        }
        for reference in ["vault:x", "KEYRING:a/b", "https://example.test", ":x"] {
            assert_eq!(
                Reference::parse(reference),
                Err(ReferenceError::UnsupportedScheme),
                "{reference:?}"
            );
        }
    }

    #[test]
    fn sealing_names_a_reference_by_its_digest_and_keeps_a_sealed_one() {
        let sealed = seal("cmd:pass show github");
        assert!(sealed.starts_with("sealed:") && !sealed.contains("pass"));
        assert_eq!(seal(&sealed), sealed);
        assert_ne!(seal("cmd:pass show gitlab"), sealed);
    }
}
