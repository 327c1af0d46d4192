//! Reading a typed value with every independent shape diagnostic: serde stops at the first error,
//! so after each one the offending value is taken out and the rest is read again. Two unknown
//! fields, or two wrong types, give two diagnostics, in deterministic order, each at its pointer in
//! the text as written.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diagnostic::{shape_diagnostic, Diagnostic};

/// More than this many shape errors in one file are not worth reading on for.
const MAX_SHAPE_DIAGNOSTICS: usize = 64;

/// Deserializes `value`, or answers every shape diagnostic found (pointers prefixed with `base`).
pub(crate) fn typed<T: DeserializeOwned>(base: &str, value: Value) -> Result<T, Vec<Diagnostic>> {
    let mut reading = Reading {
        value,
        found: Vec::new(),
        taken: Vec::new(),
        shifted: Vec::new(),
    };
    for _ in 0..MAX_SHAPE_DIAGNOSTICS {
        let error = match serde_path_to_error::deserialize(reading.value.clone()) {
            Ok(typed) if reading.found.is_empty() => return Ok(typed),
            Ok(_) => break,
            Err(e) => shape_diagnostic("", &e),
        };
        if !reading.take_out(error) {
            break;
        }
    }
    Err(reading
        .found
        .into_iter()
        .map(|d| Diagnostic {
            pointer: format!("{base}{}", d.pointer),
            ..d
        })
        .collect())
}

/// A value being read again and again, less what each diagnostic took out.
struct Reading {
    value: Value,
    found: Vec<Diagnostic>,
    /// Pointers taken out, as the text wrote them: a field then "missing" there is their echo.
    taken: Vec<String>,
    /// Array elements taken out, in order: `(array pointer, index)`, to map later pointers back.
    shifted: Vec<(String, usize)>,
}

impl Reading {
    /// Records `error` (unless it only echoes an earlier one) and takes out what it is about, so the
    /// next read goes past it; `false` when nothing could be taken out.
    fn take_out(&mut self, error: Diagnostic) -> bool {
        let echo = missing_field(&error).is_some_and(|field| self.taken.contains(&self.as_written(&field)));
        // What the error is about is taken out: the value, or for a missing field the object that
        // lacks it, so the read goes on past it.
        let target = error.pointer.clone();
        if !echo {
            self.report(error);
        }
        self.remove(&target)
    }

    fn report(&mut self, mut error: Diagnostic) {
        error.pointer = self.as_written(&error.pointer);
        self.found.push(error);
    }

    /// Removes the value at `pointer` from its parent object or array.
    fn remove(&mut self, pointer: &str) -> bool {
        let Some((parent, last)) = pointer.rsplit_once('/') else {
            return false;
        };
        let key = last.replace("~1", "/").replace("~0", "~");
        let written = self.as_written(pointer);
        let removed = match self.value.pointer_mut(parent) {
            Some(Value::Object(map)) => map.remove(&key).is_some(),
            Some(Value::Array(items)) => match key.parse::<usize>() {
                Ok(i) if i < items.len() => {
                    items.remove(i);
                    self.shifted.push((parent.to_owned(), i));
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if removed {
            self.taken.push(written);
        }
        removed
    }

    /// A pointer in the value as it is now, as the text wrote it: each array element taken out
    /// before it moved the later ones down by one.
    fn as_written(&self, pointer: &str) -> String {
        let mut pointer = pointer.to_owned();
        for (array, index) in self.shifted.iter().rev() {
            let Some(rest) = pointer.strip_prefix(&format!("{array}/")) else {
                continue;
            };
            let (segment, tail) = rest.split_once('/').map_or((rest, ""), |(s, t)| (s, t));
            if let Some(i) = segment.parse::<usize>().ok().filter(|i| i >= index) {
                let tail = if tail.is_empty() {
                    String::new()
                } else {
                    format!("/{tail}")
                };
                pointer = format!("{array}/{}{tail}", i + 1);
            }
        }
        pointer
    }
}

/// For a `missing_field` diagnostic, the pointer the missing field would have.
fn missing_field(error: &Diagnostic) -> Option<String> {
    if error.code != "missing_field" {
        return None;
    }
    let field = error.message.split('`').nth(1)?;
    Some(crate::diagnostic::push_pointer(&error.pointer, field))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        #[serde(default)]
        count: u32,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        version: u32,
        #[serde(default)]
        items: Vec<Item>,
    }

    fn pointers(value: Value) -> Vec<(String, &'static str)> {
        let found = typed::<Doc>("", value).unwrap_err();
        found.into_iter().map(|d| (d.pointer, d.code)).collect()
    }

    #[test]
    fn every_unknown_field_and_wrong_type_is_its_own_diagnostic() {
        assert_eq!(
            pointers(json!({"version": "one", "extra": 1, "more": 2})),
            [
                ("/extra".to_owned(), "unknown_field"),
                ("/more".to_owned(), "unknown_field"),
                ("/version".to_owned(), "invalid_type"),
            ]
        );
    }

    #[test]
    fn a_required_field_taken_out_is_not_reported_missing_again() {
        assert_eq!(
            pointers(json!({"version": 1, "items": [{"name": 5}, {"name": "b", "count": "x"}]})),
            [
                ("/items/0/name".to_owned(), "invalid_type"),
                ("/items/1/count".to_owned(), "invalid_type"),
            ],
            "the second item keeps its index though the first was taken out"
        );
    }

    #[test]
    fn a_genuine_missing_field_after_a_taken_out_element_is_reported_where_written() {
        assert_eq!(
            pointers(json!({"version": 1, "items": [{"name": 5}, {"count": 1}]})),
            [
                ("/items/0/name".to_owned(), "invalid_type"),
                ("/items/1".to_owned(), "missing_field"),
            ]
        );
        assert_eq!(
            pointers(json!({"items": [{"count": 1}], "extra": 1})),
            [
                ("/extra".to_owned(), "unknown_field"),
                ("/items/0".to_owned(), "missing_field"),
                ("".to_owned(), "missing_field"),
            ],
            "a genuine missing field takes its object out, so the read goes on"
        );
    }

    #[test]
    fn a_missing_field_is_reported_and_a_valid_value_reads() {
        assert_eq!(pointers(json!({"items": []})), [("".to_owned(), "missing_field")]);
        assert!(typed::<Doc>("", json!({"version": 1})).is_ok());
    }
}
