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
        field(answer, "/file"),
        field(answer, "/reference")
    )
}

pub fn secret_table(answer: &Value) -> String {
    list(answer, &[("NAME", "/name"), ("REFERENCE", "/reference")])
}

pub fn secret_removed(answer: &Value) -> String {
    format!(
        "removed `{}` from {}",
        field(answer, "/removed"),
        field(answer, "/file")
    )
}
