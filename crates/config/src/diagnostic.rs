use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One finding about a configuration: where (a JSON pointer), what (a stable code), and what to do.
/// The message is written by the host and never quotes a value from the file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    pub pointer: String,
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    pub remedy: String,
}

impl Diagnostic {
    pub fn error(pointer: impl Into<String>, code: &'static str, message: impl Into<String>, remedy: &str) -> Self {
        Diagnostic {
            pointer: pointer.into(),
            code,
            severity: Severity::Error,
            message: message.into(),
            remedy: remedy.to_owned(),
        }
    }

    /// A finding that does not fail the configuration.
    pub fn warning(pointer: impl Into<String>, code: &'static str, message: impl Into<String>, remedy: String) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            remedy,
            ..Diagnostic::error(pointer, code, message, "")
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Appends a key to a JSON pointer, escaping `~` and `/` as RFC 6901 requires.
pub fn push_pointer(base: &str, key: &str) -> String {
    format!("{base}/{}", key.replace('~', "~0").replace('/', "~1"))
}
