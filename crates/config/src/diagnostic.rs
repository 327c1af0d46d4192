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

/// Turns a serde error into a diagnostic without its text, which may quote a value.
pub(crate) fn shape_diagnostic(base: &str, e: &serde_path_to_error::Error<serde_json::Error>) -> Diagnostic {
    let pointer = format!("{base}{}", path_pointer(e.path()));
    let text = e.inner().to_string();
    let expected = expected(&text);
    let (code, message, remedy) = if text.starts_with("unknown field") {
        (
            "unknown_field",
            "this field is not part of configuration version 1",
            match expected {
                Some(fields) => format!("remove the field or fix its name; this object takes {fields}"),
                None => "remove the field; this object takes no fields".to_owned(),
            },
        )
    } else if text.starts_with("missing field") {
        (
            "missing_field",
            "a required field is missing here",
            "add the field (docs/configuration.md lists each object's fields)".to_owned(),
        )
    } else if text.starts_with("invalid type") {
        (
            "invalid_type",
            "this value has the wrong JSON type",
            match expected {
                Some(wanted) => format!("give {wanted} here (docs/configuration.md lists each field's type)"),
                None => "give the type docs/configuration.md lists for this field".to_owned(),
            },
        )
    } else {
        (
            "invalid_value",
            "this value is not accepted",
            match expected {
                Some(wanted) => format!("give {wanted} here"),
                None => "check the value against docs/configuration.md".to_owned(),
            },
        )
    };
    // A missing or unknown field is reported on its object; name the field, which is a key, not a value.
    let message = match field_name(&text) {
        Some(field) => format!("{message}: `{field}`"),
        None => message.to_owned(),
    };
    Diagnostic::error(pointer, code, message, &remedy)
}

/// A serde path as a JSON pointer (`/items/1`, where serde writes `items[1]`).
pub fn path_pointer(path: &serde_path_to_error::Path) -> String {
    path.iter()
        .fold(String::new(), |p, seg| push_pointer(&p, &segment(seg)))
}

/// A path segment as a JSON pointer writes it: an array index bare (serde writes `[0]`).
fn segment(seg: &serde_path_to_error::Segment) -> String {
    match seg {
        serde_path_to_error::Segment::Seq { index } => index.to_string(),
        other => other.to_string(),
    }
}

/// What serde says it expected, which names types and fields, never the value given; a struct is
/// an object to whoever writes the file.
fn expected(serde_text: &str) -> Option<String> {
    let (_, wanted) = serde_text.split_once(", expected ")?;
    let wanted = wanted.split(" at line ").next().unwrap_or(wanted);
    let plain = match wanted {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number (0 or more)",
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        _ if wanted.starts_with("struct ") => "an object",
        _ => wanted,
    };
    Some(plain.to_owned())
}

fn field_name(serde_text: &str) -> Option<&str> {
    if !(serde_text.starts_with("unknown field") || serde_text.starts_with("missing field")) {
        return None;
    }
    serde_text.split('`').nth(1)
}
