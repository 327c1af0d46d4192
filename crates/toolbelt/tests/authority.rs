//! The toolbelt's ordered checks and builtins, in process against a real SQLite file. Each security
//! rule has a row that fails if the rule is removed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use conduit_config::default_config_json;
use conduit_core::{Causation, Duration, ErrorCode, OperatorRecord, Role, Source, Timestamp, TokenRecord};
use conduit_scheduler::{adopt, take_over, Claim, Lessee, DEFAULT_LEASE};
use conduit_store::new_id;
use conduit_store::TokenLease;
use conduit_toolbelt::checks;
use conduit_toolbelt::token::{digest, issue};
use serde_json::{json, Value};

#[test]
fn a_live_token_reads_its_context() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let ctx = h.call(&claim, &token, "read_context", json!({})).unwrap();
    assert_eq!(ctx["work"]["id"], claim.work.id.as_str());
    assert_eq!(ctx["execution"]["epoch"], 1);
    assert_eq!(ctx["wake"]["type"], "core.work.created");
    // The whole shape (its text is written with no value tree on the way): every key, and the
    // Work and the attempt as they are.
    let fields: Vec<&str> = ctx.as_object().unwrap().keys().map(String::as_str).collect();
    let expected = [
        "binding",
        "execution",
        "input",
        "operations",
        "playbook",
        "scope",
        "wake",
        "work",
    ];
    assert_eq!(fields, expected);
    assert_eq!(ctx["work"], serde_json::to_value(&claim.work).unwrap());
    let execution = &claim.execution;
    let deadline = serde_json::to_value(execution.deadline_at).unwrap();
    assert_eq!(
        ctx["execution"],
        json!({"id": execution.id, "epoch": 1, "deadline_at": deadline})
    );
    assert_eq!((&ctx["scope"], &ctx["binding"]), (&json!("setup"), &json!("shell")));
    assert!(ctx["input"].is_array() && ctx["operations"].as_array().is_some_and(|o| !o.is_empty()));
}

#[test]
fn credential_checks_answer_the_bare_forbidden() {
    let h = default_harness();
    let (a, a_token) = h.attempt();
    let (b, _) = h.attempt();
    let forbidden = Err(ErrorCode::Forbidden);
    assert_eq!(
        h.call(&a, "not-a-token", "read_context", json!({})),
        forbidden,
        "unknown digest"
    );
    assert_eq!(
        h.call(&b, &a_token, "read_context", json!({})),
        forbidden,
        "another execution's socket"
    );
    let expiry = a.execution.deadline_at;
    let read = json!({"operation": "read_context"});
    assert_eq!(
        h.call_at(&a, &a_token, read.clone(), expiry),
        forbidden,
        "expiry is exclusive"
    );
    assert!(h.call_at(&a, &a_token, read, Timestamp(T0.0 + 1)).is_ok());
}

/// Past 2^53 two integers share an input hash (and so an approval, a gate's verdict, a replay):
/// such an input is refused before anything is recorded; at 2^53 it is served.
#[test]
fn an_input_integer_its_hash_cannot_tell_apart_is_refused() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let emit = |n: Value| h.call(&claim, &token, "emit", json!({"type": "demo.n", "data": {"n": n}}));
    assert_eq!(emit(json!(9_007_199_254_740_993_u64)), Err(ErrorCode::InvalidInput));
    assert_eq!(emit(json!(-9_007_199_254_740_993_i64)), Err(ErrorCode::InvalidInput));
    assert!(emit(json!(9_007_199_254_740_992_u64)).is_ok(), "at 2^53");
    let audited = h.store.read(|tx| tx.list_audit(Some(&claim.execution.id), 10)).unwrap();
    assert_eq!(audited.len(), 1, "only the served call is recorded");
}

#[test]
fn narrowing_assertions_must_match() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    for (field, value) in [("execution_id", "other"), ("work_id", "other"), ("scope_id", "other")] {
        let request = json!({"operation": "read_context", field: value});
        assert_eq!(
            h.call_at(&claim, &token, request, T0),
            Err(ErrorCode::Forbidden),
            "{field}"
        );
    }
    let request = json!({"operation": "read_context", "execution_id": claim.execution.id, "work_id": claim.work.id, "scope_id": "setup"});
    assert!(h.call_at(&claim, &token, request, T0).is_ok(), "true assertions pass");
}

#[test]
fn operations_must_be_declared_and_granted() {
    let text = default_config_json().replacen(
        r#""operations": ["emit", "read_context", "declare_outcome", "wait", "create_work"]
        }"#,
        r#""operations": ["read_context"]
        }"#,
        1,
    );
    let h = Harness::new(&text);
    let (claim, token) = h.attempt();
    assert!(h.call(&claim, &token, "read_context", json!({})).is_ok());
    assert_eq!(
        h.call(&claim, &token, "emit", json!({"type": "demo.x"})),
        Err(ErrorCode::Forbidden),
        "not granted"
    );
    assert_eq!(
        h.call(&claim, &token, "github.issue.view", json!({})),
        Err(ErrorCode::Forbidden),
        "undeclared"
    );
}

#[test]
fn narrowing_the_configuration_revokes_at_once() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    assert!(h.call(&claim, &token, "emit", json!({"type": "demo.x"})).is_ok());
    let narrowed = default_config_json().replacen(
        r#""authorization": {"operations": ["emit", "read_context", "declare_outcome", "wait", "create_work"]}"#,
        r#""authorization": {"operations": ["read_context", "declare_outcome", "wait", "create_work"]}"#,
        1,
    );
    let narrowed = narrowed.replacen(
        r#""operations": ["emit", "read_context""#,
        r#""operations": ["read_context""#,
        1,
    );
    h.config.replace(config(&narrowed));
    assert_eq!(
        h.call(&claim, &token, "emit", json!({"type": "demo.x"})),
        Err(ErrorCode::Forbidden)
    );
    assert!(
        h.call(&claim, &token, "read_context", json!({})).is_ok(),
        "what the ceiling still allows works"
    );
    let disabled = default_config_json().replacen(r#""setup": {"#, r#""setup": {"enabled": false,"#, 1);
    h.config.replace(config(&disabled));
    assert_eq!(
        h.call(&claim, &token, "read_context", json!({})),
        Err(ErrorCode::Forbidden),
        "disabled scope"
    );
}

#[test]
fn the_lease_guard_refuses_superseded_and_expired_attempts() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let lease_end = Timestamp(T0.0 + DEFAULT_LEASE.0);
    let read = json!({"operation": "read_context"});
    assert_eq!(
        h.call_at(&claim, &token, read.clone(), lease_end),
        Err(ErrorCode::Forbidden),
        "lease expired"
    );
    let adopted = h
        .store
        .write(|tx| {
            let c = adopt(tx, &claim.execution.id, &Lessee::new("new-owner"), T0)?.unwrap();
            let t = issue(tx, &c.execution, &c.work, vec!["read_context".into()], None, T0)?;
            Ok::<_, conduit_scheduler::HostError>((c, t))
        })
        .unwrap();
    assert_eq!(
        h.call_at(&claim, &token, read.clone(), T0),
        Err(ErrorCode::Forbidden),
        "lower epoch revoked"
    );
    // A revoked token with a wrong assertion still answers the bare forbidden.
    let wrong = json!({"operation": "read_context", "scope_id": "nope"});
    assert_eq!(h.call_at(&claim, &token, wrong, T0), Err(ErrorCode::Forbidden));
    assert!(
        h.call_at(&adopted.0, &adopted.1, read, T0).is_ok(),
        "the rotated token works"
    );
}

/// Check 5 judges each claim a live token makes on the lease by itself: a record that is neither
/// revoked nor expired but names another epoch, owner or scope than the execution and its Work
/// hold is refused (check 1 and the ceiling would let each through: the other scope allows
/// `read_context` too); the same record with the execution's own claims is let through, the control.
#[test]
fn the_lease_guard_refuses_a_live_token_whose_claims_the_lease_does_not_hold() {
    let another_scope = r#""scopes": {"other": {"authorization": {"operations": ["read_context"]}}, "#;
    let h = Harness::new(&default_config_json().replacen(r#""scopes": {"#, another_scope, 1));
    let (claim, token) = h.attempt();
    let genuine = h.store.read(|tx| tx.token_by_digest(&digest(&token))).unwrap().unwrap();
    let read = json!({"operation": "read_context"});
    type Edit = fn(&mut TokenRecord);
    let forged: [(&str, Edit); 4] = [
        ("the execution's own claims", |_| {}),
        ("another epoch", |t| t.epoch += 1),
        ("another owner", |t| t.owner = "another-daemon".into()),
        ("another scope", |t| t.scope = "other".into()),
    ];
    for (n, (claims, edit)) in forged.into_iter().enumerate() {
        let plaintext = format!("forged-token-{n}");
        let mut record = TokenRecord {
            id: new_id(),
            digest: digest(&plaintext),
            ..genuine.clone()
        };
        edit(&mut record);
        h.store.write(|tx| tx.insert_token(&record)).unwrap();
        let answer = h.call_at(&claim, &plaintext, read.clone(), T0);
        if n == 0 {
            assert!(answer.is_ok(), "{claims}: {answer:?}");
        } else {
            assert_eq!(answer, Err(ErrorCode::Forbidden), "{claims}");
        }
    }
}

/// Check 5 takes only the token's own rows: a lease whose execution, Work or cause event is another
/// attempt's (what an adapter's bad join would hand it) is refused; the genuine one passes.
#[test]
fn the_lease_guard_refuses_rows_that_are_not_the_tokens_own() {
    let h = default_harness();
    let (_, token) = h.attempt();
    let (_, other) = h.attempt();
    let lease_of = |t: &str| {
        h.store
            .read(|tx| tx.token_lease_by_digest(&digest(t)))
            .unwrap()
            .unwrap()
    };
    let (genuine, theirs) = (lease_of(&token), lease_of(&other));
    assert!(checks::check_lease(genuine.clone(), T0).is_ok(), "the control");
    let swapped = [
        (
            "another execution",
            TokenLease {
                execution: theirs.execution.clone(),
                ..genuine.clone()
            },
        ),
        (
            "another Work",
            TokenLease {
                work: theirs.work.clone(),
                ..genuine.clone()
            },
        ),
        (
            "another cause",
            TokenLease {
                cause: theirs.cause.clone(),
                ..genuine.clone()
            },
        ),
    ];
    for (rows, lease) in swapped {
        let refused = checks::check_lease(lease, T0).map(|_| ()).map_err(|e| e.refusal().code);
        assert_eq!(refused, Err(ErrorCode::Forbidden), "{rows}");
    }
}

/// A lease row the store cannot read does not turn check 1's refusal into a store error: a revoked
/// token is still the bare `forbidden`. The control: the live token meets the store's error.
#[test]
fn a_lease_row_that_cannot_be_read_leaves_check_1_to_decide() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    // A read commits what the writer holds, so another connection may write.
    h.store.read(|tx| tx.get_execution(&claim.execution.id)).unwrap();
    let conn = rusqlite::Connection::open(h.dir.path().join("store.db")).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    let broken = "UPDATE executions SET agent_usage = 'not json' WHERE id = ?1";
    conn.execute(broken, [&claim.execution.id]).unwrap();
    let read = json!({"operation": "read_context"});
    assert_eq!(
        h.call_at(&claim, &token, read.clone(), T0),
        Err(ErrorCode::Internal),
        "the control"
    );
    h.store
        .write(|tx| tx.revoke_execution_tokens(&claim.execution.id, T0))
        .unwrap();
    assert_eq!(h.call_at(&claim, &token, read, T0), Err(ErrorCode::Forbidden));
}

#[test]
fn a_token_of_an_attempt_another_daemon_took_over_is_refused() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let read = json!({"operation": "read_context"});
    assert!(
        h.call_at(&claim, &token, read.clone(), T0).is_ok(),
        "control: live before"
    );
    let lapsed = Timestamp(T0.0 + DEFAULT_LEASE.0);
    h.store
        .write(|tx| take_over(tx, &claim.execution.id, "other", Default::default(), lapsed))
        .unwrap()
        .expect("taken over");
    assert_eq!(
        h.call_at(&claim, &token, read, T0),
        Err(ErrorCode::Forbidden),
        "revoked, even at a time its lease still covered"
    );
}

#[test]
fn a_declared_segment_is_authority_released_only_for_its_genuine_token() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    assert_eq!(
        h.call(&claim, &token, "declare_outcome", json!({"status": "succeeded"}))
            .unwrap()["declared"],
        "outcome"
    );
    assert_eq!(
        h.call(&claim, &token, "emit", json!({"type": "demo.x"})),
        Err(ErrorCode::AuthorityReleased)
    );
    assert_eq!(
        h.call(&claim, &token, "wait", json!({"types": ["demo.x"]})),
        Err(ErrorCode::AuthorityReleased)
    );
    assert_eq!(
        h.call(&claim, "forged", "emit", json!({"type": "demo.x"})),
        Err(ErrorCode::Forbidden)
    );
    let wrong = json!({"operation": "emit", "input": {"type": "demo.x"}, "work_id": "other"});
    assert_eq!(
        h.call_at(&claim, &token, wrong, T0),
        Err(ErrorCode::Forbidden),
        "an earlier check fails first"
    );
}

#[test]
fn an_operator_credential_is_the_wrong_class() {
    let h = default_harness();
    let (claim, _) = h.attempt();
    let operator = "operator-secret";
    let record = OperatorRecord {
        id: new_id(),
        name: "local".into(),
        role: Role::Admin,
        digest: digest(operator),
        created_at: T0,
        revoked_at: None,
        revoked_by: None,
    };
    h.store.write(|tx| tx.insert_operator(&record)).unwrap();
    assert_eq!(
        h.call(&claim, operator, "read_context", json!({})),
        Err(ErrorCode::WrongCredentialClass)
    );
}

#[test]
fn emit_assigns_trusted_fields_and_refuses_forgery() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let out = h
        .call(&claim, &token, "emit", json!({"type": "demo.x", "data": {"k": 1}}))
        .unwrap();
    let event = h
        .store
        .read(|tx| tx.get_event(out["event_id"].as_str().unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(event.source, Source::Execution(claim.execution.id.clone()));
    assert_eq!(event.work_id.as_deref(), Some(claim.work.id.as_str()));
    assert_eq!(
        event.causation.parent.as_deref(),
        Some(claim.execution.cause_event.as_str())
    );

    let refused = |input: Value| h.call(&claim, &token, "emit", input).unwrap_err();
    assert_eq!(
        refused(json!({"type": "core.work.created"})),
        ErrorCode::EventTypeNotAllowed
    );
    assert_eq!(
        refused(json!({"type": "toolbelt.called"})),
        ErrorCode::EventTypeNotAllowed
    );
    assert_eq!(
        refused(json!({"type": "demo.x", "source": "core.manual"})),
        ErrorCode::InvalidInput
    );
    assert_eq!(
        refused(json!({"type": "demo.x", "parent": "e1"})),
        ErrorCode::InvalidInput
    );
    assert_eq!(
        refused(json!({"type": "demo.x", "work_id": "other"})),
        ErrorCode::InvalidInput
    );
    assert_eq!(
        refused(json!({"type": "demo.x", "correlation_key": "work:someone-else"})),
        ErrorCode::CorrelationNotOwned
    );
    assert_eq!(refused(json!({"type": "nonamespace"})), ErrorCode::InvalidInput);
    let own = format!("work:{}", claim.work.id);
    assert!(h
        .call(
            &claim,
            &token,
            "emit",
            json!({"type": "demo.x", "correlation_key": own})
        )
        .is_ok());
}

#[test]
fn a_binding_may_restrict_its_families() {
    let text = default_config_json().replacen(
        r#""executor": "shell","#,
        r#""executor": "shell", "emits": ["demo.*"],"#,
        1,
    );
    let h = Harness::new(&text);
    let (claim, token) = h.attempt();
    assert!(h.call(&claim, &token, "emit", json!({"type": "demo.ok"})).is_ok());
    assert_eq!(
        h.call(&claim, &token, "emit", json!({"type": "other.no"})),
        Err(ErrorCode::EventTypeNotAllowed)
    );
}

#[test]
fn the_causal_depth_bound_refuses_a_runaway_chain() {
    let text = default_config_json().replace(r#""causal_max_depth": 32"#, r#""causal_max_depth": 1"#);
    let h = Harness::new(&text);
    let (claim, token) = h.attempt(); // core.work.created is the root (depth 0); an emission is depth 1
    assert!(h.call(&claim, &token, "emit", json!({"type": "demo.x"})).is_ok());
    // demo.requested routes to new Work, whose core.work.created would be depth 2: the whole emit is refused.
    assert_eq!(
        h.call(&claim, &token, "emit", json!({"type": "demo.requested"})),
        Err(ErrorCode::CausalDepthExceeded)
    );
    let events = h.store.read(|tx| tx.list_events(None, 100)).unwrap();
    assert!(
        events.iter().all(|e| e.event_type != "demo.requested"),
        "a refused emit leaves nothing behind"
    );
}

#[test]
fn create_work_makes_a_ready_child_with_its_causal_event() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let out = h
        .call(
            &claim,
            &token,
            "create_work",
            json!({"binding": "shell", "input": {"n": 2}}),
        )
        .unwrap();
    let child = h
        .store
        .read(|tx| tx.get_work(out["work_id"].as_str().unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(child.parent_work.as_deref(), Some(claim.work.id.as_str()));
    assert_eq!(child.input, json!({"n": 2}));
    let created = h
        .store
        .read(|tx| tx.get_event(out["event_id"].as_str().unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(created.event_type, "core.work.created");
    assert_eq!(
        created.causation.parent.as_deref(),
        Some(claim.execution.cause_event.as_str())
    );
    assert_eq!(
        h.call(&claim, &token, "create_work", json!({"binding": "nope"})),
        Err(ErrorCode::UnknownBinding)
    );
}

#[test]
fn wait_input_is_validated() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    assert_eq!(
        h.call(&claim, &token, "wait", json!({"types": []})),
        Err(ErrorCode::InvalidInput)
    );
    assert_eq!(
        h.call(&claim, &token, "wait", json!({"types": ["demo.x"], "timeout": "soon"})),
        Err(ErrorCode::InvalidInput)
    );
    assert_eq!(
        h.call(&claim, &token, "wait", json!({"types": ["demo.x"], "keys": ["pr:1"]})),
        Err(ErrorCode::CorrelationNotOwned)
    );
    assert!(h
        .call(&claim, &token, "wait", json!({"types": ["demo.*"], "timeout": "10m"}))
        .is_ok());
    let x = h
        .store
        .read(|tx| tx.get_execution(&claim.execution.id))
        .unwrap()
        .unwrap();
    assert!(matches!(
        x.declaration,
        Some(conduit_core::Declaration::Wait {
            timeout: Some(Duration(600_000)),
            ..
        })
    ));
}

#[test]
fn the_store_holds_digests_never_plaintext_tokens() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    h.call(&claim, &token, "emit", json!({"type": "demo.x"})).unwrap();
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(h.dir.path()).unwrap().flatten() {
        bytes.extend(std::fs::read(entry.path()).unwrap());
    }
    assert!(!bytes.is_empty());
    let found = bytes.windows(token.len()).any(|w| w == token.as_bytes());
    assert!(!found, "the plaintext token is in the store's files");
    let digest = digest(&token);
    assert!(bytes.windows(32).any(|w| w == digest), "the digest is what is stored");
}

fn audit_of(h: &Harness, claim: &Claim) -> Vec<conduit_core::AuditRecord> {
    h.store
        .read(|tx| tx.list_audit(Some(&claim.execution.id), 100))
        .unwrap()
}

fn events_of(h: &Harness, claim: &Claim) -> Vec<conduit_core::Event> {
    h.store.read(|tx| tx.list_events(Some(&claim.work.id), 100)).unwrap()
}

#[test]
fn every_call_leaves_an_audit_record_with_a_hash_not_the_input() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    h.call(
        &claim,
        &token,
        "emit",
        json!({"type": "demo.x", "data": {"secret": "hunter2"}}),
    )
    .unwrap();
    h.call(&claim, "garbage", "emit", json!({"type": "demo.x"}))
        .unwrap_err();
    h.call(&claim, &token, "emit", json!({"type": "core.x"})).unwrap_err();
    let audit = audit_of(&h, &claim);
    let rows: Vec<(&str, &str)> = audit.iter().map(|a| (a.kind.as_str(), a.result.as_str())).collect();
    assert_eq!(
        rows,
        vec![
            ("toolbelt.called", "ok"),
            ("toolbelt.rejected", "forbidden"),
            ("toolbelt.rejected", "event_type_not_allowed"),
        ]
    );
    let input = json!({"type": "demo.x", "data": {"secret": "hunter2"}});
    assert_eq!(audit[0].input_hash, conduit_core::canonical::canonical_hash(&input));
    assert!(!format!("{audit:?}").contains("hunter2"));
    assert_eq!(audit[1].work_id, None, "a call refused at the checks names no Work");
}

#[test]
fn calls_that_reach_an_operation_are_on_the_works_log() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    h.call(&claim, &token, "read_context", json!({})).unwrap();
    h.call(&claim, &token, "emit", json!({"type": "demo.x", "bogus": 1}))
        .unwrap_err();
    h.call(&claim, "garbage", "read_context", json!({})).unwrap_err();
    let events = events_of(&h, &claim);
    let agent: Vec<&conduit_core::Event> = events.iter().filter(|e| e.event_type.starts_with("agent.")).collect();
    let shape: Vec<(&str, &str, &str)> = agent
        .iter()
        .map(|e| {
            (
                e.event_type.as_str(),
                e.data["toolName"].as_str().unwrap(),
                e.data["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("agent.toolCalled", "read_context", ""),
            ("agent.toolReturned", "read_context", "ok"),
            ("agent.toolCalled", "emit", ""),
            ("agent.toolReturned", "emit", "error"),
        ]
    );
    assert_eq!(
        agent[1].causation.parent.as_deref(),
        Some(agent[0].id.as_str()),
        "causationId is the called event"
    );
    assert_eq!(agent[1].data["callId"], agent[0].data["callId"]);
    assert_eq!(agent[0].data["agentId"], claim.execution.id.as_str());
    assert_eq!(agent[0].source, Source::Toolbelt);
    // Each call continues the segment's cause; each return continues its call (root and depth too).
    let cause = h
        .store
        .read(|tx| tx.get_event(&claim.execution.cause_event))
        .unwrap()
        .unwrap();
    for pair in agent.chunks(2) {
        assert_eq!(pair[0].causation, Causation::derived_from(&cause));
        assert_eq!(pair[1].causation, Causation::derived_from(pair[0]));
    }
}

fn with_request(operation: &str, input: Value, request_id: &str) -> Value {
    json!({"operation": operation, "input": input, "request_id": request_id})
}

/// A read's answer, written as text, is kept for its request id as the value it stands for: the
/// retry is answered the same.
#[test]
fn a_read_with_a_request_id_is_replayed_as_it_was_answered() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let read = || h.call_at(&claim, &token, with_request("read_context", json!({}), "r1"), T0);
    let first = read().unwrap();
    assert_eq!(first["work"]["id"], claim.work.id.as_str());
    assert_eq!(read().unwrap(), first);
}

#[test]
fn a_request_id_replays_the_committed_result_and_refuses_a_changed_body() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let first = h
        .call_at(
            &claim,
            &token,
            with_request("emit", json!({"type": "demo.x"}), "r1"),
            T0,
        )
        .unwrap();
    let again = h
        .call_at(
            &claim,
            &token,
            with_request("emit", json!({"type": "demo.x"}), "r1"),
            T0,
        )
        .unwrap();
    assert_eq!(first, again);
    let emitted = events_of(&h, &claim)
        .into_iter()
        .filter(|e| e.event_type == "demo.x")
        .count();
    assert_eq!(emitted, 1, "the retry emitted nothing new");
    let changed = h.call_at(
        &claim,
        &token,
        with_request("emit", json!({"type": "demo.y"}), "r1"),
        T0,
    );
    assert_eq!(changed, Err(ErrorCode::RequestConflict));
    assert!(h
        .call_at(
            &claim,
            &token,
            with_request("emit", json!({"type": "demo.y"}), "r2"),
            T0
        )
        .is_ok());
    let results: Vec<String> = audit_of(&h, &claim).into_iter().map(|a| a.result).collect();
    assert_eq!(results, vec!["ok", "replayed", "request_conflict", "ok"]);
}

#[test]
fn a_duplicate_declaration_after_a_lost_response_is_authority_released() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let declare = with_request("declare_outcome", json!({"status": "failed"}), "d1");
    assert!(h.call_at(&claim, &token, declare.clone(), T0).is_ok());
    assert_eq!(
        h.call_at(&claim, &token, declare, T0),
        Err(ErrorCode::AuthorityReleased)
    );
}

#[test]
fn child_ids_derive_from_the_request_id() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let child = h
        .call_at(
            &claim,
            &token,
            with_request("create_work", json!({"binding": "shell"}), "c1"),
            T0,
        )
        .unwrap();
    let expected = conduit_store::derived_id(&[&format!("{}/c1", claim.execution.id), "work"]);
    assert_eq!(child["work_id"], expected.as_str());
}

#[test]
fn the_per_minute_bound_is_pinned_by_the_roots_first_emission() {
    let tight = default_config_json().replace(r#""causal_per_minute": 600"#, r#""causal_per_minute": 3"#);
    let h = Harness::new(&tight);
    let (claim, token) = h.attempt(); // the root core.work.created is 1 of 3
    h.config.replace(config(default_config_json())); // loosening later does not unpin the root
    assert!(h.call(&claim, &token, "emit", json!({"type": "demo.a"})).is_ok());
    assert!(h.call(&claim, &token, "emit", json!({"type": "demo.b"})).is_ok());
    assert_eq!(
        h.call(&claim, &token, "emit", json!({"type": "demo.c"})),
        Err(ErrorCode::CausalRateExceeded)
    );
    let a_minute_later = Timestamp(T0.0 + 60_001);
    let emit = json!({"operation": "emit", "input": {"type": "demo.d"}});
    let renewed = h
        .store
        .write(|tx| conduit_scheduler::renew_lease(tx, &claim.execution.id, 1, &Lessee::new("owner"), a_minute_later));
    assert!(renewed.unwrap());
    assert!(
        h.call_at(&claim, &token, emit, a_minute_later).is_ok(),
        "the window slides"
    );
}

#[test]
fn the_sweep_deletes_settled_tokens_and_finished_replay_records() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    h.call_at(&claim, &token, with_request("read_context", json!({}), "r1"), T0)
        .unwrap();
    h.store
        .write(|tx| {
            conduit_scheduler::complete(
                tx,
                &claim.execution.id,
                conduit_core::execution::SegmentEnd::Exited(0),
                Default::default(),
                T0,
            )
        })
        .unwrap();
    let day = conduit_toolbelt::sweep::RETENTION.0;
    let early = conduit_toolbelt::sweep::sweep(&*h.store, Timestamp(T0.0 + day - 1)).unwrap();
    assert_eq!((early.tokens, early.requests), (0, 0), "kept for 24 hours");
    let swept = conduit_toolbelt::sweep::sweep(&*h.store, Timestamp(T0.0 + day + 1)).unwrap();
    assert_eq!((swept.tokens, swept.requests), (1, 1));
    assert!(h
        .store
        .read(|tx| tx.token_by_digest(&digest(&token)))
        .unwrap()
        .is_none());
    assert_eq!(
        h.call(&claim, &token, "read_context", json!({})),
        Err(ErrorCode::Forbidden),
        "a deleted token is unknown"
    );
}

#[test]
fn a_live_executions_replay_records_are_kept() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    h.call_at(&claim, &token, with_request("read_context", json!({}), "r1"), T0)
        .unwrap();
    let day = conduit_toolbelt::sweep::RETENTION.0;
    let swept = conduit_toolbelt::sweep::sweep(&*h.store, Timestamp(T0.0 + 2 * day)).unwrap();
    assert_eq!(swept.requests, 0);
}

#[test]
fn a_rotated_token_keeps_the_pinned_grant_and_expires_with_its_lifetime() {
    let h = default_harness();
    let (claim, token) = h.attempt();
    let lifetime = Some(Duration::from_secs(120));
    let (next, expires) = h
        .store
        .write(|tx| conduit_toolbelt::token::rotate(tx, &token, lifetime, T0))
        .unwrap()
        .expect("a live token rotates");
    assert_eq!(expires, Timestamp(T0.0 + 120_000));
    let record = h.store.read(|tx| tx.token_by_digest(&digest(&next))).unwrap().unwrap();
    let first = h.store.read(|tx| tx.token_by_digest(&digest(&token))).unwrap().unwrap();
    assert_eq!(record.operations, first.operations, "the pinned grant carries over");
    assert!(h.call(&claim, &next, "read_context", json!({})).is_ok());
    assert!(
        h.call(&claim, &token, "read_context", json!({})).is_ok(),
        "the predecessor lives out its time"
    );
    let just_before = Timestamp(expires.0 - 1);
    let renewed = h
        .store
        .write(|tx| conduit_scheduler::renew_lease(tx, &claim.execution.id, 1, &Lessee::new("owner"), just_before));
    assert!(renewed.unwrap(), "the lease outlives the token");
    let read = json!({"operation": "read_context"});
    assert!(h.call_at(&claim, &next, read.clone(), just_before).is_ok());
    assert_eq!(
        h.call_at(&claim, &next, read, expires),
        Err(ErrorCode::Forbidden),
        "it expires with its lifetime"
    );
    let garbage = h
        .store
        .write(|tx| conduit_toolbelt::token::rotate(tx, "garbage", lifetime, T0))
        .unwrap();
    assert!(garbage.is_none(), "only a live token has a successor");
}
