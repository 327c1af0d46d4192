//! JSON values given on the command line, and request bodies with optional fields.

use serde_json::{Map, Value};

/// A clap value parser for flags such as `--input` and `--data`: invalid JSON is a usage error.
pub fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))
}

/// A JSON object of the fields that are present; absent (`None`) fields are left out.
pub fn object<const N: usize>(fields: [(&str, Option<Value>); N]) -> Value {
    let present = fields
        .into_iter()
        .filter_map(|(name, value)| Some((name.to_owned(), value?)));
    Value::Object(present.collect::<Map<_, _>>())
}

/// A JSON array of strings, or `None` when there are none (so the field is left out).
pub fn strings(items: Vec<String>) -> Option<Value> {
    (!items.is_empty()).then(|| Value::from(items))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn object_leaves_out_absent_fields() {
        let body = object([("a", Some(json!(1))), ("b", None), ("c", strings(vec![]))]);
        assert_eq!(body, json!({"a": 1}));
    }

    #[test]
    fn parse_refuses_invalid_json_with_a_clear_message() {
        assert_eq!(parse(r#"{"k": [1]}"#), Ok(json!({"k": [1]})));
        let error = parse("{oops").expect_err("invalid");
        assert!(error.starts_with("not valid JSON"), "{error}");
    }
}
