//! Whether the daemon is well: its health, and the doctor's checks.

use serde_json::Value;

use crate::text::field;

/// `GET /v1/health`: `up (version V, generation G)`.
pub fn health(answer: &Value) -> String {
    format!(
        "up (version {}, generation {})",
        field(answer, "/version"),
        field(answer, "/generation")
    )
}

/// The doctor's checks, one per line, and a verdict.
pub fn doctor(answer: &Value) -> String {
    let lines = answer["checks"].as_array().into_iter().flatten().map(|c| {
        format!(
            "{:<5} {:<13} {}",
            field(c, "/status"),
            field(c, "/check"),
            field(c, "/detail")
        )
    });
    let verdict = if answer["healthy"] == Value::Bool(true) {
        "healthy"
    } else {
        "unhealthy"
    };
    lines
        .chain(std::iter::once(verdict.to_owned()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn health_names_version_and_generation() {
        let answer = json!({"status": "ok", "version": "0.1.0", "instance": "i", "generation": 3});
        assert_eq!(health(&answer), "up (version 0.1.0, generation 3)");
    }
}
