//! The resolver's refusals: a stable code and a message safe to show anyone.

/// Why a secret reference did not resolve. The code is stable; the message never carries the value,
/// the reference's text after its scheme, or a backend's own error text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum SecretError {
    #[error("the secret reference uses a scheme the resolver does not accept")]
    UnsupportedScheme,
    #[error("the secret reference is malformed")]
    InvalidReference,
    #[error("the referenced secret does not exist")]
    NotFound,
    #[error("the system keyring could not be reached")]
    KeyringUnavailable,
    #[error("the secrets file is not a regular file owned by this user with owner-only permissions")]
    FileUnsafe,
    #[error("the secrets file could not be read")]
    FileUnreadable,
    #[error("the secrets file is not a flat JSON object of string values")]
    FileInvalid,
    #[error("the referenced environment variable is not set")]
    EnvUnset,
    #[error("the secret's value is not UTF-8 text free of NUL bytes")]
    InvalidValue,
    #[error("the secret command could not run or exited unsuccessfully")]
    CmdFailed,
    #[error("the secret command did not finish within its deadline")]
    CmdTimeout,
    #[error("the secret command printed more than 64 KiB")]
    CmdOutputTooLarge,
    #[error("the secret's value is empty")]
    EmptyValue,
    #[error("the configuration names this secret's reference sealed, and this daemon was never given it")]
    ReferenceUnknown,
}

impl SecretError {
    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            SecretError::UnsupportedScheme => "unsupported_scheme",
            SecretError::InvalidReference => "invalid_reference",
            SecretError::NotFound => "not_found",
            SecretError::KeyringUnavailable => "keyring_unavailable",
            SecretError::FileUnsafe => "file_unsafe",
            SecretError::FileUnreadable => "file_unreadable",
            SecretError::FileInvalid => "file_invalid",
            SecretError::EnvUnset => "env_unset",
            SecretError::InvalidValue => "invalid_value",
            SecretError::CmdFailed => "cmd_failed",
            SecretError::CmdTimeout => "cmd_timeout",
            SecretError::CmdOutputTooLarge => "cmd_output_too_large",
            SecretError::EmptyValue => "empty_value",
            SecretError::ReferenceUnknown => "reference_unknown",
        }
    }

    /// What an operator can do about it, naming the secrets file where it is the one at fault.
    pub fn remedy_at(self, secrets_file: &std::path::Path) -> String {
        let file = secrets_file.display();
        match self {
            SecretError::FileUnsafe => format!(
                "make {file} a regular file owned by the daemon's user and readable by it alone: `chmod 600 {file}` (`open-conduit secrets set` writes it so)"
            ),
            SecretError::FileUnreadable => format!("check that the daemon's user can read {file}"),
            SecretError::FileInvalid => format!("make {file} a JSON object whose values are all strings"),
            other => other.remedy().to_owned(),
        }
    }

    /// What an operator can do about it, equally safe to show.
    pub fn remedy(self) -> &'static str {
        match self {
            SecretError::UnsupportedScheme | SecretError::InvalidReference => {
                "use `keyring:<service>/<account>`, `file:<key>`, `env:<NAME>` or `cmd:<command>`"
            }
            SecretError::NotFound => "store the secret under the name the reference gives",
            SecretError::KeyringUnavailable => {
                "check that the daemon's user reaches its keyring (the kernel keyring, the macOS Keychain, or the desktop's Secret Service in a build with the `secret-service` feature)"
            }
            SecretError::FileUnsafe => "make secrets.json a regular file owned by the daemon's user with mode 0600",
            SecretError::FileUnreadable => "check that the daemon's user can read secrets.json",
            SecretError::FileInvalid => "make secrets.json a JSON object whose values are all strings",
            SecretError::EnvUnset => "set the variable in the daemon's environment",
            SecretError::InvalidValue | SecretError::EmptyValue => "store a non-empty UTF-8 value",
            SecretError::CmdFailed => "run the command by hand and make it exit 0",
            SecretError::CmdTimeout => "make the command finish within 10 seconds",
            SecretError::CmdOutputTooLarge => "make the command print only the secret",
            SecretError::ReferenceUnknown => {
                "apply the configuration that gives the reference through this daemon (`open-conduit config apply FILE`): \
                 a daemon learns references only from configuration given to it, never from the shared store"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SecretError;

    #[test]
    fn codes_are_snake_case_and_distinct() {
        let all = [
            SecretError::UnsupportedScheme,
            SecretError::InvalidReference,
            SecretError::NotFound,
            SecretError::KeyringUnavailable,
            SecretError::FileUnsafe,
            SecretError::FileUnreadable,
            SecretError::FileInvalid,
            SecretError::EnvUnset,
            SecretError::InvalidValue,
            SecretError::CmdFailed,
            SecretError::CmdTimeout,
            SecretError::CmdOutputTooLarge,
            SecretError::EmptyValue,
            SecretError::ReferenceUnknown,
        ];
        let codes: std::collections::BTreeSet<_> = all.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), all.len());
        assert!(codes
            .iter()
            .all(|c| c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_')));
    }
}
