//! The conformance suite against the toolbelt in process (on a SQLite file, and on one reopened for
//! every transaction), and its negative control.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod conformance;

use std::cell::RefCell;

use conformance::in_process::InProcess;
use conformance::{Attempt, Target, CASES};
use serde_json::{json, Value};

#[test]
fn every_case_holds_in_process() {
    conformance::run_all(InProcess::new);
}

#[test]
fn every_case_holds_on_a_sqlite_file_reopened_for_each_transaction() {
    conformance::run_all(InProcess::reopened);
}

/// A host without the rules: it answers every refused call as if it had succeeded, lists every
/// operation to everyone, and keeps the tokens it issues in plaintext.
struct WithoutRules(InProcess, RefCell<Vec<String>>);

impl Target for WithoutRules {
    fn attempt(&self, binding: &str) -> Attempt {
        let attempt = self.0.attempt(binding);
        self.1.borrow_mut().push(attempt.token.clone());
        attempt
    }

    fn call(&self, on: &Attempt, token: &str, body: Value) -> (u16, Value) {
        let (status, answer) = self.0.call(on, token, body);
        if status == 200 {
            (status, answer)
        } else {
            (200, json!({"output": {}}))
        }
    }

    fn guidance(&self, _: &Attempt, _: &str) -> (u16, Value) {
        (200, json!({"operations": [{"name": "read_context"}, {"name": "emit"}]}))
    }

    fn operator_token(&self) -> String {
        self.0.operator_token()
    }

    fn events(&self, work: &str) -> Vec<Value> {
        self.0.events(work)
    }

    fn supersede(&self, attempt: &Attempt) -> String {
        self.0.supersede(attempt)
    }

    fn store_bytes(&self) -> Vec<u8> {
        let mut bytes = self.0.store_bytes();
        self.1
            .borrow()
            .iter()
            .for_each(|token| bytes.extend_from_slice(token.as_bytes()));
        bytes
    }
}

/// Every security case fails against a host without the rules, so none of them passes vacuously.
#[test]
fn the_suite_catches_a_target_without_the_rules() {
    for (name, _, case) in CASES.iter().filter(|(_, security, _)| *security) {
        let target = WithoutRules(InProcess::new(), RefCell::default());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&target))).is_err();
        assert!(caught, "{name} passes against a host without the rules");
    }
}
