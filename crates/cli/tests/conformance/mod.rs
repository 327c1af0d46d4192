//! The shared toolbelt conformance suite: one set of cases, run against two targets, the toolbelt in
//! process (`conformance_in_process.rs`) and the real daemon through its sockets
//! (`conformance_daemon.rs`). Each security case asserts a refusal, so it fails on a target that
//! drops the rule; `the_suite_catches_a_target_without_the_rules` runs the cases against a target
//! that refuses nothing, to show they would.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

pub mod daemon;
pub mod in_process;

use serde_json::{json, Value};

/// The configuration both targets run: `agent` holds every builtin, `narrow` only `read_context`,
/// and a causal depth of 1 so that a routed emission exceeds it.
pub fn suite_config(command: &[String]) -> String {
    let all = json!(["emit", "read_context", "declare_outcome", "wait", "create_work"]);
    json!({
        "version": 1,
        "scopes": {"suite": {
            "authorization": {"operations": all},
            "bindings": {
                "agent": {"executor": "shell", "config": {"command": command}, "operations": all},
                "narrow": {"executor": "shell", "config": {"command": command}, "operations": ["read_context"]}
            },
            "routes": [{"on": "suite.requested", "binding": "agent"}]
        }},
        "limits": {"causal_max_depth": 1, "causal_per_minute": 600}
    })
    .to_string()
}

/// A running attempt as a test sees it.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub execution_id: String,
    pub work_id: String,
    pub token: String,
    /// Where the target reaches the attempt's toolbelt (its socket, for the daemon).
    pub endpoint: String,
}

/// What a case needs from a toolbelt host.
pub trait Target {
    /// Starts an attempt of `binding` in the `suite` scope and returns it while it runs.
    fn attempt(&self, binding: &str) -> Attempt;
    /// A toolbelt call on `on`'s endpoint with `token`: the HTTP status and body.
    fn call(&self, on: &Attempt, token: &str, body: Value) -> (u16, Value);
    /// The agent guidance served on `on`'s endpoint to `token`.
    fn guidance(&self, on: &Attempt, token: &str) -> (u16, Value);
    fn operator_token(&self) -> String;
    /// A Work's events, as the management API shows them.
    fn events(&self, work: &str) -> Vec<Value>;
    /// Supersedes the attempt as recovery does, returning its rotated token.
    fn supersede(&self, attempt: &Attempt) -> String;
    /// Every byte of the store's files.
    fn store_bytes(&self) -> Vec<u8>;
}

fn code(answer: &(u16, Value)) -> (u16, &str) {
    (answer.0, answer.1["error"].as_str().unwrap_or(""))
}

fn op(operation: &str, input: Value) -> Value {
    json!({"operation": operation, "input": input})
}

pub fn a_live_token_reads_its_context(t: &dyn Target) {
    let a = t.attempt("agent");
    let (status, body) = t.call(&a, &a.token, op("read_context", json!({})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"]["execution"]["id"], a.execution_id.as_str());
    assert_eq!(body["output"]["work"]["id"], a.work_id.as_str());
}

pub fn a_garbage_token_is_forbidden(t: &dyn Target) {
    let a = t.attempt("agent");
    let garbage = "A".repeat(43);
    assert_eq!(
        code(&t.call(&a, &garbage, op("read_context", json!({})))),
        (403, "forbidden")
    );
}

pub fn another_executions_token_is_forbidden(t: &dyn Target) {
    let a = t.attempt("agent");
    let b = t.attempt("agent");
    assert_eq!(
        code(&t.call(&a, &b.token, op("read_context", json!({})))),
        (403, "forbidden")
    );
    assert_eq!(
        code(&t.call(&b, &a.token, op("read_context", json!({})))),
        (403, "forbidden")
    );
}

pub fn narrowing_assertions_must_hold(t: &dyn Target) {
    let a = t.attempt("agent");
    for (field, value) in [("execution_id", "other"), ("work_id", "other"), ("scope_id", "other")] {
        let body = json!({"operation": "read_context", "input": {}, field: value});
        assert_eq!(code(&t.call(&a, &a.token, body)), (403, "forbidden"), "{field}");
    }
}

pub fn an_ungranted_or_undeclared_operation_is_forbidden(t: &dyn Target) {
    let a = t.attempt("narrow");
    assert_eq!(t.call(&a, &a.token, op("read_context", json!({}))).0, 200);
    assert_eq!(
        code(&t.call(&a, &a.token, op("emit", json!({"type": "suite.x"})))),
        (403, "forbidden")
    );
    assert_eq!(code(&t.call(&a, &a.token, op("nope.x", json!({})))), (403, "forbidden"));
}

pub fn an_operator_credential_is_the_wrong_class(t: &dyn Target) {
    let a = t.attempt("agent");
    let operator = t.operator_token();
    assert_eq!(
        code(&t.call(&a, &operator, op("read_context", json!({})))),
        (403, "wrong_credential_class")
    );
}

pub fn a_declared_segment_is_authority_released(t: &dyn Target) {
    let a = t.attempt("agent");
    assert_eq!(
        t.call(&a, &a.token, op("declare_outcome", json!({"status": "succeeded"})))
            .0,
        200
    );
    assert_eq!(
        code(&t.call(&a, &a.token, op("emit", json!({"type": "suite.x"})))),
        (403, "authority_released")
    );
    let garbage = "B".repeat(43);
    assert_eq!(
        code(&t.call(&a, &garbage, op("emit", json!({"type": "suite.x"})))),
        (403, "forbidden")
    );
}

pub fn emit_refuses_forged_fields_and_foreign_keys(t: &dyn Target) {
    let a = t.attempt("agent");
    for forged in ["source", "parent", "work_id", "actor"] {
        let input = json!({"type": "suite.x", forged: "forged"});
        assert_eq!(
            code(&t.call(&a, &a.token, op("emit", input))),
            (400, "invalid_input"),
            "{forged}"
        );
    }
    let reserved = t.call(&a, &a.token, op("emit", json!({"type": "core.work.created"})));
    assert_eq!(code(&reserved), (422, "event_type_not_allowed"));
    let foreign = t.call(
        &a,
        &a.token,
        op("emit", json!({"type": "suite.x", "correlation_key": "work:other"})),
    );
    assert_eq!(code(&foreign), (422, "correlation_not_owned"));
}

pub fn an_emission_is_attributed_by_the_host(t: &dyn Target) {
    let a = t.attempt("agent");
    let (status, body) = t.call(
        &a,
        &a.token,
        op("emit", json!({"type": "suite.noted", "data": {"n": 1}})),
    );
    assert_eq!(status, 200, "{body}");
    let events = t.events(&a.work_id);
    let find = |ty: &str| {
        events
            .iter()
            .find(|e| e["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty}"))
            .clone()
    };
    let (created, noted) = (find("core.work.created"), find("suite.noted"));
    assert_eq!(noted["id"], body["output"]["event_id"]);
    assert_eq!(noted["source"], format!("execution:{}", a.execution_id));
    assert_eq!(noted["causation"]["parent"], created["id"]);
    assert_eq!(find("agent.toolCalled")["data"]["toolName"], "emit");
    assert_eq!(find("agent.toolReturned")["data"]["status"], "ok");
}

pub fn a_request_id_replays_and_refuses_a_changed_body(t: &dyn Target) {
    let a = t.attempt("agent");
    let emit = |ty: &str| json!({"operation": "emit", "input": {"type": ty}, "request_id": "same"});
    let first = t.call(&a, &a.token, emit("suite.once"));
    let again = t.call(&a, &a.token, emit("suite.once"));
    assert_eq!((first.0, &first.1), (200, &again.1));
    assert_eq!(
        code(&t.call(&a, &a.token, emit("suite.other"))),
        (409, "request_conflict")
    );
    let count = t
        .events(&a.work_id)
        .iter()
        .filter(|e| e["type"] == "suite.once")
        .count();
    assert_eq!(count, 1);
}

pub fn the_causal_depth_bound_refuses_a_runaway_chain(t: &dyn Target) {
    let a = t.attempt("agent");
    let routed = t.call(&a, &a.token, op("emit", json!({"type": "suite.requested"})));
    assert_eq!(code(&routed), (422, "causal_depth_exceeded"));
    assert!(t.events(&a.work_id).iter().all(|e| e["type"] != "suite.requested"));
}

pub fn a_superseded_token_is_forbidden(t: &dyn Target) {
    let a = t.attempt("agent");
    let rotated = t.supersede(&a);
    assert_ne!(rotated, a.token);
    assert_eq!(
        code(&t.call(&a, &a.token, op("read_context", json!({})))),
        (403, "forbidden")
    );
    let (status, body) = t.call(&a, &rotated, op("read_context", json!({})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"]["execution"]["epoch"], 2);
}

pub fn the_store_holds_digests_never_tokens(t: &dyn Target) {
    let a = t.attempt("agent");
    assert_eq!(t.call(&a, &a.token, op("emit", json!({"type": "suite.x"}))).0, 200);
    let bytes = t.store_bytes();
    assert!(
        !bytes.windows(a.token.len()).any(|w| w == a.token.as_bytes()),
        "a plaintext token is stored"
    );
    let digest = conduit_toolbelt::token::digest(&a.token);
    assert!(
        bytes.windows(32).any(|w| w == digest),
        "the digest is what the store keeps"
    );
}

pub fn guidance_lists_only_granted_operations(t: &dyn Target) {
    let a = t.attempt("narrow");
    let (status, body) = t.guidance(&a, &a.token);
    assert_eq!(status, 200, "{body}");
    let names: Vec<&str> = body["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["read_context"]);
    assert_eq!(code(&t.guidance(&a, "garbage")), (403, "forbidden"));
}

/// A case: its name, whether it asserts a security rule (a refusal), and the case.
pub type Case = (&'static str, bool, fn(&dyn Target));

/// Every case.
pub const CASES: &[Case] = &[
    ("a_live_token_reads_its_context", false, a_live_token_reads_its_context),
    ("a_garbage_token_is_forbidden", true, a_garbage_token_is_forbidden),
    (
        "another_executions_token_is_forbidden",
        true,
        another_executions_token_is_forbidden,
    ),
    ("narrowing_assertions_must_hold", true, narrowing_assertions_must_hold),
    (
        "an_ungranted_or_undeclared_operation_is_forbidden",
        true,
        an_ungranted_or_undeclared_operation_is_forbidden,
    ),
    (
        "an_operator_credential_is_the_wrong_class",
        true,
        an_operator_credential_is_the_wrong_class,
    ),
    (
        "a_declared_segment_is_authority_released",
        true,
        a_declared_segment_is_authority_released,
    ),
    (
        "emit_refuses_forged_fields_and_foreign_keys",
        true,
        emit_refuses_forged_fields_and_foreign_keys,
    ),
    (
        "an_emission_is_attributed_by_the_host",
        false,
        an_emission_is_attributed_by_the_host,
    ),
    (
        "a_request_id_replays_and_refuses_a_changed_body",
        true,
        a_request_id_replays_and_refuses_a_changed_body,
    ),
    (
        "the_causal_depth_bound_refuses_a_runaway_chain",
        true,
        the_causal_depth_bound_refuses_a_runaway_chain,
    ),
    ("a_superseded_token_is_forbidden", true, a_superseded_token_is_forbidden),
    (
        "the_store_holds_digests_never_tokens",
        true,
        the_store_holds_digests_never_tokens,
    ),
    (
        "guidance_lists_only_granted_operations",
        true,
        guidance_lists_only_granted_operations,
    ),
];

/// Runs every case against a fresh target from `make`, and names every case that failed.
pub fn run_all<T: Target>(make: impl Fn() -> T) {
    let failed: Vec<&str> = CASES
        .iter()
        .filter(|(name, _, case)| {
            let target = make();
            let passed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&target))).is_ok();
            if !passed {
                eprintln!("conformance case failed: {name}");
            }
            !passed
        })
        .map(|(name, _, _)| *name)
        .collect();
    assert!(failed.is_empty(), "conformance cases failed: {failed:?}");
}
