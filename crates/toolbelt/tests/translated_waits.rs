//! Translated waits: an extension operation answers a wait that the toolbelt declares as `wait`
//! does (under the lease guard, as the segment's one declaration, releasing authority), owned by
//! the operation's registration; a matching event wakes the Work.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use conduit_config::default_config_json;
use conduit_core::tool::{CatalogFields, ToolSource};
use conduit_core::{Declaration, ErrorCode, Refusal, WorkState};
use conduit_scheduler::Claim;
use conduit_toolbelt::registry::{
    Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationSpec, Registration, WaitRequest,
};
use conduit_toolbelt::{CallRequest, Registry};
use serde_json::{json, Value};

/// `watch.until` answers a wait on the event types and keys its input names.
struct Watch;

impl Handler for Watch {
    fn call(&self, call: HandlerCall) -> HandlerFuture {
        let strings = |name: &str| serde_json::from_value::<Vec<String>>(call.input[name].clone()).unwrap();
        let out = HandlerOutput {
            output: json!({"watching": true}),
            emit: vec![],
            wait: Some(WaitRequest {
                types: strings("types"),
                keys: strings("keys"),
                timeout: None,
            }),
            secret: false,
        };
        Box::pin(async move { Ok(out) })
    }
}

fn harness() -> Harness {
    let mut registry = Registry::default();
    registry
        .register(Registration {
            name: "watch".into(),
            source: ToolSource::HostExtension,
            operations: vec![OperationSpec {
                name: "watch.until".into(),
                title: None,
                summary: "waits for an event".into(),
                input_schema: json!({"type": "object"}),
                output_schema: json!({"type": "object"}),
                catalog: CatalogFields::write(),
                capabilities: vec![],
                handler: Arc::new(Watch),
            }],
            toolsets: vec![],
        })
        .unwrap();
    let config = default_config_json().replace(r#""create_work"]"#, r#""create_work", "watch.until"]"#);
    Harness::with_registry(&config, registry)
}

fn until(h: &Harness, claim: &Claim, token: &str, types: &[&str], keys: &[&str]) -> Result<Value, Refusal> {
    let request = json!({"operation": "watch.until", "input": {"types": types, "keys": keys}});
    let request: CallRequest = serde_json::from_value(request).unwrap();
    block_on(h.toolbelt.call(&claim.execution.id, token, &request))
}

fn declaration(h: &Harness, claim: &Claim) -> Option<Declaration> {
    let execution = h.store.read(|tx| tx.get_execution(&claim.execution.id)).unwrap();
    execution.unwrap().declaration
}

#[test]
fn an_operations_wait_is_declared_as_wait_declares_one_and_releases_authority() {
    let h = harness();
    let (claim, token) = h.attempt();
    let answer = until(&h, &claim, &token, &["watch.seen"], &["watch:thing/1"]).unwrap();
    assert_eq!(answer["output"], json!({"watching": true}));
    assert_eq!(answer["wait"]["keys"], json!(["watch:thing/1"]));
    assert_eq!(
        declaration(&h, &claim),
        Some(Declaration::Wait {
            types: vec!["watch.seen".into()],
            keys: vec!["watch:thing/1".into()],
            timeout: None,
            artifacts: vec![],
        })
    );
    let again = until(&h, &claim, &token, &["watch.seen"], &["watch:thing/2"]).unwrap_err();
    assert_eq!(again.code, ErrorCode::AuthorityReleased, "one declaration per segment");
    assert_eq!(
        h.call(&claim, &token, "emit", json!({"type": "demo.step"})),
        Err(ErrorCode::AuthorityReleased)
    );
}

#[test]
fn a_wait_on_another_namespaces_key_the_work_does_not_own_is_refused_and_declares_nothing() {
    let h = harness();
    let (claim, token) = h.attempt();
    let refused = until(
        &h,
        &claim,
        &token,
        &["github.pull_request_review"],
        &["github:acme/app#1"],
    )
    .unwrap_err();
    assert_eq!(refused.code, ErrorCode::CorrelationNotOwned);
    assert_eq!(declaration(&h, &claim), None, "bad input changes nothing");
    // Control: the Work's own key and the registration's namespace are both its to wait on.
    let own = format!("work:{}", claim.work.id);
    until(&h, &claim, &token, &["watch.seen"], &[own.as_str(), "watch:x"]).unwrap();
    assert!(declaration(&h, &claim).is_some());
}

#[test]
fn an_invalid_translated_wait_is_the_operations_failure_and_keeps_authority() {
    let h = harness();
    let (claim, token) = h.attempt();
    let refused = until(&h, &claim, &token, &[], &["watch:x"]).unwrap_err();
    assert_eq!(refused.wire_code(), "operation_failed");
    assert_eq!(declaration(&h, &claim), None);
    h.call(&claim, &token, "emit", json!({"type": "demo.step"})).unwrap();
}

#[test]
fn a_matching_event_wakes_the_work_parked_on_a_translated_wait() {
    let h = harness();
    let (claim, token) = h.attempt();
    until(&h, &claim, &token, &["watch.seen"], &["watch:thing/1"]).unwrap();
    h.end_segment(&claim);
    assert_eq!(h.work_state(&claim), WorkState::Waiting);
    h.accept_event("watch.seen", "watch:thing/1");
    assert_eq!(h.work_state(&claim), WorkState::Ready, "the event woke it");
}

/// An execution may neither claim nor emit on a key in a registered extension's namespace: that
/// namespace's events come from the extension, so a Work cannot forge what wakes a translated
/// wait or take its routing. (Control: a key of no registration's namespace is fine.)
#[test]
fn an_execution_may_not_claim_or_emit_on_an_extensions_namespace() {
    let h = harness();
    let (claim, token) = h.attempt();
    let child = |key: &str| {
        h.call(
            &claim,
            &token,
            "create_work",
            json!({"binding": "shell", "keys": [key]}),
        )
    };
    assert_eq!(child("watch:thing/1"), Err(ErrorCode::CorrelationNotOwned));
    let forged = json!({"type": "watch.seen", "correlation_key": "watch:thing/1"});
    assert_eq!(
        h.call(&claim, &token, "emit", forged),
        Err(ErrorCode::CorrelationNotOwned)
    );
    child("pr:1").unwrap();
    child("watchful:1").unwrap();
}
