//! How tables print on a terminal: fitted to its width, with a bold header and coloured states.
//! Printed anywhere else (a pipe, a file), or with `NO_COLOR` set, they stay plain and whole.
//!
//! The style is set once, by the binary, from what stdout is; every renderer reads it here
//! rather than taking it as an argument, so the renderers keep one signature (`&Value -> String`).
//! Unset (as in tests), tables are plain and unbounded.

use std::sync::OnceLock;

/// What the output is printed on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// The terminal's width in columns; `None` when stdout is not a terminal.
    pub width: Option<usize>,
    /// Whether to colour: stdout is a terminal and `NO_COLOR` is unset.
    pub colour: bool,
    /// Whether stdout is a terminal.
    pub terminal: bool,
}

static STYLE: OnceLock<Style> = OnceLock::new();

/// Sets how this process's tables print; only the first call counts.
pub fn set_style(style: Style) {
    let _ = STYLE.set(style);
}

pub(super) fn style() -> Style {
    STYLE.get().copied().unwrap_or_default()
}

/// `text` as printed: escaped where it could drive a terminal, when it is printed on one.
pub(super) fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    match style().terminal {
        true => crate::text::printable(text),
        false => std::borrow::Cow::Borrowed(text),
    }
}

/// Columns no narrower than this are not cut to fit.
const NARROWEST: usize = 8;

/// `widths` narrowed, widest first, until the columns and their two-space gaps fit in `room`
/// (or every column that may be cut is down to [`NARROWEST`]); a column `kept` is never cut.
pub(super) fn fit(widths: &mut [usize], kept: &[bool], room: usize) {
    let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
    while total(widths) > room {
        let cuttable = widths
            .iter_mut()
            .zip(kept)
            .filter(|(w, kept)| **w > NARROWEST && !**kept);
        let Some((widest, _)) = cuttable.max_by_key(|(w, _)| **w) else {
            return;
        };
        *widest -= 1;
    }
}

/// A cell cut to `width` characters, its last one `…` when cut.
pub(super) fn cut(cell: &str, width: usize) -> String {
    match cell.char_indices().nth(width.saturating_sub(1)) {
        Some((at, _)) if cell.chars().count() > width => format!("{}…", &cell[..at]),
        _ => cell.to_owned(),
    }
}

/// A padded cell in its colour: the header bold, a state by how it went.
pub(super) fn paint(padded: String, cell: &str, header: bool) -> String {
    let code = match cell {
        _ if header => "1",
        "succeeded" | "ok" | "approved" | "used" | "installed" | "true" => "32",
        "failed" | "denied" | "expired" | "error" | "lost" | "refused" => "31",
        "running" | "waiting" | "pending" | "ready" | "warn" | "held" => "33",
        _ => return padded,
    };
    format!("\u{1b}[{code}m{padded}\u{1b}[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widest_columns_give_way_first_and_none_below_the_narrowest() {
        let mut widths = [4, 30, 20];
        fit(&mut widths, &[false; 3], 40);
        assert_eq!(widths, [4, 16, 16], "4 + 16 + 16 and two gaps of 2 make 40");
        let mut tight = [10, 12];
        fit(&mut tight, &[false; 2], 5);
        assert_eq!(tight, [8, 8], "no column is cut below 8");
        let mut ids = [18, 30];
        fit(&mut ids, &[true, false], 30);
        assert_eq!(ids, [18, 10], "a shortened id column is kept whole");
    }

    #[test]
    fn a_cut_cell_ends_in_an_ellipsis_and_a_short_one_is_kept() {
        assert_eq!(cut("abcdefghij", 5), "abcd…");
        assert_eq!(cut("abcde", 5), "abcde");
        assert_eq!(cut("é…ü", 2), "é…");
    }

    #[test]
    fn only_the_header_and_known_states_are_coloured() {
        assert_eq!(paint("ID  ".into(), "ID", true), "\u{1b}[1mID  \u{1b}[0m");
        assert_eq!(paint("failed ".into(), "failed", false), "\u{1b}[31mfailed \u{1b}[0m");
        assert_eq!(paint("demo ".into(), "demo", false), "demo ");
    }
}
