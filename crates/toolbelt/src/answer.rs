//! A call's answer: a JSON value, or JSON text written once where building a value tree first (and
//! writing it out again) was most of the work (`read_context`'s Work and input events).

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// An operation's output, or a call's answer.
#[derive(Debug, Clone)]
pub enum Answer {
    Tree(Value),
    Text(Box<RawValue>),
}

impl Answer {
    /// Writes `value` as JSON text now.
    pub fn text(value: &impl Serialize) -> serde_json::Result<Answer> {
        serde_json::value::to_raw_value(value).map(Answer::Text)
    }

    /// The answer as a value tree (read again from its text, when it has one: which fails for
    /// text nested deeper than the reader's limit).
    pub fn into_value(self) -> serde_json::Result<Value> {
        match self {
            Answer::Tree(value) => Ok(value),
            Answer::Text(text) => serde_json::from_str(text.get()),
        }
    }

    /// A call's answer: its operation and the operation's output, moved in (`json!` would copy
    /// the output).
    pub fn of_call(operation: &str, output: Answer) -> serde_json::Result<Answer> {
        match output {
            Answer::Tree(output) => {
                let mut answer = serde_json::Map::new();
                answer.insert("operation".to_owned(), Value::String(operation.to_owned()));
                answer.insert("output".to_owned(), output);
                Ok(Answer::Tree(Value::Object(answer)))
            }
            Answer::Text(output) => Answer::text(&CallText {
                operation,
                output: &output,
            }),
        }
    }
}

impl From<Value> for Answer {
    fn from(value: Value) -> Answer {
        Answer::Tree(value)
    }
}

impl Serialize for Answer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Answer::Tree(value) => value.serialize(serializer),
            Answer::Text(text) => text.serialize(serializer),
        }
    }
}

/// A call's answer around an output already written (its two keys in the order a value tree sorts
/// them).
#[derive(Serialize)]
struct CallText<'a> {
    operation: &'a str,
    output: &'a RawValue,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An answer written as text reads back as the value it stands for, wrapped as a call's.
    #[test]
    fn a_text_answer_is_the_value_it_was_written_from() {
        let output = json!({"b": [1, "x"], "a": {"c": null}});
        let tree = Answer::of_call("read_context", Answer::Tree(output.clone()))
            .unwrap()
            .into_value()
            .unwrap();
        let text = Answer::of_call("read_context", Answer::text(&output).unwrap()).unwrap();
        assert!(matches!(text, Answer::Text(_)));
        assert_eq!(text.into_value().unwrap(), tree);
        assert_eq!(tree, json!({"operation": "read_context", "output": output}));
    }
}
