//! `open-conduit service install`: the unit written, and how to start it.

use serde_json::Value;

use crate::text::field;

/// A service unit written (or found as it would be written), and how to start it.
pub fn service_installed(answer: &Value) -> String {
    let verb = if answer["written"] == true {
        "wrote"
    } else {
        "unchanged:"
    };
    format!(
        "{verb} {}\n\n{}\nstart it now and at every login with:\n  systemctl --user daemon-reload && systemctl --user enable --now open-conduit\n\
         its log: journalctl --user -u open-conduit",
        field(answer, "/file"),
        // The unit is this program's own text, shown whole.
        answer["unit"].as_str().unwrap_or_default()
    )
}
