//! `open-conduit secrets`: what was stored or removed, and the names kept (never a value).

use serde_json::Value;

use super::layout::list;
use crate::text::field;

pub fn secret_stored(answer: &Value) -> String {
    let verb = if answer["replaced"] == true {
        "replaced"
    } else {
        "stored"
    };
    format!(
        "{verb} `{}` in {}; the configuration references it as \"{}\" under \"secrets\"",
        field(answer, "/name"),
        place(answer),
        field(answer, "/reference")
    )
}

pub fn secret_table(answer: &Value) -> String {
    list(answer, &[("NAME", "/name"), ("REFERENCE", "/reference")])
}

pub fn secret_removed(answer: &Value) -> String {
    format!("removed `{}` from {}", field(answer, "/removed"), place(answer))
}

/// Where a secret is kept: the secrets file, or the keyring that took it.
fn place(answer: &Value) -> String {
    match answer.get("file") {
        Some(_) => field(answer, "/file"),
        None => field(answer, "/keyring"),
    }
}
