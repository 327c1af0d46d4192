//! The layouts every rendering shares: tables whose columns are fields picked by JSON pointer, and
//! labelled lines.

use serde_json::Value;

use crate::text::field;

/// The `items` of a list answer.
pub(super) fn items(answer: &Value) -> &[Value] {
    answer
        .get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A list answer as a table, one row per item.
pub(super) fn list(answer: &Value, columns: &[(&str, &str)]) -> String {
    table(columns, items(answer).iter().map(|item| row(item, columns)))
}

/// One item's cells: a field per column.
pub(super) fn row(item: &Value, columns: &[(&str, &str)]) -> Vec<String> {
    columns.iter().map(|(_, pointer)| field(item, pointer)).collect()
}

/// A header line and one line per row, columns left-aligned and two spaces apart.
pub(super) fn table(columns: &[(&str, &str)], rows: impl Iterator<Item = Vec<String>>) -> String {
    let header: Vec<String> = columns.iter().map(|(title, _)| (*title).to_owned()).collect();
    let rows: Vec<Vec<String>> = std::iter::once(header).chain(rows).collect();
    let mut widths = vec![0; columns.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect();
    lines.join("\n")
}

/// One `label: value` per line, the values aligned one space past the longest label's colon.
pub(super) fn labelled(lines: &[(&str, String)]) -> String {
    let width = lines
        .iter()
        .map(|(label, _)| label.chars().count() + 2)
        .max()
        .unwrap_or_default();
    let lines: Vec<String> = lines
        .iter()
        .map(|(label, value)| format!("{:<width$}{value}", format!("{label}:")))
        .collect();
    lines.join("\n")
}

/// An array of strings joined with commas; `-` when absent or empty.
pub(super) fn joined(value: &Value, pointer: &str) -> String {
    let items: Vec<String> = match value.pointer(pointer) {
        Some(Value::Array(items)) => items.iter().map(|item| field(item, "")).collect(),
        _ => Vec::new(),
    };
    if items.is_empty() {
        "-".to_owned()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labelled_values_start_one_space_past_the_longest_label() {
        let lines = [("id", "w1".to_owned()), ("binding", "shell".to_owned())];
        assert_eq!(labelled(&lines), "id:      w1\nbinding: shell");
    }
}
