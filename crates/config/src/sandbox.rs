//! A binding's `sandbox` setting: `"off"`, or `{network, read, write}` with absolute paths outside
//! the daemon's state directory. Off validates, with the warning `sandbox_disabled`.

use conduit_core::sandbox::{path_problem, Sandbox, SandboxSpec};
use serde_json::Value;

use crate::diagnostic::Diagnostic;

/// The setting `value` states (absent: the default confinement), with every diagnostic it earns.
/// `state_dir`, when known, is the directory no path may reach into.
pub fn setting(pointer: &str, value: Option<&Value>, state_dir: Option<&str>) -> (Sandbox, Vec<Diagnostic>) {
    let base = format!("{pointer}/sandbox");
    let Some(value) = value else {
        return (Sandbox::default(), Vec::new());
    };
    if value.as_str() == Some("off") {
        let warning = Diagnostic::warning(
            base,
            "sandbox_disabled",
            "this binding's executions run unconfined: they can read the operator's token, the store and other executions' tokens",
            "remove `sandbox` to confine them, or list the paths they need under `sandbox.read` and `sandbox.write`".into(),
        );
        return (Sandbox::Off, vec![warning]);
    }
    if value.is_string() {
        let refused = Diagnostic::error(
            base,
            "invalid_value",
            "`sandbox` is \"off\" or an object {network, read, write}",
            "write \"off\", or an object such as {\"write\": [\"/srv/out\"]}",
        );
        return (Sandbox::default(), vec![refused]);
    }
    let spec: SandboxSpec = match crate::shape::typed(&base, value.clone()) {
        Ok(spec) => spec,
        Err(found) => return (Sandbox::default(), found),
    };
    let listed = spec
        .read
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, p)| (format!("{base}/read/{i}"), p))
        .chain(
            spec.write
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("{base}/write/{i}"), p)),
        );
    let found = listed
        .filter_map(|(at, path)| {
            path_problem(path, state_dir).map(|why| {
                Diagnostic::error(
                    at,
                    "invalid_sandbox_path",
                    why,
                    "give an absolute path outside the daemon's state directory",
                )
            })
        })
        .collect();
    (Sandbox::Confined(spec), found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codes(value: Value) -> Vec<(String, &'static str)> {
        setting("/b", Some(&value), Some("/state"))
            .1
            .into_iter()
            .map(|d| (d.pointer, d.code))
            .collect()
    }

    #[test]
    fn settings_and_their_diagnostics() {
        assert_eq!(setting("/b", None, None), (Sandbox::default(), vec![]));
        let (off, found) = setting("/b", Some(&json!("off")), None);
        assert_eq!(off, Sandbox::Off);
        assert_eq!(found[0].code, "sandbox_disabled");
        assert_eq!(found[0].severity, crate::Severity::Warning);
        assert_eq!(codes(json!("on")), [("/b/sandbox".to_owned(), "invalid_value")]);
        assert_eq!(
            codes(json!({"netwrok": "none"})),
            [("/b/sandbox/netwrok".to_owned(), "unknown_field")]
        );
        assert_eq!(
            codes(json!({"network": "lan"})),
            [("/b/sandbox/network".to_owned(), "invalid_value")]
        );
        assert_eq!(
            codes(json!({"read": ["/srv", "rel"], "write": ["/state/private", "/tmp/../state"]})),
            [
                ("/b/sandbox/read/1".to_owned(), "invalid_sandbox_path"),
                ("/b/sandbox/write/0".to_owned(), "invalid_sandbox_path"),
                ("/b/sandbox/write/1".to_owned(), "invalid_sandbox_path"),
            ]
        );
        assert!(codes(json!({"network": "none", "write": ["/srv/out"]})).is_empty());
    }
}
