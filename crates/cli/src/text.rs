//! Plain text from the API's JSON, shared by `render` and `report`: a field by pointer, pretty JSON,
//! and the lines of a diagnostics list. It sits below both, so neither imports the other.

use serde_json::Value;

/// `text` safe to print on a terminal: every control character but newline, carriage return and
/// tab (escape sequences, C1 controls), and the invisible characters that reorder or hide text
/// (bidi overrides, zero-width marks), shown as `\u{..}` escapes. An agent's text (a log, an
/// input) cannot then restyle the operator's terminal, rewrite its title or clipboard, or make an
/// input read differently from what it is.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    escaped(text, |c| matches!(c, '\n' | '\r' | '\t'))
}

/// [`printable`] for one line (a table cell, a labelled value, a status line): line breaks are
/// shown escaped too, so a value cannot add lines that read as other rows.
pub fn printable_line(text: &str) -> std::borrow::Cow<'_, str> {
    escaped(text, |c| c == '\t')
}

fn escaped(text: &str, kept: impl Fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        (c.is_control() && !kept(c))
            || matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
    };
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let shown = text.chars().map(|c| match hidden(c) {
        true => c.escape_unicode().to_string(),
        false => c.to_string(),
    });
    std::borrow::Cow::Owned(shown.collect())
}

/// Pretty-printed JSON.
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The diagnostics of an answer or an envelope, one per line: pointer, code, message and remedy.
pub fn diagnostics(answer: &Value) -> String {
    let list = answer.get("diagnostics").and_then(Value::as_array);
    let line = |d: &Value| {
        let pointer = match field(d, "/pointer").as_str() {
            "-" | "" => "/".to_owned(),
            p => p.to_owned(),
        };
        let (severity, code) = (field(d, "/severity"), field(d, "/code"));
        format!(
            "  {pointer}  {severity} {code}: {} ({})",
            field(d, "/message"),
            field(d, "/remedy")
        )
    };
    list.into_iter().flatten().map(line).collect::<Vec<_>>().join("\n")
}

/// A field by JSON pointer as plain text: strings unquoted, absent or null as `-`.
pub fn field(value: &Value, pointer: &str) -> String {
    match value.pointer(pointer) {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(text)) => printable_line(text).into_owned(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_hidden_characters_are_shown_not_obeyed() {
        assert_eq!(printable("ok\tline\nnext"), "ok\tline\nnext");
        assert_eq!(printable("\u{1b}]0;pwned\u{7}red"), "\\u{1b}]0;pwned\\u{7}red");
        assert_eq!(
            printable("a\u{9b}31m"),
            "a\\u{9b}31m",
            "a C1 control sequence introducer"
        );
        assert_eq!(
            printable("rm \u{202e}fdp.exe"),
            "rm \\u{202e}fdp.exe",
            "a right-to-left override"
        );
        assert_eq!(field(&serde_json::json!({"s": "\u{1b}[2J"}), "/s"), "\\u{1b}[2J");
        assert_eq!(
            field(&serde_json::json!({"s": "a\nw2  fake row"}), "/s"),
            "a\\u{a}w2  fake row"
        );
    }
}
