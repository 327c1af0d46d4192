//! The layouts every rendering shares: tables whose columns are fields picked by JSON pointer, and
//! labelled lines.

use serde_json::Value;

use conduit_core::id_prefix::is_full_id;

use super::terminal::{self, Style};
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

/// A list of records whose own ids (`/id`) the CLI takes back abbreviated (Work, executions,
/// events, approvals), as a table.
pub(super) fn record_list(answer: &Value, columns: &[(&str, &str)]) -> String {
    record_table(columns, items(answer).iter().map(|item| row(item, columns)))
}

/// One item's cells: a field per column.
pub(super) fn row(item: &Value, columns: &[(&str, &str)]) -> Vec<String> {
    columns.iter().map(|(_, pointer)| field(item, pointer)).collect()
}

/// A header line and one line per row, columns left-aligned and two spaces apart; on a terminal,
/// fitted to its width and coloured (see [`terminal`]).
pub(super) fn table(columns: &[(&str, &str)], rows: impl Iterator<Item = Vec<String>>) -> String {
    table_in(terminal::style(), columns, rows, false)
}

/// [`table`] for records whose own ids the CLI takes back abbreviated (see [`record_list`]).
pub(super) fn record_table(columns: &[(&str, &str)], rows: impl Iterator<Item = Vec<String>>) -> String {
    table_in(terminal::style(), columns, rows, true)
}

/// The fields that name a record the CLI resolves an abbreviation of (besides a record's own `/id`).
const REFERENCES: [&str; 5] = [
    "/work_id",
    "/execution_id",
    "/causation/parent",
    "/parent_work",
    "/latest_execution",
];

fn table_in(style: Style, columns: &[(&str, &str)], rows: impl Iterator<Item = Vec<String>>, own_ids: bool) -> String {
    let header: Vec<String> = columns.iter().map(|(title, _)| (*title).to_owned()).collect();
    let mut rows: Vec<Vec<String>> = std::iter::once(header).chain(rows).collect();
    let mut kept_whole = vec![false; columns.len()];
    for (column, (_, pointer)) in columns.iter().enumerate() {
        if REFERENCES.contains(pointer) || (own_ids && *pointer == "/id") {
            kept_whole[column] =
                abbreviate_ids(rows.iter_mut().skip(1).filter_map(|row| row.get_mut(column)).collect());
        }
    }
    let mut widths = vec![0; columns.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    if let Some(room) = style.width {
        // A shortened id is never cut further: what is shown can be typed back.
        terminal::fit(&mut widths, &kept_whole, room);
    }
    let lines: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(n, row)| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(at, (cell, width))| {
                    // The last cell is not padded: a line ends where its text does.
                    let width = if at + 1 == row.len() { 0 } else { *width };
                    let padded = format!("{:<width$}", terminal::cut(cell, widths[at]));
                    match style.colour {
                        true => terminal::paint(padded, cell, n == 0),
                        false => padded,
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect();
    lines.join("\n")
}

/// Full ids shortened as a table column of them is (see [`abbreviate_ids`]).
pub fn short_ids(mut ids: Vec<String>) -> Vec<String> {
    abbreviate_ids(ids.iter_mut().collect());
    ids
}

/// The fewest characters a table shows of an id.
const SHORT_ID: usize = 8;

/// The fewest characters shown of a time-ordered id (UUIDv7): its whole millisecond timestamp
/// and the random digits after the version, so an id made by another daemon in the same
/// millisecond is told apart too.
const SHORT_TIME_ORDERED_ID: usize = 18;

/// A column of full ids (or `-`) shortened to the fewest leading characters that tell each apart
/// from the others shown, and at least [`SHORT_ID`] ([`SHORT_TIME_ORDERED_ID`] for a time-ordered
/// one): any unique prefix is accepted where an id is taken, so what the table shows can be typed
/// back. Answers whether it shortened the column.
fn abbreviate_ids(mut cells: Vec<&mut String>) -> bool {
    cells.retain(|cell| cell.as_str() != "-");
    if cells.is_empty() || !cells.iter().all(|cell| is_full_id(cell)) {
        return false;
    }
    let mut sorted: Vec<String> = cells.iter().map(|cell| cell.to_string()).collect();
    sorted.sort();
    sorted.dedup();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    for cell in cells {
        let at = sorted.partition_point(|id| id.as_str() < cell.as_str());
        let before = at.checked_sub(1).map_or(0, |i| common(&sorted[i], cell));
        let after = sorted.get(at + 1).map_or(0, |next| common(next, cell));
        let shortest = if cell.as_bytes().get(14) == Some(&b'7') {
            SHORT_TIME_ORDERED_ID
        } else {
            SHORT_ID
        };
        cell.truncate((before.max(after) + 1).clamp(shortest, cell.len()));
    }
    true
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
    fn a_column_of_ids_shows_the_fewest_characters_that_tell_them_apart() {
        let a = "0193ab12-3456-7abc-8def-0123456789ab";
        let b = "0193ab12-3456-7abc-8dff-0123456789ab";
        let c = "0193cd00-0000-8000-8000-000000000000"; // random (v8): 8 characters do
        let columns = [("id", "/id"), ("name", "/name")];
        let rows = [a, b, c, a].map(|id| vec![id.to_owned(), id.to_owned() + "x"]);
        let whole = table(&columns, rows.clone().into_iter());
        assert!(
            whole.contains(a),
            "a table of records not taken back keeps its ids whole"
        );
        let shown = record_table(&columns, rows.into_iter());
        let firsts: Vec<&str> = shown
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(
            firsts,
            [
                "0193ab12-3456-7abc-8de",
                "0193ab12-3456-7abc-8df",
                "0193cd00",
                "0193ab12-3456-7abc-8de"
            ]
        );
        assert!(
            shown.lines().nth(1).unwrap().ends_with("abx"),
            "a column that is not ids is kept whole"
        );
        assert_eq!(
            short_ids(vec![a.to_owned()]),
            [&a[..18]],
            "a time-ordered id keeps its timestamp and more"
        );
    }

    #[test]
    fn on_a_narrow_colour_terminal_a_table_fits_and_colours_its_header_and_states() {
        let columns = [("ID", "/id"), ("STATE", "/state"), ("SUMMARY", "/summary")];
        let rows = [vec!["w1".to_owned(), "failed".to_owned(), "x".repeat(80)]];
        let style = Style {
            width: Some(40),
            colour: true,
            terminal: true,
        };
        let shown = table_in(style, &columns, rows.clone().into_iter(), false);
        assert!(shown.contains("\u{1b}[1mID"), "{shown}");
        assert!(shown.contains("\u{1b}[31mfailed"), "{shown}");
        let plain = table_in(
            Style {
                width: Some(40),
                colour: false,
                terminal: true,
            },
            &columns,
            rows.clone().into_iter(),
            false,
        );
        assert!(plain.lines().all(|line| line.chars().count() <= 40), "{plain}");
        assert!(plain.ends_with('…') && !plain.contains('\u{1b}'), "{plain}");
        let whole = table_in(Style::default(), &columns, rows.into_iter(), false);
        assert!(whole.ends_with(&"x".repeat(80)), "not on a terminal: whole and plain");
    }

    #[test]
    fn labelled_values_start_one_space_past_the_longest_label() {
        let lines = [("id", "w1".to_owned()), ("binding", "shell".to_owned())];
        assert_eq!(labelled(&lines), "id:      w1\nbinding: shell");
    }
}
