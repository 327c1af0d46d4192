//! Gates in the call path: the order they are asked in, what they never see, parking (the wait is
//! declared and authority released), refusing (naming the gate, authority kept), failing closed,
//! and the audit record of each.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use conduit_config::default_config_json;
use conduit_core::tool::CatalogFields;
use conduit_core::{AuditKind, Declaration, ErrorCode, Refusal};
use conduit_scheduler::Claim;
use conduit_toolbelt::gate::{Gate, GateAnswer, GateCall, GateFuture, WaitPlan};
use conduit_toolbelt::registry::WaitRequest;
use conduit_toolbelt::registry::{OperationError, OperationSpec, Registration};
use conduit_toolbelt::{CallRequest, Presented, Registry};
use serde_json::{json, Value};

/// A gate that records every call it is asked about and answers as told.
struct Recording {
    name: &'static str,
    asked: Arc<Mutex<Vec<String>>>,
    answer: GateAnswer,
}

impl Gate for Recording {
    fn ask(&self, call: GateCall) -> GateFuture {
        self.asked
            .lock()
            .unwrap()
            .push(format!("{}:{}", self.name, call.operation));
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }

    fn passed(&self, _: GateCall) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        self.asked.lock().unwrap().push(format!("{} passed", self.name));
        Box::pin(async {})
    }
}

struct Panicking;

impl Gate for Panicking {
    fn ask(&self, _: GateCall) -> GateFuture {
        Box::pin(async { panic!("a gate bug") })
    }
}

fn registration(name: &str) -> Registration {
    Registration {
        name: name.into(),
        source: conduit_core::tool::ToolSource::HostExtension,
        operations: vec![OperationSpec {
            name: format!("{name}.op"),
            title: None,
            summary: "for tests".into(),
            input_schema: json!({"type": "object"}),
            output_schema: json!({"type": "object"}),
            catalog: CatalogFields::write(),
            capabilities: Vec::new(),
            handler: Arc::new(Noop),
        }],
        toolsets: vec![],
    }
}

/// Registrations `gamma`, `alpha`, `beta` (registered out of order) with gates answering as given,
/// and `notes` without one. Every `*.op` is granted.
fn harness(answers: [(&'static str, Option<Arc<dyn Gate>>); 3]) -> Harness {
    let mut registry = Registry::default();
    registry.register(registration("notes")).unwrap();
    for (name, gate) in answers {
        registry.register(registration(name)).unwrap();
        if let Some(gate) = gate {
            registry.set_gate(name, gate).unwrap();
        }
    }
    let ops = r#"["emit", "read_context", "declare_outcome", "wait", "create_work", "notes.op", "alpha.op", "beta.op", "gamma.op"]"#;
    let config = default_config_json().replace(
        r#"["emit", "read_context", "declare_outcome", "wait", "create_work"]"#,
        ops,
    );
    Harness::with_registry(&config, registry)
}

fn recording(name: &'static str, asked: &Arc<Mutex<Vec<String>>>, answer: GateAnswer) -> Option<Arc<dyn Gate>> {
    Some(Arc::new(Recording {
        name,
        asked: asked.clone(),
        answer,
    }))
}

fn call(h: &Harness, claim: &Claim, token: &str, operation: &str) -> Result<Value, Refusal> {
    let request: CallRequest = serde_json::from_value(json!({"operation": operation, "input": {}})).unwrap();
    block_on(h.toolbelt.call(&claim.execution.id, token, &request))
}

fn passing(asked: &Arc<Mutex<Vec<String>>>) -> [(&'static str, Option<Arc<dyn Gate>>); 3] {
    [
        ("gamma", recording("gamma", asked, GateAnswer::Pass)),
        ("alpha", recording("alpha", asked, GateAnswer::Pass)),
        ("beta", recording("beta", asked, GateAnswer::Pass)),
    ]
}

#[test]
fn gates_are_asked_in_name_order_never_about_their_own_operations_nor_builtins() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let h = harness(passing(&asked));
    let (claim, token) = h.attempt();
    call(&h, &claim, &token, "notes.op").unwrap();
    assert_eq!(
        *asked.lock().unwrap(),
        [
            "alpha:notes.op",
            "beta:notes.op",
            "gamma:notes.op",
            "alpha passed",
            "beta passed",
            "gamma passed"
        ],
        "asked in name order; told once all let the call through"
    );
    asked.lock().unwrap().clear();
    call(&h, &claim, &token, "beta.op").unwrap();
    assert_eq!(
        *asked.lock().unwrap(),
        ["alpha:beta.op", "gamma:beta.op", "alpha passed", "gamma passed"],
        "beta never sees its own"
    );
    asked.lock().unwrap().clear();
    h.call(&claim, &token, "emit", json!({"type": "demo.step"})).unwrap();
    h.call(&claim, &token, "read_context", json!({})).unwrap();
    assert!(asked.lock().unwrap().is_empty(), "builtins pass no gate");
}

/// Gates `gamma` and `alpha` pass, `beta` parks the call on an approval; what each was asked.
fn parking_harness() -> (Harness, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let plan = WaitPlan {
        output: json!({"awaiting": "approval"}),
        wait: WaitRequest {
            types: vec!["approval.decided".into()],
            keys: vec![],
            timeout: None,
        },
    };
    let h = harness([
        ("gamma", recording("gamma", &asked, GateAnswer::Pass)),
        ("alpha", recording("alpha", &asked, GateAnswer::Pass)),
        ("beta", recording("beta", &asked, GateAnswer::Park(plan))),
    ]);
    (h, asked)
}

#[test]
fn a_parking_gate_declares_its_wait_releases_authority_and_stops_the_gates_after_it() {
    let (h, asked) = parking_harness();
    let (claim, token) = h.attempt();
    let parked = call(&h, &claim, &token, "notes.op").unwrap();
    assert_eq!(parked["output"], json!({"awaiting": "approval"}));
    assert_eq!(parked["parked"]["gate"], "beta");
    assert_eq!(parked["parked"]["wait"]["types"], json!(["approval.decided"]));
    assert_eq!(
        *asked.lock().unwrap(),
        ["alpha:notes.op", "beta:notes.op"],
        "gamma is not asked, and alpha is not told the call passed (nothing it granted is used up)"
    );

    let execution = h
        .store
        .read(|tx| tx.get_execution(&claim.execution.id))
        .unwrap()
        .unwrap();
    assert!(matches!(execution.declaration, Some(Declaration::Wait { .. })));
    assert_eq!(
        call(&h, &claim, &token, "notes.op").unwrap_err().code,
        ErrorCode::AuthorityReleased
    );
    let audit = h
        .store
        .read(|tx| tx.list_audit(Some(&claim.execution.id), 100))
        .unwrap();
    let record = audit.iter().find(|r| r.result == "parked").expect("a parked record");
    assert_eq!((record.kind, record.gate.as_deref()), (AuditKind::Called, Some("beta")));
}

#[test]
fn a_refusing_gate_names_itself_and_keeps_authority() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let refusal = OperationError::new("change_frozen", "changes are frozen this week");
    let h = harness([
        ("gamma", recording("gamma", &asked, GateAnswer::Refuse(refusal))),
        ("alpha", recording("alpha", &asked, GateAnswer::Pass)),
        ("beta", recording("beta", &asked, GateAnswer::Pass)),
    ]);
    let (claim, token) = h.attempt();
    let refused = call(&h, &claim, &token, "notes.op").unwrap_err();
    assert_eq!(refused.wire_code(), "change_frozen");
    assert_eq!(
        refused.message, "changes are frozen this week",
        "the gate's error, verbatim"
    );
    assert_eq!(refused.fields["gate"], "gamma");
    assert!(
        h.call(&claim, &token, "emit", json!({"type": "demo.step"})).is_ok(),
        "authority is kept"
    );
    let audit = h
        .store
        .read(|tx| tx.list_audit(Some(&claim.execution.id), 100))
        .unwrap();
    let record = audit
        .iter()
        .find(|r| r.result == "gate_refused")
        .expect("a refused record");
    assert_eq!(
        (record.kind, record.gate.as_deref()),
        (AuditKind::Rejected, Some("gamma"))
    );
}

#[test]
fn a_panicking_gate_fails_closed() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let h = harness([
        ("gamma", recording("gamma", &asked, GateAnswer::Pass)),
        ("alpha", Some(Arc::new(Panicking))),
        ("beta", recording("beta", &asked, GateAnswer::Pass)),
    ]);
    let (claim, token) = h.attempt();
    let refused = call(&h, &claim, &token, "notes.op").unwrap_err();
    assert_eq!(
        (refused.wire_code(), refused.fields["gate"].as_str()),
        ("gate_failed", Some("alpha"))
    );
    assert!(
        asked.lock().unwrap().is_empty(),
        "no later gate is asked and the operation never runs"
    );
}

/// A start gate answering as told.
struct Starting(GateAnswer);

impl conduit_toolbelt::gate::StartGate for Starting {
    fn ask(&self, _: conduit_toolbelt::gate::StartCall) -> GateFuture {
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

/// What the daemon does with a claimed first attempt: ask the start gates, and settle the attempt
/// when one stops it (park: the Work waits; refuse: it fails with the gate's code).
fn start(h: &Harness, answer: GateAnswer) -> conduit_core::Work {
    use conduit_toolbelt::gate::{decide_start, StartCall, StartGate, Verdict};
    let (claim, _) = h.attempt();
    assert!(h
        .store
        .read(|tx| conduit_scheduler::first_to_start(tx, &claim.execution))
        .unwrap());
    let gates: Vec<(String, Arc<dyn StartGate>)> = vec![("hold".into(), Arc::new(Starting(answer)))];
    let call = StartCall {
        scope: claim.work.scope.clone(),
        work_id: claim.work.id.clone(),
        binding: claim.work.binding.clone(),
        input: claim.work.input.clone(),
    };
    let Verdict::Stop(stopped) = block_on(decide_start(&gates, &call)) else {
        panic!("the gate stops it")
    };
    h.store
        .write(|tx| conduit_scheduler::settle_unstarted(tx, &claim.execution.id, stopped.into_declaration(), T0))
        .unwrap();
    h.store.read(|tx| tx.get_work(&claim.work.id)).unwrap().unwrap()
}

#[test]
fn a_start_gate_parks_or_fails_a_works_first_attempt() {
    let plan = WaitPlan {
        output: json!({}),
        wait: WaitRequest {
            types: vec!["change.window.opened".into()],
            keys: vec![],
            timeout: None,
        },
    };
    let held = start(&default_harness(), GateAnswer::Park(plan));
    assert_eq!(
        held.state,
        conduit_core::WorkState::Waiting,
        "a park holds the Work waiting"
    );

    let refusal = OperationError::new("change_frozen", "no changes this week");
    let failed = start(&default_harness(), GateAnswer::Refuse(refusal));
    assert_eq!(failed.state, conduit_core::WorkState::Failed);
    let summary = failed.outcome.unwrap().summary.unwrap();
    assert!(summary.starts_with("change_frozen: no changes this week"), "{summary}");
}

/// RFC 0078 §D puts the approval interrupt inside the bracket: a call parked in a session returns
/// (`agent.toolReturned {status: parked}`) before the host closes the session, `parked`.
#[test]
fn a_call_parked_in_a_session_returns_inside_the_bracket_and_closes_it_parked() {
    let (h, _) = parking_harness();
    let (claim, token) = h.attempt();
    let open = conduit_toolbelt::OpenSession {
        tool_id: "notes.op".into(),
        request_id: None,
    };
    let opened = h
        .toolbelt
        .open_session(&claim.execution.id, &Presented::new(&token), &open)
        .unwrap();
    let request = json!({"operation": "notes.op", "input": {}, "session_id": opened["session_id"]});
    let request: CallRequest = serde_json::from_value(request).unwrap();
    let parked = block_on(h.toolbelt.call(&claim.execution.id, &token, &request)).unwrap();
    assert_eq!(parked["parked"]["gate"], "beta");
    let log: Vec<(String, Value)> = h
        .store
        .read(|tx| tx.list_events(Some(&claim.work.id), 1000))
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type.starts_with("tool.session.") || e.event_type.starts_with("agent.tool"))
        .map(|e| (e.event_type, e.data))
        .collect();
    let kinds: Vec<&str> = log.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "tool.session.opened",
            "agent.toolCalled",
            "agent.toolReturned",
            "tool.session.closed"
        ]
    );
    assert_eq!(
        (log[2].1["status"].as_str(), log[3].1["outcome"].as_str()),
        (Some("parked"), Some("parked"))
    );
}
