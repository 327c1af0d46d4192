//! Events: their table, and an event's causal chain.

use serde_json::Value;

use super::layout::{items, record_list, record_table, row};

pub(super) const EVENT_COLUMNS: [(&str, &str); 5] = [
    ("SEQ", "/sequence"),
    ("ID", "/id"),
    ("TYPE", "/type"),
    ("SOURCE", "/source"),
    ("PARENT", "/causation/parent"),
];

pub fn event_table(answer: &Value) -> String {
    record_list(answer, &EVENT_COLUMNS)
}

/// One event as a followed list prints it, before the rest are known: fixed-width columns (ids
/// are 36 characters), under the header when `header` is set.
pub fn event_line(event: &Value, header: bool) -> String {
    let spread = |c: &[String]| format!("{:<8} {:<36} {:<28} {:<14} {}", c[0], c[1], c[2], c[3], c[4]);
    let line = spread(&row(event, &EVENT_COLUMNS));
    if !header {
        return line;
    }
    let titles: Vec<String> = EVENT_COLUMNS.iter().map(|(title, _)| (*title).to_owned()).collect();
    format!("{}\n{line}", spread(&titles))
}

/// An event's causal chain, root first, each event's id indented one step deeper than its parent's.
pub fn event_chain(answer: &Value) -> String {
    let rows = items(answer).iter().enumerate().map(|(depth, event)| {
        let mut cells = row(event, &EVENT_COLUMNS);
        cells[1] = format!("{}{}", "  ".repeat(depth), cells[1]);
        cells
    });
    record_table(&EVENT_COLUMNS, rows)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn chain_indents_each_event_below_its_parent() {
        let event = |seq: u64, id: &str, parent: Value| {
            json!({"sequence": seq, "id": id, "type": "t", "source": "core.manual",
                   "causation": {"parent": parent}})
        };
        let answer = json!({"items": [event(1, "e1", Value::Null), event(4, "e4", json!("e1"))]});
        let expected = "\
SEQ  ID    TYPE  SOURCE       PARENT
1    e1    t     core.manual  -
4      e4  t     core.manual  e1";
        assert_eq!(event_chain(&answer), expected);
    }
}
