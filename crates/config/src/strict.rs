//! The first pass: read JSON into a value while refusing duplicate keys and nulls at any depth.
//!
//! serde_json keeps the last of two duplicate keys and lets `null` stand for an absent optional
//! field; both hide operator mistakes, so this pass reports every occurrence with its pointer.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::diagnostic::{push_pointer, Diagnostic};

/// Parses `bytes` as JSON, collecting a diagnostic for each duplicate key and each null.
/// Returns `Err` with a single `invalid_json` diagnostic when the text is not JSON at all.
pub fn read(bytes: &[u8]) -> Result<(Value, Vec<Diagnostic>), Diagnostic> {
    let found = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = StrictSeed {
        at: At::Root,
        found: &found,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v))
    .map_err(|e| {
        Diagnostic::error(
            "",
            "invalid_json",
            format!("the file is not valid JSON (line {}, column {})", e.line(), e.column()),
            "fix the JSON syntax at that position",
        )
    })?;
    Ok((value, found.into_inner()))
}

struct StrictSeed<'a> {
    at: At<'a>,
    found: &'a RefCell<Vec<Diagnostic>>,
}

/// Where a value is in the document: its pointer is written only for a diagnostic, so reading
/// clean JSON allocates none.
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn pointer(&self) -> String {
        match self {
            At::Root => String::new(),
            At::Key(parent, key) => push_pointer(&parent.pointer(), key),
            At::Index(parent, index) => format!("{}/{index}", parent.pointer()),
        }
    }
}

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        self.found.borrow_mut().push(Diagnostic::error(
            self.at.pointer(),
            "null_value",
            "null is not accepted; omit the field to take its default",
            "remove the field or give it a value",
        ));
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictSeed {
            at: At::Index(&self.at, items.len()),
            found: self.found,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let at = At::Key(&self.at, &key);
            let value = map.next_value_seed(StrictSeed { at, found: self.found })?;
            if object.contains_key(&key) {
                self.found.borrow_mut().push(Diagnostic::error(
                    at.pointer(),
                    "duplicate_key",
                    "this key appears more than once in its object",
                    "keep one occurrence of the key",
                ));
            } else {
                object.insert(key, value);
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<(String, &'static str)> {
        let (_, found) = read(text.as_bytes()).unwrap();
        found.into_iter().map(|d| (d.pointer, d.code)).collect()
    }

    #[test]
    fn reports_duplicates_at_any_depth() {
        assert_eq!(codes(r#"{"a":{"b":1,"b":2}}"#), vec![("/a/b".into(), "duplicate_key")]);
        assert_eq!(codes(r#"{"a":1,"a":1}"#), vec![("/a".into(), "duplicate_key")]);
    }

    #[test]
    fn reports_nulls_with_pointers() {
        assert_eq!(
            codes(r#"{"x":[1,null],"y/z":null}"#),
            vec![("/x/1".into(), "null_value"), ("/y~1z".into(), "null_value")]
        );
    }

    #[test]
    fn clean_json_reads_whole() {
        let (v, found) = read(br#"{"a":[1,"two",true]}"#).unwrap();
        assert!(found.is_empty());
        assert_eq!(v["a"][1], "two");
    }

    #[test]
    fn broken_json_is_one_diagnostic_without_text() {
        let d = read(br#"{"secret": "hunter2""#).unwrap_err();
        assert_eq!(d.code, "invalid_json");
        assert!(!d.message.contains("hunter2"));
    }
}
