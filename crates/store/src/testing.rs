//! For the adapters' tests, the same on every engine (behind the `testing` feature): records, and
//! the cases every adapter must pass, each over a fresh store.

// Test cases stop loudly on what they did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_core::{
    AuditKind, AuditRecord, CausalPin, Causation, Execution, ExecutionState, NewEvent, NewRecord, Source, Timestamp,
    TokenRecord, Work, WorkState,
};
use serde_json::json;

use crate::{AuditFilter, EventFilter, Page, Store, StoreError, Tx};

/// The cases every adapter must pass, each to be run over a fresh store.
pub const CASES: [fn(&dyn Store); 14] = [
    work_round_trips_with_its_keys,
    an_attempt_sees_the_watermark_the_others_reached,
    a_token_lease_reads_what_the_separate_lookups_read,
    a_lease_read_again_sees_each_change_it_is_made_of_and_no_rolled_back_one,
    a_taken_key_rolls_back_the_whole_work,
    events_get_increasing_sequences_and_lose_forged_actors,
    a_failed_body_rolls_back,
    a_transaction_inside_another_is_refused,
    a_shared_key_is_made_once,
    ids_are_found_by_their_prefix_alone,
    a_pages_sequences_are_its_events_sequences,
    a_roots_bounds_are_its_pin_and_the_event_its_per_minute_back,
    a_record_written_as_text_reads_back_as_the_event_it_is,
    a_works_audit_pages_are_its_executions_records_in_order,
];

/// An id prefix finds exactly the ids that start with it, hyphens included: a collation that
/// ignored them would also find `0193a-b…` for `0193ab`.
pub fn ids_are_found_by_their_prefix_alone(store: &dyn Store) {
    use conduit_core::id_prefix::IdKind;
    for id in ["0193ab-1", "0193ab1", "0193ab2", "0193b", "0193a"] {
        store.write(|tx| tx.insert_work(&work(id, &[]))).unwrap();
    }
    let found = |prefix: &str, limit| {
        store
            .read(|tx| tx.ids_starting_with(IdKind::Work, prefix, limit))
            .unwrap()
    };
    assert_eq!(found("0193ab", 10), ["0193ab-1", "0193ab1", "0193ab2"]);
    assert_eq!(found("0193ab1", 10), ["0193ab1"]);
    assert_eq!(found("0193a", 2), ["0193a", "0193ab-1"]);
    assert!(found("0193c", 10).is_empty());
    assert!(found("0193ab", 10).iter().all(|id| id.starts_with("0193ab")));
    let none = store
        .read(|tx| tx.ids_starting_with(IdKind::Event, "0193", 10))
        .unwrap();
    assert!(none.is_empty(), "each kind's ids are its own");
}

/// A Work round-trips with its keys in the order it took them, and owns them.
pub fn work_round_trips_with_its_keys(store: &dyn Store) {
    let w = work("w1", &["work:w1", "pr:7", "a:first-by-name"]);
    store.write(|tx| tx.insert_work(&w)).unwrap();
    assert_eq!(store.read(|tx| tx.get_work("w1")).unwrap().unwrap(), w);
    assert_eq!(
        store.read(|tx| tx.work_owning_key("pr:7")).unwrap().as_deref(),
        Some("w1")
    );
}

/// A token's lease read in one go holds what the separate lookups find: the token, its execution,
/// its Work with its keys and the execution's cause event; a row that is not there is `None`.
pub fn a_token_lease_reads_what_the_separate_lookups_read(store: &dyn Store) {
    let lease = |digest: [u8; 32]| store.read(|tx| tx.token_lease_by_digest(&digest)).unwrap();
    store
        .write(|tx| {
            tx.insert_work(&work("w1", &["work:w1", "pr:7"]))?;
            tx.insert_work(&work("w2", &[]))?;
            tx.insert_event(event("e1"))?;
            tx.insert_execution(&execution("x1", "e1"))?;
            tx.insert_execution(&execution("x2", "e-gone"))?;
            for (n, x) in [(1, "x1"), (2, "x2"), (3, "x-gone")] {
                tx.insert_token(&token(n, x))?;
            }
            // Tokens whose Work is not there, and whose Work is not their execution's.
            for (n, w) in [(4, "w-gone"), (5, "w2")] {
                tx.insert_token(&TokenRecord {
                    work_id: w.into(),
                    ..token(n, "x1")
                })?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let found = lease([1; 32]).expect("the token");
    let (token, x, w, cause) = store
        .read(|tx| {
            Ok::<_, StoreError>((
                tx.token_by_digest(&[1; 32])?,
                tx.get_execution("x1")?,
                tx.get_work("w1")?,
                tx.get_event("e1")?,
            ))
        })
        .unwrap();
    assert_eq!(Some(&*found.token), token.as_ref());
    assert_eq!(found.execution.as_deref(), x.as_ref());
    assert_eq!(found.cause.as_deref(), cause.as_ref());
    assert!(found.cause.is_some());
    assert_eq!(found.work.as_deref(), w.as_ref());
    assert_eq!(found.work.unwrap().keys, ["work:w1", "pr:7"]);

    let no_cause = lease([2; 32]).expect("the token");
    assert_eq!(no_cause.execution.map(|x| x.id.clone()).as_deref(), Some("x2"));
    assert!(no_cause.cause.is_none());
    let no_execution = lease([3; 32]).expect("the token");
    assert!(no_execution.execution.is_none() && no_execution.cause.is_none());
    assert_eq!(no_execution.work.map(|w| w.id.clone()).as_deref(), Some("w1"));
    let no_work = lease([4; 32]).expect("the token");
    assert!(no_work.work.is_none() && no_work.execution.is_some());
    let its_own_work = lease([5; 32]).expect("the token");
    assert_eq!(
        its_own_work.work.map(|w| w.id.clone()).as_deref(),
        Some("w2"),
        "the token's Work, not its execution's"
    );
    assert!(lease([9; 32]).is_none(), "no token, no lease");
}

/// The watermark an attempt reads before its own is the highest of its Work's other attempts, and
/// 0 for a Work's first attempt (its own watermark never counts).
pub fn an_attempt_sees_the_watermark_the_others_reached(store: &dyn Store) {
    let at = |watermark, id: &str| Execution {
        watermark,
        ..execution(id, "e1")
    };
    let before = |x: &'static str| move |tx: &mut dyn Tx| tx.watermark_before("w1", x);
    store
        .write(|tx| {
            tx.insert_work(&work("w1", &[]))?;
            tx.insert_execution(&at(9, "x1"))
        })
        .unwrap();
    assert_eq!(store.read(before("x1")).unwrap(), 0, "the first attempt");
    store
        .write(|tx| {
            tx.insert_execution(&at(4, "x2"))?;
            tx.insert_execution(&at(12, "x3"))
        })
        .unwrap();
    assert_eq!(store.read(before("x3")).unwrap(), 9);
    assert_eq!(store.read(before("x1")).unwrap(), 12);
    assert_eq!(
        store.read(|tx| tx.watermark_before("w2", "x1")).unwrap(),
        0,
        "another Work's"
    );
}

/// A token's lease read again after each change to a row it is made of (its token, execution,
/// Work, the Work's keys) holds the change, and never one that was rolled back, nor a token whose
/// insert was. Every read is a write transaction's, so a store that keeps leases on its write
/// connection (SQLite) is held to them too.
pub fn a_lease_read_again_sees_each_change_it_is_made_of_and_no_rolled_back_one(store: &dyn Store) {
    let lease = |digest: [u8; 32]| store.write(|tx| tx.token_lease_by_digest(&digest)).unwrap();
    store
        .write(|tx| {
            tx.insert_work(&work("w1", &["work:w1"]))?;
            tx.insert_event(event("e1"))?;
            tx.insert_execution(&execution("x1", "e1"))?;
            tx.insert_token(&token(1, "x1"))
        })
        .unwrap();
    let first = lease([1; 32]).expect("the token");
    assert_eq!(
        lease([1; 32]).map(|l| l.token),
        Some(first.token.clone()),
        "read again, unchanged"
    );

    let rolled_back = store.write(|tx| {
        tx.revoke_token("t1", Timestamp(50))?;
        assert!(tx.token_lease_by_digest(&[1; 32])?.unwrap().token.revoked_at.is_some());
        tx.insert_token(&token(7, "x1"))?;
        assert!(tx.token_lease_by_digest(&[7; 32])?.is_some());
        Err::<(), _>(StoreError::RolledBack)
    });
    assert!(rolled_back.is_err());
    assert!(
        lease([1; 32]).unwrap().token.revoked_at.is_none(),
        "a rolled-back revocation"
    );
    assert!(lease([7; 32]).is_none(), "a token whose insert was rolled back");

    let mut x1 = Execution::clone(first.execution.as_ref().unwrap());
    x1.lease_expires_at = Timestamp(150);
    store.write(|tx| tx.update_execution(&x1)).unwrap();
    let renewed = lease([1; 32]).unwrap().execution.unwrap();
    assert_eq!(renewed.lease_expires_at, Timestamp(150), "the execution's renewal");

    let mut w1 = Work::clone(first.work.as_ref().unwrap());
    w1.state = WorkState::Waiting;
    store.write(|tx| tx.update_work(&w1)).unwrap();
    assert_eq!(
        lease([1; 32]).unwrap().work.unwrap().state,
        WorkState::Waiting,
        "the Work's state"
    );

    store.write(|tx| tx.attach_work_key("w1", "pr:9")).unwrap();
    assert_eq!(
        lease([1; 32]).unwrap().work.unwrap().keys,
        ["work:w1", "pr:9"],
        "the Work's keys"
    );

    store.write(|tx| tx.revoke_token("t1", Timestamp(60))).unwrap();
    assert_eq!(
        lease([1; 32]).unwrap().token.revoked_at,
        Some(Timestamp(60)),
        "the revocation"
    );
}

/// A running execution of `w1`, continuing from `cause`.
pub fn execution(id: &str, cause: &str) -> Execution {
    Execution {
        id: id.into(),
        work_id: "w1".into(),
        scope: "setup".into(),
        binding: "shell".into(),
        epoch: 1,
        owner: "i1".into(),
        state: ExecutionState::Running,
        cause_event: cause.into(),
        watermark: 3,
        declaration: None,
        outcome: None,
        exit_code: None,
        pid: None,
        generation: 1,
        lease_expires_at: Timestamp(100),
        deadline_at: Timestamp(200),
        started_at: Timestamp(2),
        ended_at: None,
        stopped_at: None,
        agent_session: None,
        agent_usage: None,
    }
}

/// A token of `execution` on `w1`, its digest `n` repeated.
pub fn token(n: u8, execution: &str) -> TokenRecord {
    TokenRecord {
        id: format!("t{n}"),
        digest: [n; 32],
        execution_id: execution.into(),
        work_id: "w1".into(),
        scope: "setup".into(),
        binding: "shell".into(),
        epoch: 1,
        owner: "i1".into(),
        generation: 1,
        operations: vec!["emit".into()],
        issued_at: Timestamp(2),
        expires_at: Timestamp(300),
        revoked_at: None,
    }
}

/// A key another Work holds refuses the whole Work, its other keys included.
pub fn a_taken_key_rolls_back_the_whole_work(store: &dyn Store) {
    store.write(|tx| tx.insert_work(&work("w1", &["pr:7"]))).unwrap();
    let err = store
        .write(|tx| tx.insert_work(&work("w2", &["work:w2", "pr:7"])))
        .unwrap_err();
    assert!(matches!(err, StoreError::KeyTaken), "{err:?}");
    assert!(store.read(|tx| tx.get_work("w2")).unwrap().is_none());
    assert!(store.read(|tx| tx.work_owning_key("work:w2")).unwrap().is_none());
}

/// Events are numbered in commit order, and only the host's operator events keep an actor.
pub fn events_get_increasing_sequences_and_lose_forged_actors(store: &dyn Store) {
    let a = store.write(|tx| tx.insert_event(event("a"))).unwrap();
    let b = store.write(|tx| tx.insert_event(event("b"))).unwrap();
    assert!(b.sequence > a.sequence);
    let stored = store.read(|tx| tx.get_event("a")).unwrap().unwrap();
    assert_eq!(stored, a);
    assert_eq!(stored.actor, None, "only the host's operator events carry an actor");
    let c = store.write(|tx| tx.insert_event(event("c"))).unwrap();
    let between = store
        .read(|tx| tx.events_between_for_keys(a.sequence, c.sequence - 1, &["k".into()]))
        .unwrap();
    assert_eq!(between.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), vec!["b"]);
}

/// A host record whose data is JSON text already reads back as the toolbelt's event it is (its
/// source the toolbelt's, no key, actor or delivery), numbered among the others, and its bytes are
/// charged to its Work as an event's are.
pub fn a_record_written_as_text_reads_back_as_the_event_it_is(store: &dyn Store) {
    store.write(|tx| tx.insert_work(&work("w1", &[]))).unwrap();
    let before = store.write(|tx| tx.insert_event(event("e0"))).unwrap();
    let causation = Causation {
        parent: Some("e0".into()),
        root: "e0".into(),
        depth: 1,
    };
    let data = r#"{"agentId":"x1","callId":"c1"}"#;
    let record = NewRecord {
        id: "r1",
        event_type: "agent.toolCalled",
        scope: "setup",
        work_id: "w1",
        execution_id: "x1",
        causation: &causation,
        data,
        accepted_at: Timestamp(7),
    };
    let sequence = store.write(|tx| tx.insert_record(&record)).unwrap();
    assert!(sequence > before.sequence);
    let stored = store.read(|tx| tx.get_event("r1")).unwrap().unwrap();
    assert_eq!(
        (
            stored.sequence,
            stored.source,
            stored.work_id.as_deref(),
            stored.execution_id.as_deref()
        ),
        (sequence, Source::Toolbelt, Some("w1"), Some("x1"))
    );
    assert_eq!(
        (stored.event_type.as_str(), stored.scope.as_str(), stored.accepted_at),
        ("agent.toolCalled", "setup", Timestamp(7))
    );
    assert_eq!((stored.correlation_key, stored.actor), (None, None));
    assert_eq!(
        (stored.causation, stored.data),
        (causation, json!({"agentId": "x1", "callId": "c1"}))
    );
    let charged = store.read(|tx| tx.work_stored_bytes("w1")).unwrap();
    assert_eq!(
        charged,
        conduit_core::quota::charge(data.len()),
        "charged as an event's data"
    );
}

/// A root's bounds, read in one statement, are what its pin and the time-back lookup for the pin's
/// `per_minute` read apart; a root without a pin has none.
pub fn a_roots_bounds_are_its_pin_and_the_event_its_per_minute_back(store: &dyn Store) {
    let pin = CausalPin {
        max_depth: 8,
        per_minute: 2,
    };
    let of_root = |root: &str, id: &str, at: i64| NewEvent {
        causation: Causation::root(root),
        accepted_at: Timestamp(at),
        ..event(id)
    };
    let bounds = |root: &str| store.read(|tx| tx.causal_bounds(root)).unwrap();
    store.write(|tx| tx.insert_causal_pin("r", pin, Timestamp(1))).unwrap();
    store.write(|tx| tx.insert_event(of_root("r", "r1", 10))).unwrap();
    let short = "a chain shorter than its per-minute bound";
    assert_eq!(bounds("r"), Some((pin, None)), "{short}");
    // Another root's longer, later chain among them: only the root's own events count.
    let chains = [
        ("o", "o1", 15),
        ("r", "r2", 20),
        ("o", "o2", 25),
        ("o", "o3", 26),
        ("o", "o4", 27),
        ("r", "r3", 30),
    ];
    for (root, id, at) in chains {
        store.write(|tx| tx.insert_event(of_root(root, id, at))).unwrap();
    }
    assert_eq!(bounds("r"), Some((pin, Some(Timestamp(20)))));
    let apart = store.read(|tx| tx.causal_event_time_back("r", pin.per_minute)).unwrap();
    assert_eq!(apart, Some(Timestamp(20)), "the control: the lookup alone");
    // A root pinned to no events a minute looks nowhere back.
    let none_a_minute = CausalPin { per_minute: 0, ..pin };
    store
        .write(|tx| tx.insert_causal_pin("o", none_a_minute, Timestamp(1)))
        .unwrap();
    assert_eq!(bounds("o"), Some((none_a_minute, None)));
    assert_eq!(bounds("none"), None);
}

/// A page's sequences alone are those of its events, whatever the filter and the page's bounds.
pub fn a_pages_sequences_are_its_events_sequences(store: &dyn Store) {
    store.write(|tx| tx.insert_work(&work("pw", &[]))).unwrap();
    for (i, (id, of_work, event_type)) in [
        ("p1", true, "demo.x"),
        ("p2", false, "demo.y"),
        ("p3", true, "demo.y"),
        ("p4", true, "demo.x"),
        ("p5", false, "demo.x"),
    ]
    .into_iter()
    .enumerate()
    {
        let new = NewEvent {
            work_id: of_work.then(|| "pw".to_owned()),
            event_type: event_type.into(),
            accepted_at: Timestamp(10 + i as i64),
            ..event(id)
        };
        store.write(|tx| tx.insert_event(new)).unwrap();
    }
    let filters = [
        EventFilter::default(),
        EventFilter::of_work("pw"),
        EventFilter {
            event_type: Some("demo.y".into()),
            ..EventFilter::default()
        },
        EventFilter {
            since: Some(Timestamp(12)),
            ..EventFilter::default()
        },
    ];
    let upper = store.read(|tx| tx.max_sequence()).unwrap();
    for filter in &filters {
        for page in [
            (None, upper, 10),
            (None, upper, 2),
            (Some(upper - 3), upper, 2),
            (None, upper - 1, 10),
        ] {
            let page = Page {
                after: page.0,
                upper: page.1,
                limit: page.2,
            };
            let events = store.read(|tx| tx.page_events(filter, &page)).unwrap();
            let sequences = store.read(|tx| tx.page_event_sequences(filter, &page)).unwrap();
            assert!(!events.is_empty(), "{filter:?}");
            assert_eq!(
                sequences,
                events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
                "{filter:?}"
            );
        }
    }
}

/// A body's error rolls back what it wrote.
pub fn a_failed_body_rolls_back(store: &dyn Store) {
    let result: Result<(), StoreError> = store.write(|tx: &mut dyn Tx| {
        tx.insert_event(event("gone"))?;
        Err(StoreError::RolledBack)
    });
    assert!(result.is_err());
    assert!(store.read(|tx| tx.get_event("gone")).unwrap().is_none());
}

/// A transaction opened inside another on the same thread is refused, where it would wait forever.
pub fn a_transaction_inside_another_is_refused(store: &dyn Store) {
    let nested = store.write(|_| store.write(|tx| tx.insert_work(&work("w1", &[]))));
    assert!(matches!(nested, Err(StoreError::Reentrant)), "{nested:?}");
    store.write(|tx| tx.insert_work(&work("w1", &[]))).unwrap();
}

/// A shared key is made by the first to ask for it; every later asker gets that one.
pub fn a_shared_key_is_made_once(store: &dyn Store) {
    let first = store.write(|tx| tx.shared_key("k", b"first")).unwrap();
    let again = store.write(|tx| tx.shared_key("k", b"second")).unwrap();
    assert_eq!((first.as_slice(), again.as_slice()), (&b"first"[..], &b"first"[..]));
    assert_eq!(
        store.write(|tx| tx.shared_key("other", b"o")).unwrap(),
        b"o",
        "one per name"
    );
}

/// A ready Work of `setup`'s `shell` binding holding `keys`.
pub fn work(id: &str, keys: &[&str]) -> Work {
    Work {
        id: id.into(),
        scope: "setup".into(),
        binding: "shell".into(),
        parent_work: None,
        state: WorkState::Ready,
        input: json!({"n": 1}),
        keys: keys.iter().map(|k| k.to_string()).collect(),
        epoch: 0,
        outcome: None,
        wake_event: "e0".into(),
        generation: 1,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
        blocked_reason: None,
        failed_attempts: 0,
        not_before: None,
        grants: Vec::new(),
    }
}

/// A root event with correlation key `k`, from an execution, carrying an actor it may not claim.
pub fn event(id: &str) -> NewEvent {
    NewEvent {
        id: id.into(),
        event_type: "demo.x".into(),
        source: Source::Execution("x1".into()),
        scope: "setup".into(),
        work_id: None,
        execution_id: None,
        correlation_key: Some("k".into()),
        causation: Causation::root(id),
        actor: Some("operator:forged".into()),
        data: json!({"a": [1, 2]}),
        accepted_at: Timestamp(5),
        delivery_id: None,
    }
}

/// A Work's audit trail, read a page at a time, is its executions' records in time order (ties by
/// id): none of another Work's, none that names no Work, and each page starts past the cursor.
pub fn a_works_audit_pages_are_its_executions_records_in_order(store: &dyn Store) {
    let records = [
        ("a1", "x1", Some("w1"), 10),
        ("a2", "x2", Some("w1"), 11),
        ("a3", "x3", Some("w2"), 12),
        ("a4", "x1", None, 13),
        ("a6", "x1", Some("w1"), 13),
        ("a5", "x2", Some("w1"), 13),
        ("a7", "x1", Some("w1"), 14),
    ];
    store
        .write(|tx| -> Result<(), StoreError> {
            tx.insert_work(&work("w1", &[]))?;
            tx.insert_work(&work("w2", &[]))?;
            tx.insert_event(event("e1"))?;
            tx.insert_execution(&execution("x1", "e1"))?;
            tx.insert_execution(&execution("x2", "e1"))?;
            tx.insert_execution(&Execution {
                work_id: "w2".into(),
                ..execution("x3", "e1")
            })?;
            for (id, execution, work, at) in records {
                tx.insert_audit(&audit(id, execution, work, at))?;
            }
            Ok(())
        })
        .unwrap();
    let filter = AuditFilter {
        work: Some("w1".into()),
        ..AuditFilter::default()
    };
    let (mut after, mut listed) = (None, Vec::new());
    loop {
        let page = Page {
            after: after.clone(),
            upper: 1_000,
            limit: 2,
        };
        let records = store.read(|tx| tx.page_audit(&filter, &page)).unwrap();
        assert!(records.len() <= 2, "a page holds at most its limit");
        let Some(last) = records.last() else { break };
        after = Some((last.at.0, last.id.clone()));
        listed.extend(records.into_iter().map(|r| r.id));
    }
    assert_eq!(listed, ["a1", "a2", "a5", "a6", "a7"]);
}

/// An audit record of a call on `execution`'s socket at `at`.
fn audit(id: &str, execution: &str, work: Option<&str>, at: i64) -> AuditRecord {
    AuditRecord {
        id: id.into(),
        kind: AuditKind::Called,
        operation: "emit".into(),
        execution_id: execution.into(),
        work_id: work.map(Into::into),
        scope: Some("setup".into()),
        request_id: None,
        result: "ok".into(),
        gate: None,
        refusal: None,
        input_hash: "h".into(),
        duration_ms: 0,
        at: Timestamp(at),
    }
}
