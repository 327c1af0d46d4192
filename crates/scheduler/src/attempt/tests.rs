//! Claims, completion (with the retry policy), adoption and start gates over a real store.
use super::*;
use crate::{accept, create_work, fire_due_timers, NewWork};
use conduit_core::{Causation, Declaration, NewEvent, Source};
use conduit_store::Store;
use conduit_store_sqlite::SqliteStore;
use serde_json::json;

const T0: Timestamp = Timestamp(1_000_000);

fn setup() -> (tempfile::TempDir, Box<dyn Store>, Snapshot) {
    let dir = tempfile::tempdir().unwrap();
    let store: Box<dyn Store> = Box::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let config = conduit_config::parse(conduit_config::default_config_json().as_bytes())
        .unwrap()
        .at_generation(1);
    (dir, store, config)
}

fn manual_work(store: &dyn Store, config: &Snapshot) -> Work {
    let new = NewWork::manual("setup", "shell", json!({}), Some("operator:local".into()));
    store.write(|tx| create_work(tx, config, new, None, T0)).unwrap().0
}

fn operator_event(ty: &str, key: &str) -> NewEvent {
    let id = new_id();
    NewEvent {
        id: id.clone(),
        event_type: ty.into(),
        source: Source::Manual,
        scope: "setup".into(),
        work_id: None,
        execution_id: None,
        correlation_key: Some(key.into()),
        causation: Causation::root(&id),
        actor: None,
        data: json!({}),
        accepted_at: T0,
        delivery_id: None,
    }
}

fn declare(store: &dyn Store, execution: &str, d: Declaration) {
    store
        .write(|tx| {
            let mut x = tx.get_execution(execution)?.unwrap();
            x.declaration = Some(d);
            tx.update_execution(&x)
        })
        .unwrap();
}

#[test]
fn claim_takes_the_next_epoch_and_complete_maps_exit() {
    let (_d, store, config) = setup();
    let work = manual_work(&*store, &config);
    let claim = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    assert_eq!((claim.execution.epoch, claim.work.state), (1, WorkState::Running));
    assert_eq!(claim.execution.cause_event, work.wake_event);
    assert!(
        store
            .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
            .unwrap()
            .is_none(),
        "nothing else is ready"
    );
    store
        .write(|tx| {
            complete(
                tx,
                &claim.execution.id,
                SegmentEnd::Exited(3),
                RetryPolicy::default(),
                T0,
            )
        })
        .unwrap();
    let work = store.read(|tx| tx.get_work(&work.id)).unwrap().unwrap();
    assert_eq!(work.state, WorkState::Failed);
}

#[test]
fn a_retryable_failure_is_claimed_again_after_its_backoff_until_attempts_run_out() {
    let (_d, store, config) = setup();
    let work = manual_work(&*store, &config);
    let retry = RetryPolicy {
        max_attempts: 3,
        backoff: Duration::from_secs(10),
    };
    let claim_at = |at: i64| {
        store
            .write(|tx| claim_next(tx, &config, &Lessee::new("me"), Timestamp(at)))
            .unwrap()
    };
    let fail = |claim: Claim, end: SegmentEnd, at: i64| {
        store
            .write(|tx| complete(tx, &claim.execution.id, end, retry, Timestamp(at)))
            .unwrap();
        store.read(|tx| tx.get_work(&work.id)).unwrap().unwrap()
    };
    let first = claim_at(T0.0).unwrap();
    let after = fail(first, SegmentEnd::Lost, T0.0);
    assert_eq!((after.state, after.failed_attempts), (WorkState::Ready, 1));
    assert_eq!(after.not_before, Some(Timestamp(T0.0 + 10_000)));
    assert!(claim_at(T0.0 + 9_999).is_none(), "not before its backoff");
    let second = claim_at(T0.0 + 10_000).unwrap();
    assert_eq!(second.execution.epoch, 2);
    let after = fail(second, SegmentEnd::FailedToStart(Some(2)), T0.0 + 10_000);
    assert_eq!(after.not_before, Some(Timestamp(T0.0 + 30_000)), "doubled");
    let third = claim_at(T0.0 + 30_000).unwrap();
    let after = fail(third, SegmentEnd::Exited(4), T0.0 + 30_000);
    assert_eq!(after.state, WorkState::Failed);
    let summary = after.outcome.unwrap().summary.unwrap();
    assert_eq!(summary, "exited with status 4 (the last of 3 attempts)");
}

#[test]
fn a_declared_or_killed_segment_is_not_retried() {
    let (_d, store, config) = setup();
    let retry = RetryPolicy {
        max_attempts: 5,
        backoff: Duration::from_secs(1),
    };
    for (declared, end) in [(true, SegmentEnd::Exited(1)), (false, SegmentEnd::Killed)] {
        let work = manual_work(&*store, &config);
        let claim = store
            .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
            .unwrap()
            .unwrap();
        if declared {
            let failed = Declaration::Outcome {
                status: OutcomeStatus::Failed,
                summary: None,
                artifacts: Vec::new(),
            };
            declare(&*store, &claim.execution.id, failed);
        }
        store
            .write(|tx| complete(tx, &claim.execution.id, end, retry, T0))
            .unwrap();
        assert_eq!(state_of(&*store, &work.id), WorkState::Failed, "{end:?}");
    }
}

/// Declares a wait for `demo.go` on the running attempt and ends its segment.
fn end_waiting(store: &dyn Store, execution: &str, timeout: Option<Duration>) {
    let wait = Declaration::Wait {
        types: vec!["demo.go".into()],
        keys: vec![],
        timeout,
        artifacts: vec![],
    };
    declare(store, execution, wait);
    store
        .write(|tx| complete(tx, execution, SegmentEnd::Exited(0), RetryPolicy::default(), T0))
        .unwrap();
}

fn state_of(store: &dyn Store, work: &str) -> WorkState {
    store.read(|tx| tx.get_work(work)).unwrap().unwrap().state
}

fn go(store: &dyn Store, config: &Snapshot, work: &str) -> conduit_core::Event {
    store
        .write(|tx| accept(tx, config, operator_event("demo.go", &format!("work:{work}")), T0))
        .unwrap()
}

#[test]
fn declared_wait_parks_and_a_matching_event_resumes_with_a_new_epoch() {
    let (_d, store, config) = setup();
    let work = manual_work(&*store, &config);
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    end_waiting(&*store, &first.execution.id, None);
    assert_eq!(state_of(&*store, &work.id), WorkState::Waiting);
    let go = go(&*store, &config, &work.id);
    let second = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    assert_eq!(second.execution.epoch, 2);
    assert_eq!(
        second.execution.cause_event, go.id,
        "the resumed segment continues from what woke it"
    );
}

#[test]
fn an_event_accepted_before_registration_is_found_by_backscan() {
    let (_d, store, config) = setup();
    let work = manual_work(&*store, &config);
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    go(&*store, &config, &work.id);
    end_waiting(&*store, &first.execution.id, None);
    assert_eq!(state_of(&*store, &work.id), WorkState::Ready);
}

#[test]
fn wait_timeout_fires_at_its_instant() {
    let (_d, store, config) = setup();
    let work = manual_work(&*store, &config);
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    end_waiting(&*store, &first.execution.id, Some(Duration::from_secs(5)));
    assert_eq!(
        store
            .write(|tx| fire_due_timers(tx, &config, T0.plus(Duration(4_999))))
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .write(|tx| fire_due_timers(tx, &config, T0.plus(Duration(5_000))))
            .unwrap(),
        1
    );
    assert_eq!(state_of(&*store, &work.id), WorkState::Ready);
}

#[test]
fn a_route_starts_work_that_owns_the_events_key() {
    let (_d, store, config) = setup();
    let e = store
        .write(|tx| accept(tx, &config, operator_event("demo.requested", "ticket:9"), T0))
        .unwrap();
    let owner = store
        .read(|tx| tx.work_owning_key("ticket:9"))
        .unwrap()
        .expect("routed work owns the key");
    let work = store.read(|tx| tx.get_work(&owner)).unwrap().unwrap();
    let created = store.read(|tx| tx.get_event(&work.wake_event)).unwrap().unwrap();
    assert_eq!(created.causation.parent.as_deref(), Some(e.id.as_str()));
    // A second event under the same key is that Work's input, not a new Work.
    store
        .write(|tx| accept(tx, &config, operator_event("demo.requested", "ticket:9"), T0))
        .unwrap();
    assert_eq!(store.read(|tx| tx.list_work(&Default::default())).unwrap().len(), 1);
}

#[test]
fn a_trace_names_work_waiting_on_another_key_as_an_other_wake_and_acceptance_agrees() {
    let (_d, store, config) = setup();
    let work = manual_work(&*store, &config);
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    let wait = Declaration::Wait {
        types: vec!["demo.go".into()],
        keys: vec!["ticket:7".into()],
        timeout: None,
        artifacts: vec![],
    };
    declare(&*store, &first.execution.id, wait);
    store
        .write(|tx| {
            complete(
                tx,
                &first.execution.id,
                SegmentEnd::Exited(0),
                RetryPolicy::default(),
                T0,
            )
        })
        .unwrap();
    let probe = crate::Probe {
        source: Source::Manual,
        scope: "setup".into(),
        event_type: "demo.go".into(),
        correlation_key: Some("ticket:7".into()),
        work_id: None,
        data: serde_json::Value::Null,
    };
    let traced = store.read(|tx| crate::trace(tx, &config, probe, T0)).unwrap();
    assert_eq!((traced.work, traced.effect), (None, crate::Effect::Unmatched));
    assert_eq!(traced.other_wakes, vec![work.id.clone()]);
    assert_eq!(
        state_of(&*store, &work.id),
        WorkState::Waiting,
        "a trace changes nothing"
    );
    store
        .write(|tx| accept(tx, &config, operator_event("demo.go", "ticket:7"), T0))
        .unwrap();
    assert_eq!(state_of(&*store, &work.id), WorkState::Ready);

    let probe = crate::Probe {
        source: Source::Manual,
        scope: "setup".into(),
        event_type: "demo.more".into(),
        correlation_key: None,
        work_id: Some(work.id.clone()),
        data: serde_json::Value::Null,
    };
    let queued = store.read(|tx| crate::trace(tx, &config, probe, T0)).unwrap();
    assert_eq!(queued.effect, crate::Effect::Queue, "the woken Work reads it as input");
    assert!(queued.detail.contains("another input woke"), "{}", queued.detail);
}

#[test]
fn a_cancelled_attempts_work_is_retried_only_once_its_stop_is_known() {
    let (_d, store, config) = setup();
    let by = |seed| crate::Operator {
        actor: "operator:local",
        seed,
    };
    let work = manual_work(&*store, &config);
    let retry = |seed| store.write(|tx| crate::retry_work(tx, &config, &work.id, &by(seed), T0));
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    let x = first.execution.id.clone();
    store
        .write(|tx| crate::cancel_execution(tx, &config, &x, &by("k1"), T0))
        .unwrap();
    let refused = retry("k2").unwrap_err().refusal();
    assert_eq!(
        refused.code,
        conduit_core::ErrorCode::Conflict,
        "a process may still act for it"
    );
    let (confirmed, event) = store
        .write(|tx| crate::confirm_stopped(tx, &config, &x, &by("k3"), T0))
        .unwrap();
    assert_eq!(confirmed.stopped_at, Some(T0));
    assert_eq!(event.unwrap().event_type, "core.execution.stopped");
    retry("k4").unwrap();

    // The host's own observation of the fenced process ending is a known stop too.
    let second = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    let y = second.execution.id.clone();
    store
        .write(|tx| crate::cancel_execution(tx, &config, &y, &by("k5"), T0))
        .unwrap();
    store
        .write(|tx| complete(tx, &y, SegmentEnd::Killed, RetryPolicy::default(), T0))
        .unwrap();
    retry("k6").unwrap();
    let running = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    let refused = store
        .write(|tx| crate::confirm_stopped(tx, &config, &running.execution.id, &by("k7"), T0))
        .unwrap_err()
        .refusal();
    assert_eq!(
        refused.code,
        conduit_core::ErrorCode::Conflict,
        "a running attempt is cancelled first"
    );
}

#[test]
fn adoption_bumps_the_epoch_and_owner() {
    let (_d, store, config) = setup();
    manual_work(&*store, &config);
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("old"), T0))
        .unwrap()
        .unwrap();
    let adopted = store
        .write(|tx| adopt(tx, &first.execution.id, &Lessee::new("new"), T0))
        .unwrap()
        .unwrap();
    assert_eq!((adopted.execution.epoch, adopted.execution.owner.as_str()), (2, "new"));
    assert!(!store
        .write(|tx| renew_lease(tx, &first.execution.id, 1, &Lessee::new("old"), T0))
        .unwrap());
    assert!(store
        .write(|tx| renew_lease(tx, &first.execution.id, 2, &Lessee::new("new"), T0))
        .unwrap());
}

#[test]
fn a_retry_is_not_a_first_attempt_but_the_one_after_a_gate_parked_it_is() {
    let (_d, store, config) = setup();
    manual_work(&*store, &config);
    let retry = RetryPolicy {
        max_attempts: 3,
        backoff: Duration::from_secs(1),
    };
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    assert!(store.read(|tx| first_to_start(tx, &first.execution)).unwrap());
    let parked = Declaration::Wait {
        types: vec!["demo.go".into()],
        keys: vec![],
        timeout: None,
        artifacts: vec![],
    };
    store
        .write(|tx| settle_unstarted(tx, &first.execution.id, parked, T0))
        .unwrap();
    store
        .write(|tx| {
            let mut work = tx.get_work(&first.work.id)?.unwrap();
            work.state = WorkState::Ready;
            tx.update_work(&work)
        })
        .unwrap();
    let after_park = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), T0))
        .unwrap()
        .unwrap();
    assert!(
        store.read(|tx| first_to_start(tx, &after_park.execution)).unwrap(),
        "a parked gate keeps it first"
    );
    store
        .write(|tx| {
            complete(
                tx,
                &after_park.execution.id,
                SegmentEnd::FailedToStart(Some(2)),
                retry,
                T0,
            )
        })
        .unwrap();
    let retried = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("me"), Timestamp(T0.0 + 1000)))
        .unwrap()
        .unwrap();
    assert!(
        !store.read(|tx| first_to_start(tx, &retried.execution)).unwrap(),
        "a retry passed the gates already"
    );
}

#[test]
fn a_shared_store_adopts_only_this_instances_attempts_on_start() {
    let cases = [
        ("me", "me", false, true),
        ("an-earlier-start", "me", false, true),
        ("me", "me", true, true),
        ("another-daemon", "me", true, false),
    ];
    for (owner, instance, shared, adopted) in cases {
        assert_eq!(
            adopts_on_start(owner, instance, shared),
            adopted,
            "{owner} on shared={shared}"
        );
    }
}

#[test]
fn another_daemon_takes_over_an_abandoned_attempt_once_and_its_work_runs_again() {
    let (_d, store, config) = setup();
    manual_work(&*store, &config);
    let (a, b) = (Lessee::new("a"), Lessee::new("b"));
    let first = store.write(|tx| claim_next(tx, &config, &a, T0)).unwrap().unwrap();
    let id = first.execution.id.as_str();
    let lapsed = Timestamp(T0.0 + DEFAULT_LEASE.0);
    let take = |who: &str, at| {
        store
            .write(|tx| take_over(tx, id, who, RetryPolicy::default(), at))
            .unwrap()
    };
    assert!(take("b", Timestamp(lapsed.0 - 1)).is_none(), "the lease is still live");
    assert!(
        take("a", lapsed).is_none(),
        "a daemon does not take over its own attempt"
    );
    let taken = take("b", lapsed).expect("taken over");
    assert_eq!(taken.state, ExecutionState::Failed);
    assert!(taken
        .outcome
        .unwrap()
        .summary
        .unwrap()
        .contains("stopped renewing the lease"));
    assert!(take("c", lapsed).is_none(), "taken over once");
    let work = store.read(|tx| tx.get_work(&first.work.id)).unwrap().unwrap();
    assert_eq!(
        (work.state, work.failed_attempts),
        (WorkState::Ready, 1),
        "the default policy still retries"
    );
    assert!(
        !store.write(|tx| renew_lease(tx, id, 1, &a, lapsed)).unwrap(),
        "the old owner is fenced"
    );
    let next = store.write(|tx| claim_next(tx, &config, &b, lapsed)).unwrap().unwrap();
    assert_eq!((next.execution.epoch, next.execution.owner.as_str()), (2, "b"));
}

#[test]
fn a_taken_over_attempt_keeps_what_it_declared() {
    let (_d, store, config) = setup();
    manual_work(&*store, &config);
    let first = store
        .write(|tx| claim_next(tx, &config, &Lessee::new("a"), T0))
        .unwrap()
        .unwrap();
    let declared = Declaration::Outcome {
        status: OutcomeStatus::Succeeded,
        summary: Some("done".into()),
        artifacts: Vec::new(),
    };
    declare(&*store, &first.execution.id, declared);
    let lapsed = Timestamp(T0.0 + DEFAULT_LEASE.0);
    store
        .write(|tx| take_over(tx, &first.execution.id, "b", RetryPolicy::default(), lapsed))
        .unwrap()
        .unwrap();
    let work = store.read(|tx| tx.get_work(&first.work.id)).unwrap().unwrap();
    assert_eq!(work.state, WorkState::Succeeded);
}
