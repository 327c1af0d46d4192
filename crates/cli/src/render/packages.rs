//! Extension packages: the installed ones, one package, and an install or a removal.

use serde_json::Value;

use super::layout::{items, joined, labelled, row, table};
use crate::text::field;

const PACKAGE_COLUMNS: [(&str, &str); 4] = [
    ("NAME", "/name"),
    ("VERSION", "/version"),
    ("STATUS", "/status"),
    ("REQUIRES", "/requires"),
];

pub fn package_table(answer: &Value) -> String {
    table(
        &PACKAGE_COLUMNS,
        items(answer).iter().map(|p| {
            let mut row = row(p, &PACKAGE_COLUMNS[..3]);
            row.push(joined(p, "/requires"));
            row
        }),
    )
}

/// A package: what it requires and asks for, what it provides, and whether the current grant set
/// still covers it.
pub fn package_detail(package: &Value) -> String {
    let status = match joined(package, "/unmet").as_str() {
        "-" => field(package, "/status"),
        unmet => format!(
            "{} (the grant set lacks {unmet}: see `open-conduit config set /packages/grant`)",
            field(package, "/status")
        ),
    };
    let lines = [
        ("package", field(package, "/manifest")),
        ("requires", joined(package, "/requires")),
        ("permissions", joined(package, "/permissions")),
        ("operations", joined(package, "/operations")),
        ("toolsets", joined(package, "/toolsets")),
        ("status", status),
    ];
    labelled(&lines)
}

/// An install: the package, and when its operations are served.
pub fn package_installed(package: &Value) -> String {
    format!(
        "{}\nits operations are served now: grant them (or its toolsets) to a binding to use them",
        package_detail(package)
    )
}

pub fn package_removed(answer: &Value) -> String {
    format!("removed {}@{}", field(answer, "/removed"), field(answer, "/version"))
}
