//! In-process extension operations: registration rules, schema validation, handlers outside storage,
//! refusals, replay, the crash window, the fence, and translated emissions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use conduit_config::default_config_json;
use conduit_core::tool::{CatalogFields, SafetyTier, ToolSource};
use conduit_core::{Causation, ErrorCode, Event, Source};
use conduit_toolbelt::registry::{
    Emission, Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationError, OperationSpec, Registration,
};
use conduit_toolbelt::{Begun, CallRequest, Presented, Ran, Registry};
use serde_json::{json, Value};

/// The `notes` test extension: `notes.add` counts its runs and emits `notes.added`; `notes.fail`
/// refuses with its own code.
#[derive(Default)]
struct Notes {
    runs: AtomicUsize,
    seen: Mutex<Vec<String>>,
}

impl Handler for Notes {
    fn call(&self, call: HandlerCall) -> HandlerFuture {
        self.seen.lock().unwrap().push(format!("{call:?}"));
        let n = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        let result = match call.operation.as_str() {
            "notes.add" => Ok(HandlerOutput {
                output: json!({"count": n}),
                emit: vec![Emission {
                    event_type: "notes.added".into(),
                    data: call.input.clone(),
                    correlation_key: None,
                }],
                wait: None,
                secret: false,
            }),
            "notes.secret" => Ok(HandlerOutput {
                secret: true,
                ..HandlerOutput::output(json!({"password": format!("hunter{n}")}))
            }),
            "notes.busy" => Err(OperationError {
                retry_after: Some(30),
                ..OperationError::new("notes_busy", "try later")
            }),
            _ => Err(OperationError::new("note_locked", "the note is locked")),
        };
        Box::pin(async move { result })
    }
}

fn operation(name: &str, notes: &Arc<Notes>) -> OperationSpec {
    OperationSpec {
        name: name.into(),
        title: None,
        summary: format!("{name} for tests"),
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}),
        output_schema: json!({"type": "object"}),
        catalog: CatalogFields::write(),
        capabilities: Vec::new(),
        handler: notes.clone(),
    }
}

fn notes_registration(notes: &Arc<Notes>) -> Registration {
    Registration {
        name: "notes".into(),
        source: ToolSource::HostExtension,
        operations: vec![
            operation("notes.add", notes),
            operation("notes.fail", notes),
            operation("notes.secret", notes),
            operation("notes.busy", notes),
        ],
        toolsets: vec![],
    }
}

fn notes_config() -> String {
    let all = r#"["emit", "read_context", "declare_outcome", "wait", "create_work", "notes.add", "notes.fail", "notes.secret", "notes.busy"]"#;
    default_config_json().replace(
        r#"["emit", "read_context", "declare_outcome", "wait", "create_work"]"#,
        all,
    )
}

fn notes_harness() -> (Harness, Arc<Notes>) {
    let notes = Arc::new(Notes::default());
    let mut registry = Registry::default();
    registry.register(notes_registration(&notes)).unwrap();
    (Harness::with_registry(&notes_config(), registry), notes)
}

fn add(text: &str, request_id: Option<&str>) -> Value {
    json!({"operation": "notes.add", "input": {"text": text}, "request_id": request_id})
}

#[test]
fn an_operation_runs_its_handler_and_translates_its_emissions() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let out = h.request_at(&claim, &token, add("hi", None), T0).unwrap();
    assert_eq!(out, json!({"count": 1}));
    let events = h.store.read(|tx| tx.list_events(Some(&claim.work.id), 100)).unwrap();
    let added = events
        .iter()
        .find(|e| e.event_type == "notes.added")
        .expect("the translated emission");
    assert_eq!(added.source, Source::Execution(claim.execution.id.clone()));
    assert_eq!(
        added.causation.parent.as_deref(),
        Some(claim.execution.cause_event.as_str())
    );
    let types: Vec<&str> = events
        .iter()
        .map(|e| e.event_type.as_str())
        .filter(|t| t.starts_with("agent."))
        .collect();
    assert_eq!(types, vec!["agent.toolCalled", "agent.toolReturned"]);
    // The call's records across its handler: the call continues the cause, the return the call.
    let agent: Vec<&Event> = events.iter().filter(|e| e.event_type.starts_with("agent.")).collect();
    let cause = events
        .iter()
        .find(|e| e.id == claim.execution.cause_event)
        .expect("the cause");
    assert_eq!(agent[0].causation, Causation::derived_from(cause));
    assert_eq!(agent[1].causation, Causation::derived_from(agent[0]));
    assert!(
        !notes.seen.lock().unwrap()[0].contains(&token),
        "a handler never sees the token"
    );
}

#[test]
fn input_is_validated_against_the_schema_before_the_handler() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let bad = json!({"operation": "notes.add", "input": {"text": 7}});
    let refusal = h.request_at(&claim, &token, bad, T0).unwrap_err();
    assert_eq!(refusal.code, ErrorCode::InvalidInput);
    assert!(refusal.message.contains("/text"), "{}", refusal.message);
    assert_eq!(notes.runs.load(Ordering::SeqCst), 0);
}

#[test]
fn a_handler_refusal_is_422_with_its_code_and_is_replayed() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let fail = json!({"operation": "notes.fail", "input": {"text": "x"}, "request_id": "f1"});
    let refusal = h.request_at(&claim, &token, fail.clone(), T0).unwrap_err();
    assert_eq!((refusal.wire_code(), refusal.code.http_status()), ("note_locked", 422));
    assert_eq!(refusal.message, "the note is locked");
    let again = h.request_at(&claim, &token, fail, T0).unwrap_err();
    assert_eq!(again.wire_code(), "note_locked");
    assert_eq!(
        notes.runs.load(Ordering::SeqCst),
        1,
        "the refusal was replayed, not rerun"
    );
    assert!(
        h.call(&claim, &token, "read_context", json!({})).is_ok(),
        "authority is kept"
    );
}

#[test]
fn a_handler_runs_once_per_request_id() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let first = h.request_at(&claim, &token, add("a", Some("r1")), T0).unwrap();
    let second = h.request_at(&claim, &token, add("a", Some("r1")), T0).unwrap();
    assert_eq!(first, second);
    assert_eq!(notes.runs.load(Ordering::SeqCst), 1);
    let added = h.store.read(|tx| tx.list_events(Some(&claim.work.id), 100)).unwrap();
    assert_eq!(added.iter().filter(|e| e.event_type == "notes.added").count(), 1);
}

/// An output that carries a credential is answered and never kept: no replay record holds it, and
/// a retry runs the handler again. (Control: `notes.add` with a request id runs once, above.)
#[test]
fn a_secret_output_is_never_kept_for_replay() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let secret = json!({"operation": "notes.secret", "input": {"text": "x"}, "request_id": "s1"});
    assert_eq!(
        h.request_at(&claim, &token, secret.clone(), T0).unwrap()["password"],
        "hunter1"
    );
    assert_eq!(h.request_at(&claim, &token, secret, T0).unwrap()["password"], "hunter2");
    assert_eq!(notes.runs.load(Ordering::SeqCst), 2);
    let kept = h
        .store
        .read(|tx| tx.get_request(&claim.execution.id, "notes.secret", "s1"))
        .unwrap();
    assert!(kept.is_none(), "no replay record holds the credential");
    let bytes = store_bytes(&h);
    assert!(
        contains(&bytes, "notes.secret"),
        "control: the scan reads the store's records"
    );
    assert!(!contains(&bytes, "hunter1"), "nor does any other record");
}

/// A refusal that says when to try again carries `retry_after` and is not kept: a retry with the
/// same request id after the wait runs the operation again. (Control: `notes.fail`'s refusal is
/// replayed, above.)
#[test]
fn a_refusal_with_retry_after_is_not_replayed() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let busy = json!({"operation": "notes.busy", "input": {"text": "x"}, "request_id": "b1"});
    let refusal = h.request_at(&claim, &token, busy.clone(), T0).unwrap_err();
    assert_eq!(
        (refusal.wire_code(), refusal.fields.get("retry_after")),
        ("notes_busy", Some(&json!(30)))
    );
    h.request_at(&claim, &token, busy, T0).unwrap_err();
    assert_eq!(notes.runs.load(Ordering::SeqCst), 2, "the retry ran again");
}

/// The replay window: the host crashes after the handler's effect and before its result commits.
/// The retry runs the handler again (so handlers must be idempotent on the request id), and then the
/// result commits once.
#[test]
fn the_crash_window_between_effect_and_commit_reruns_the_handler() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let request = serde_json::from_value::<CallRequest>(add("a", Some("r1")))
        .unwrap()
        .checked()
        .unwrap();
    let Begun::Extension(pending) = h
        .toolbelt
        .begin(&claim.execution.id, &Presented::new(&token), &request)
        .unwrap()
    else {
        panic!("an extension call");
    };
    let _effect = block_on(pending.run());
    drop(pending); // the crash: the result never commits
    assert_eq!(notes.runs.load(Ordering::SeqCst), 1);
    let out = h.request_at(&claim, &token, add("a", Some("r1")), T0).unwrap();
    assert_eq!(notes.runs.load(Ordering::SeqCst), 2, "the retry ran the handler again");
    assert_eq!(out, json!({"count": 2}));
    h.request_at(&claim, &token, add("a", Some("r1")), T0).unwrap();
    assert_eq!(notes.runs.load(Ordering::SeqCst), 2, "once committed, it replays");
}

#[test]
fn results_commit_only_under_the_fence() {
    let (h, _) = notes_harness();
    let (claim, token) = h.attempt();
    let request = serde_json::from_value::<CallRequest>(add("late", None))
        .unwrap()
        .checked()
        .unwrap();
    let Begun::Extension(pending) = h
        .toolbelt
        .begin(&claim.execution.id, &Presented::new(&token), &request)
        .unwrap()
    else {
        panic!("an extension call");
    };
    h.call(&claim, &token, "declare_outcome", json!({"status": "succeeded"}))
        .unwrap();
    let result = block_on(pending.run());
    let refusal = h.toolbelt.finish(*pending, Ran::Handled(result)).unwrap_err();
    assert_eq!(refusal.code, ErrorCode::AuthorityReleased);
    let events = h.store.read(|tx| tx.list_events(Some(&claim.work.id), 100)).unwrap();
    assert!(
        events.iter().all(|e| e.event_type != "notes.added"),
        "nothing is emitted past the fence"
    );
}

#[test]
fn an_ungranted_extension_operation_is_forbidden() {
    let notes = Arc::new(Notes::default());
    let mut registry = Registry::default();
    registry.register(notes_registration(&notes)).unwrap();
    let h = Harness::with_registry(default_config_json(), registry);
    let (claim, token) = h.attempt();
    assert_eq!(
        h.call(&claim, &token, "notes.add", json!({"text": "x"})),
        Err(ErrorCode::Forbidden)
    );
    assert_eq!(notes.runs.load(Ordering::SeqCst), 0);
}

#[test]
fn configuration_may_grant_only_registered_operations() {
    let text = notes_config().replace("\"notes.fail\"", "\"notes.nope\"");
    let notes = Arc::new(Notes::default());
    let mut registry = Registry::default();
    registry.register(notes_registration(&notes)).unwrap();
    let found = conduit_config::parse_with(text.as_bytes(), &registry.config_registry()).unwrap_err();
    assert!(found.iter().all(|d| d.code == "unknown_reference"), "{found:?}");
    assert!(
        conduit_config::parse(notes_config().as_bytes()).is_err(),
        "unregistered names are unknown"
    );
}

fn registration(name: &str, source: ToolSource, ops: &[(&str, SafetyTier)]) -> Registration {
    let notes = Arc::new(Notes::default());
    let operations = ops
        .iter()
        .map(|(op, tier)| {
            let mut spec = operation(op, &notes);
            spec.catalog.safety_tier = *tier;
            spec
        })
        .collect();
    Registration {
        name: name.into(),
        source,
        operations,
        toolsets: vec![],
    }
}

#[test]
fn registration_rules() {
    use SafetyTier::{Exec, Write};
    use ToolSource::{HostExtension, NodePack};
    /// What, the registration, and the refusal expected (code, operation), if any.
    type Case<'a> = (&'a str, Registration, Option<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (
            "own namespace",
            registration("github", HostExtension, &[("github.issue.view", Write)]),
            None,
        ),
        (
            "outside namespace",
            registration("slack", HostExtension, &[("github.issue.view", Write)]),
            Some(("invalid", "github.issue.view")),
        ),
        (
            "prefix is not a namespace",
            registration("git", HostExtension, &[("github.x", Write)]),
            Some(("invalid", "github.x")),
        ),
        (
            "bare registration name",
            registration("notes", HostExtension, &[("notes", Write)]),
            Some(("invalid", "notes")),
        ),
        (
            "bad registration name",
            registration("No.Tes", HostExtension, &[("No.Tes.x", Write)]),
            Some(("invalid", "No.Tes")),
        ),
        (
            "exec from a package",
            registration("pkg", NodePack, &[("pkg.run", Exec)]),
            Some(("invalid", "pkg.run")),
        ),
        (
            "exec from the host",
            registration("shell", HostExtension, &[("shell.run", Exec)]),
            None,
        ),
        (
            "twice in one",
            registration("dup", HostExtension, &[("dup.a", Write), ("dup.a", Write)]),
            Some(("conflict", "dup.a")),
        ),
    ];
    for (what, reg, expected) in cases {
        let mut registry = Registry::default();
        let got = registry.register(reg).err().map(|e| (e.code, e.operation));
        assert_eq!(got.as_ref().map(|(c, o)| (*c, o.as_str())), expected, "{what}");
        if expected.is_some() {
            assert_eq!(
                registry.operations().count(),
                0,
                "{what}: a refused registration registers nothing"
            );
        }
    }
}

#[test]
fn a_repeated_registration_name_is_a_conflict() {
    let mut registry = Registry::default();
    registry
        .register(registration(
            "github",
            ToolSource::HostExtension,
            &[("github.a", SafetyTier::Read)],
        ))
        .unwrap();
    let err = registry
        .register(registration(
            "github",
            ToolSource::HostExtension,
            &[("github.b", SafetyTier::Read)],
        ))
        .unwrap_err();
    assert_eq!((err.code, err.operation.as_str()), ("conflict", "github"));
    assert!(registry.operation("github.b").is_none());
}

#[test]
fn an_invalid_input_schema_is_refused() {
    let notes = Arc::new(Notes::default());
    let mut spec = operation("notes.add", &notes);
    spec.input_schema = json!({"type": "not-a-type"});
    let reg = Registration {
        name: "notes".into(),
        source: ToolSource::HostExtension,
        operations: vec![spec],
        toolsets: vec![],
    };
    let err = Registry::default().register(reg).unwrap_err();
    assert_eq!(err.code, "invalid");
}

/// RFC 0078 `replayPolicy`: one request id, one observable result. A second call with the request
/// id of a call still running is refused `request_in_progress` (its handler never runs twice);
/// once the first commits, a retry replays it.
#[test]
fn a_call_while_one_with_its_request_id_runs_is_refused_and_its_retry_replays() {
    let (h, notes) = notes_harness();
    let (claim, token) = h.attempt();
    let request = serde_json::from_value::<CallRequest>(add("a", Some("r1")))
        .unwrap()
        .checked()
        .unwrap();
    let Begun::Extension(first) = h
        .toolbelt
        .begin(&claim.execution.id, &Presented::new(&token), &request)
        .unwrap()
    else {
        panic!("an extension call");
    };
    let second = h.toolbelt.begin(&claim.execution.id, &Presented::new(&token), &request);
    assert_eq!(second.err().map(|r| r.code), Some(ErrorCode::RequestInProgress));
    let other = serde_json::from_value::<CallRequest>(add("b", Some("r2")))
        .unwrap()
        .checked()
        .unwrap();
    assert!(
        h.toolbelt
            .begin(&claim.execution.id, &Presented::new(&token), &other)
            .is_ok(),
        "another request id runs"
    );
    let ran = block_on(first.run());
    let answered = h.toolbelt.finish(*first, Ran::Handled(ran)).unwrap();
    let retried = h.request_at(&claim, &token, add("a", Some("r1")), T0).unwrap();
    assert_eq!(retried, answered["output"], "the retry replays the committed result");
    assert_eq!(notes.runs.load(Ordering::SeqCst), 1, "the handler ran once for r1");
    let events = h.store.read(|tx| tx.list_events(Some(&claim.work.id), 100)).unwrap();
    assert_eq!(events.iter().filter(|e| e.event_type == "notes.added").count(), 1);
}
