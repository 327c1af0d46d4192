//! From bytes to a validated configuration, or every independent diagnostic.

use conduit_core::canonical::{canonical_json, sha256_hex};
use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::grants::Registry;
use crate::model::Config;
use crate::snapshot::Snapshot;
use crate::{rules, shape, strict, MAX_CONFIG_BYTES};

/// Parses and validates configuration bytes against the builtins alone.
pub fn parse(bytes: &[u8]) -> Result<Snapshot, Vec<Diagnostic>> {
    parse_with(bytes, &Registry::default())
}

/// Parses and validates configuration bytes against a registry. The snapshot's generation is 0 until
/// the store assigns one.
pub fn parse_with(bytes: &[u8], registry: &Registry) -> Result<Snapshot, Vec<Diagnostic>> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(vec![Diagnostic::error(
            "",
            "too_large",
            "the configuration is larger than 1 MiB",
            "split large values out of the file",
        )]);
    }
    let (value, found) = strict::read(bytes).map_err(|d| vec![d])?;
    if !found.is_empty() {
        return Err(sorted(found));
    }
    let config: Config = shape::typed("", value.clone())?;
    let (found, effective) = rules::check(&config, registry);
    let found = sorted(found);
    if found.iter().any(Diagnostic::is_error) {
        return Err(found);
    }
    let written = canonical_json(&value);
    let sealed = canonical_json(&sealed_secrets(value));
    // Over the sealed text: the same generation has the same hash on every daemon, whether it was
    // written with its references or read from the store without them.
    let hash = sha256_hex(sealed.as_bytes());
    Ok(Snapshot::new(0, hash, (written, sealed), config, effective).with_warnings(found))
}

/// The configuration with each secret reference sealed ([`crate::reference::seal`]).
fn sealed_secrets(mut value: Value) -> Value {
    if let Some(secrets) = value.get_mut("secrets").and_then(Value::as_object_mut) {
        for reference in secrets.values_mut() {
            if let Some(text) = reference.as_str() {
                *reference = Value::String(crate::reference::seal(text));
            }
        }
    }
    value
}

fn sorted(mut found: Vec<Diagnostic>) -> Vec<Diagnostic> {
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_config_json;

    fn codes(text: &str) -> Vec<(String, &'static str)> {
        parse(text.as_bytes())
            .unwrap_err()
            .into_iter()
            .map(|d| (d.pointer, d.code))
            .collect()
    }

    fn with_scope(scope: &str) -> String {
        format!(r#"{{"version":1,"scopes":{{"s":{scope}}}}}"#)
    }

    #[test]
    fn default_config_is_valid() {
        let snap = parse(default_config_json().as_bytes()).unwrap();
        assert!(snap.authorize_operation("setup", "emit"));
        assert_eq!(snap.hash().len(), 64);
    }

    #[test]
    fn unknown_fields_are_refused_with_pointer() {
        assert_eq!(
            codes(r#"{"version":1,"extra":true}"#),
            vec![("/extra".into(), "unknown_field")]
        );
        assert_eq!(
            codes(&with_scope(r#"{"bogus":1}"#)),
            vec![("/scopes/s/bogus".into(), "unknown_field")]
        );
    }

    #[test]
    fn wrong_types_never_echo_the_value() {
        let found = parse(br#"{"version":"hunter2"}"#).unwrap_err();
        assert_eq!(found[0].code, "invalid_type");
        assert_eq!(found[0].pointer, "/version");
        assert!(!format!("{found:?}").contains("hunter2"));
    }

    #[test]
    fn binding_grant_outside_ceiling_is_widening() {
        let scope = r#"{"authorization":{"operations":["emit"]},
            "bindings":{"b":{"executor":"shell","config":{"command":["true"]},"operations":["emit","wait"]}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/operations/1".into(), "authority_widening")]
        );
    }

    #[test]
    fn unknown_operations_executors_and_bindings_are_references() {
        let scope = r#"{"authorization":{"operations":["emitt"]},
            "bindings":{"b":{"executor":"docker","operations":[]}},
            "routes":[{"on":"demo.x","binding":"nope"}]}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![
                ("/scopes/s/authorization/operations/0".into(), "unknown_reference"),
                ("/scopes/s/bindings/b/executor".into(), "unknown_reference"),
                ("/scopes/s/routes/0/binding".into(), "unknown_reference"),
            ]
        );
    }

    /// An executor registered without a toolbelt, secrets or playbooks cannot serve a binding that
    /// grants operations, receives secrets or names a playbook; the shell can.
    #[test]
    fn a_binding_needing_what_its_executor_cannot_do_is_an_invalid_capability() {
        let none = crate::ExecutorCapabilities {
            toolbelt: false,
            secrets: false,
            playbook: false,
        };
        let registry = crate::Registry::default()
            .with_executor("hold", none)
            .with_playbook("p", []);
        let text = |executor: &str| {
            format!(
                r#"{{"version":1,"secrets":{{"k":"env:K"}},"scopes":{{"s":{{"authorization":{{"operations":["emit"]}},
                "bindings":{{"b":{{"executor":"{executor}","config":{{"command":["true"]}},"operations":["emit"],"secrets":["k"],"playbook":"p"}}}}}}}}}}"#
            )
        };
        let found: Vec<_> = parse_with(text("hold").as_bytes(), &registry)
            .unwrap_err()
            .into_iter()
            .map(|d| (d.pointer, d.code, d.message))
            .collect();
        let pointers: Vec<(&str, &str)> = found.iter().map(|(p, c, _)| (p.as_str(), *c)).collect();
        assert_eq!(
            pointers,
            [
                ("/scopes/s/bindings/b/operations", "invalid_capability"),
                ("/scopes/s/bindings/b/playbook", "invalid_capability"),
                ("/scopes/s/bindings/b/secrets", "invalid_capability"),
            ]
        );
        assert!(found.iter().all(|(_, _, m)| !m.contains("hold")), "no value is echoed");
        assert!(parse_with(text("shell").as_bytes(), &registry).is_ok());
    }

    #[test]
    fn the_package_grant_names_vocabulary_tokens_once() {
        let with_grant = |grant: &str| format!(r#"{{"version":1,"packages":{{"grant":{grant},"gating":false}}}}"#);
        let snapshot = parse(with_grant(r#"["net.dns","clock"]"#).as_bytes()).unwrap();
        assert_eq!(
            (snapshot.package_grant(), snapshot.package_gating()),
            (vec!["net.dns".into(), "clock".into()], false)
        );
        assert_eq!(parse(br#"{"version":1}"#).unwrap().package_grant(), ["crypto", "clock"]);
        for bad in [r#"["node:dns/promises"]"#, r#"["clock","clock"]"#] {
            assert_eq!(
                codes(&with_grant(bad)).first().map(|(_, c)| *c),
                Some("unknown_reference"),
                "{bad}"
            );
        }
    }

    #[test]
    fn extensions_name_secrets_and_scopes_that_exist_and_an_http_api() {
        let with = |extensions: &str| {
            format!(
                r#"{{"version":1,"secrets":{{"gh":"env:GH_TOKEN"}},"scopes":{{"setup":{{}}}},"extensions":{extensions}}}"#
            )
        };
        let good = with(r#"{"github":{"token":"gh","webhook_secret":"gh","scope":"setup"}}"#);
        let snapshot = parse(good.as_bytes()).unwrap();
        assert_eq!(snapshot.github().unwrap().api_url, crate::GITHUB_API);
        for (extensions, pointer, code) in [
            (
                r#"{"github":{"token":"nope"}}"#,
                "/extensions/github/token",
                "unknown_reference",
            ),
            (
                r#"{"github":{"token":"gh","webhook_secret":"gh"}}"#,
                "/extensions/github/scope",
                "invalid_value",
            ),
            (
                r#"{"github":{"token":"gh","api_url":"ftp://x"}}"#,
                "/extensions/github/api_url",
                "invalid_value",
            ),
            (
                r#"{"github":{"token":"gh","git_host":"a/b"}}"#,
                "/extensions/github/git_host",
                "invalid_value",
            ),
            (
                r#"{"slack":{"token":"gh","signing_secret":"gh","scope":"elsewhere"}}"#,
                "/extensions/slack/scope",
                "unknown_reference",
            ),
            (
                r#"{"slack":{"token":"gh","bogus":1}}"#,
                "/extensions/slack/bogus",
                "unknown_field",
            ),
        ] {
            assert_eq!(
                codes(&with(extensions)),
                vec![(pointer.to_owned(), code)],
                "{extensions}"
            );
        }
    }

    #[test]
    fn approval_rules_name_known_operations_operators_and_a_positive_timeout() {
        let scope = r#"{"approvals": [{"operations": ["emit", "nope.op"], "approvers": ["Alice"], "timeout": "0s"}]}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![
                ("/scopes/s/approvals/0/approvers/0".into(), "invalid_name"),
                ("/scopes/s/approvals/0/operations/0".into(), "operation_not_gateable"),
                ("/scopes/s/approvals/0/operations/1".into(), "unknown_reference"),
                ("/scopes/s/approvals/0/timeout".into(), "invalid_value"),
            ]
        );
        // The issue's own example names `emit`: valid, with a warning that the entry never applies.
        let warned =
            parse(with_scope(r#"{"approvals": [{"operations": ["emit"], "timeout": "1h"}]}"#).as_bytes()).unwrap();
        let codes: Vec<&str> = warned.warnings().iter().map(|d| d.code).collect();
        assert_eq!(codes, ["operation_not_gateable"]);
    }

    #[test]
    fn child_ceiling_within_parent() {
        let text = r#"{"version":1,"scopes":{
            "p":{"authorization":{"operations":["emit"]}},
            "c":{"parent":"p","authorization":{"operations":["emit","wait"]}}}}"#;
        assert_eq!(
            codes(text),
            vec![("/scopes/c/authorization/operations/1".into(), "authority_widening")]
        );
    }

    #[test]
    fn parent_cycles_and_unknown_parents() {
        let text = r#"{"version":1,"scopes":{"a":{"parent":"b"},"b":{"parent":"a"},"c":{"parent":"zz"}}}"#;
        assert_eq!(
            codes(text),
            vec![
                ("/scopes/a/parent".into(), "parent_cycle"),
                ("/scopes/b/parent".into(), "parent_cycle"),
                ("/scopes/c/parent".into(), "unknown_reference"),
            ]
        );
    }

    #[test]
    fn shell_config_is_strict() {
        let scope = r#"{"bindings":{"b":{"executor":"shell","config":{"command":[]}}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/config/command".into(), "invalid_executor_config")]
        );
        let scope = r#"{"bindings":{"b":{"executor":"shell","config":{"command":["x"],"shell":true}}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/config/shell".into(), "unknown_field")]
        );
    }

    #[test]
    fn a_shell_bindings_env_and_path_keep_to_their_own_names_and_absolute_dirs() {
        let bad = [
            (r#""env":{"PATH":"/x"}"#, "/scopes/s/bindings/b/config/env/PATH"),
            (
                r#""env":{"OS_TOKEN_FILE":"/x"}"#,
                "/scopes/s/bindings/b/config/env/OS_TOKEN_FILE",
            ),
            (r#""env":{"1X":"y"}"#, "/scopes/s/bindings/b/config/env/1X"),
            (r#""env":{"API":"y"}"#, "/scopes/s/bindings/b/config/env/API"),
            (r#""path":["bin"]"#, "/scopes/s/bindings/b/config/path/0"),
            (r#""path":["/a:/b"]"#, "/scopes/s/bindings/b/config/path/0"),
            (r#""cwd":"project""#, "/scopes/s/bindings/b/config/cwd"),
            (r#""cwd":"/srv/../state""#, "/scopes/s/bindings/b/config/cwd"),
        ];
        for (fields, pointer) in bad {
            let scope = format!(
                r#"{{"bindings":{{"b":{{"executor":"shell","secrets":["api"],"config":{{"command":["x"],{fields}}}}}}}}}"#
            );
            let config = with_scope(&scope).replace(r#""version":1"#, r#""version":1,"secrets":{"api":"env:API_KEY"}"#);
            assert_eq!(
                codes(&config),
                vec![(pointer.into(), "invalid_executor_config")],
                "{fields}"
            );
        }
        let good = r#"{"bindings":{"b":{"executor":"shell","config":{"command":["x"],"env":{"HOME":"/srv","MODE":"ci"},"path":["/opt/tools/bin"],"cwd":"/srv/project"}}}}"#;
        assert!(parse(with_scope(good).as_bytes()).is_ok());
    }

    #[test]
    fn a_retry_policy_counts_1_to_100_attempts_with_a_positive_backoff() {
        let scope = |retry: &str| {
            with_scope(&format!(
                r#"{{"bindings":{{"b":{{"executor":"shell","config":{{"command":["x"]}},"retry":{retry}}}}}}}"#
            ))
        };
        for (retry, pointer) in [
            (r#"{"max_attempts":0}"#, "/scopes/s/bindings/b/retry/max_attempts"),
            (r#"{"max_attempts":101}"#, "/scopes/s/bindings/b/retry/max_attempts"),
            (
                r#"{"max_attempts":3,"backoff":"soon"}"#,
                "/scopes/s/bindings/b/retry/backoff",
            ),
            (
                r#"{"max_attempts":3,"backoff":"0s"}"#,
                "/scopes/s/bindings/b/retry/backoff",
            ),
            (
                r#"{"max_attempts":3,"jitter":true}"#,
                "/scopes/s/bindings/b/retry/jitter",
            ),
        ] {
            let found = codes(&scope(retry));
            assert_eq!(found.len(), 1, "{retry}: {found:?}");
            assert_eq!(found[0].0, pointer, "{retry}");
        }
        let snap = parse(scope(r#"{"max_attempts":3,"backoff":"2s"}"#).as_bytes()).unwrap();
        let policy = snap.retry("s", "b");
        assert_eq!((policy.max_attempts, policy.backoff.0), (3, 2000));
        let snap = parse(scope(r#"{"max_attempts":2}"#).as_bytes()).unwrap();
        assert_eq!(snap.retry("s", "b").backoff.0, 10_000);
        assert_eq!(snap.retry("s", "none").max_attempts, 1);
    }

    #[test]
    fn agent_bindings_take_a_prompt_template_a_program_and_arguments_of_their_own() {
        let scope = |executor: &str, config: &str| {
            with_scope(&format!(
                r#"{{"authorization":{{"operations":["emit"]}},"bindings":{{"b":{{"executor":"{executor}","config":{config},"operations":["emit"],"playbook":"p","secrets":["k"]}}}}}}"#
            ))
            .replace(r#""version":1"#, r#""version":1,"secrets":{"k":"env:K"}"#)
        };
        let registry = Registry::default().with_playbook("p", ["emit".to_owned()]);
        let at = |pointer: &str| format!("/scopes/s/bindings/b/config{pointer}");
        for (executor, config, pointer) in [
            ("claude-code", r#"{"prompt":" "}"#, at("/prompt")),
            ("claude-code", r#"{"prompt":"do {{secret}}"}"#, at("/prompt")),
            ("codex", r#"{"prompt":"p","command":"bin/codex"}"#, at("/command")),
            ("codex", r#"{"prompt":"p","model":""}"#, at("/model")),
            (
                "claude-code",
                r#"{"prompt":"p","args":["--max-turns","3","--mcp-config","{}"]}"#,
                at("/args/2"),
            ),
            (
                "claude-code",
                r#"{"prompt":"p","args":["--resume=abc"]}"#,
                at("/args/0"),
            ),
            ("codex", r#"{"prompt":"p","args":["--json"]}"#, at("/args/0")),
            ("codex", r#"{"prompt":"p","env":{"PATH":"/x"}}"#, at("/env/PATH")),
            ("codex", r#"{"prompt":"p","cwd":"rel"}"#, at("/cwd")),
            ("codex", r#"{"prompt":"p","timeout":"never"}"#, at("/timeout")),
            ("codex", r#"{"command":"codex"}"#, at("")),
            ("claude-code", r#"{"prompt":"p","shell":true}"#, at("/shell")),
        ] {
            let found = parse_with(scope(executor, config).as_bytes(), &registry)
                .err()
                .unwrap_or_default();
            let pointers: Vec<&str> = found.iter().map(|d| d.pointer.as_str()).collect();
            assert_eq!(pointers, [pointer.as_str()], "{executor} {config}");
        }
        let good = r#"{"prompt":"Fix {{input}} for {{ work_id }}","command":"claude","model":"m","args":["--max-turns","3"],"env":{"ANTHROPIC_BASE_URL":"http://127.0.0.1:1"},"path":["/opt/bin"],"cwd":"/srv/repo","timeout":"10m"}"#;
        for executor in ["claude-code", "codex"] {
            let snap = parse_with(scope(executor, good).as_bytes(), &registry).unwrap();
            let Some(crate::Executable::Agent(agent, config)) = snap.executable("s", "b") else {
                panic!("{executor} is an agent executor")
            };
            assert_eq!((agent.executor(), config.model.as_deref()), (executor, Some("m")));
            assert_eq!(snap.executable("s", "b").unwrap().timeout().0, 600_000);
        }
    }

    #[test]
    fn a_github_hold_names_its_condition_and_takes_no_secrets() {
        let scope = |config: &str, extra: &str| {
            with_scope(&format!(
                r#"{{"authorization":{{"operations":["emit"]}},"bindings":{{"b":{{"executor":"github-hold","config":{config},"operations":["emit"]{extra}}}}}}}"#
            ))
            .replace(r#""version":1"#, r#""version":1,"secrets":{"k":"env:K"}"#)
        };
        let at = |pointer: &str| format!("/scopes/s/bindings/b{pointer}");
        for (config, extra, pointer) in [
            (r#"{"until":"merged"}"#, "", at("/config/until")),
            (r#"{"until":"checks","wait":"soon"}"#, "", at("/config/wait")),
            (r#"{"until":"checks","wait":"0s"}"#, "", at("/config/wait")),
            (r#"{"until":"checks","command":["x"]}"#, "", at("/config/command")),
            (r#"{"until":"checks"}"#, r#","secrets":["k"]"#, at("/secrets")),
        ] {
            let found = parse(scope(config, extra).as_bytes()).err().unwrap_or_default();
            let pointers: Vec<&str> = found.iter().map(|d| d.pointer.as_str()).collect();
            assert_eq!(pointers, [pointer.as_str()], "{config}{extra}");
        }
        let hold = r#"{"until":"approved","repo":"acme/app","number":7,"wait":"2h"}"#;
        let snap = parse(scope(hold, "").as_bytes()).unwrap();
        assert!(matches!(snap.executable("s", "b"), Some(crate::Executable::GithubHold(h)) if h.number == Some(7)));
    }

    #[test]
    fn a_working_directory_never_lies_in_the_state_directory() {
        let scope = |cwd: &str| {
            with_scope(&format!(
                r#"{{"bindings":{{"b":{{"executor":"shell","config":{{"command":["x"],"cwd":"{cwd}"}}}}}}}}"#
            ))
        };
        let registry = Registry::default().with_state_dir("/home/me/.state");
        for (cwd, refused) in [
            ("/home/me/.state", true),
            ("/home/me/.state/runs", true),
            ("/home/me", true),
            ("/home/me/.stateful", false),
        ] {
            let found = parse_with(scope(cwd).as_bytes(), &registry).err().unwrap_or_default();
            let pointers: Vec<&str> = found.iter().map(|d| d.pointer.as_str()).collect();
            assert_eq!(
                pointers == ["/scopes/s/bindings/b/config/cwd"],
                refused,
                "{cwd}: {pointers:?}"
            );
        }
    }

    #[test]
    fn reserved_emits_are_refused() {
        let scope = r#"{"bindings":{"b":{"executor":"shell","config":{"command":["x"]},"emits":["core.*","demo.*"]}}}"#;
        assert_eq!(
            codes(&with_scope(scope)),
            vec![("/scopes/s/bindings/b/emits/0".into(), "invalid_value")]
        );
    }

    #[test]
    fn oversized_and_nulls_refused() {
        let big = vec![b' '; MAX_CONFIG_BYTES + 1];
        assert_eq!(parse(&big).unwrap_err()[0].code, "too_large");
        assert_eq!(
            codes(r#"{"version":1,"scopes":null}"#),
            vec![("/scopes".into(), "null_value")]
        );
    }

    #[test]
    fn hash_ignores_formatting_and_key_order() {
        let a = parse(br#"{"version":1,"limits":{"causal_max_depth":3,"causal_per_minute":5}}"#).unwrap();
        let b = parse(b"{ \"limits\": {\"causal_per_minute\":5, \"causal_max_depth\":3},\n \"version\": 1 }").unwrap();
        assert_eq!(a.hash(), b.hash());
    }

    #[test]
    fn a_sealed_generation_has_its_written_hash_and_no_reference_text() {
        let written = parse(br#"{"version":1,"secrets":{"gh":"cmd:pass show github"}}"#).unwrap();
        assert!(!written.sealed_json().contains("pass show"));
        let sealed = parse(written.sealed_json().as_bytes()).unwrap();
        assert_eq!(sealed.hash(), written.hash(), "the same generation on every daemon");
        assert_eq!(sealed.sealed_json(), written.sealed_json());
        assert_eq!(sealed.references().count(), 0, "a sealed reference teaches nothing");
        let learned: Vec<(String, &str)> = written.references().collect();
        assert_eq!(
            learned,
            vec![(crate::reference::seal("cmd:pass show github"), "cmd:pass show github")]
        );
        let other = parse(br#"{"version":1,"secrets":{"gh":"cmd:pass show gitlab"}}"#).unwrap();
        assert_ne!(
            other.hash(),
            written.hash(),
            "a changed reference is a changed generation"
        );
    }
}
