//! `os github-hold`: the GitHub hold executor's program. It holds its Work until a pull request's
//! condition holds, calling the toolbelt itself through its execution's own socket: when the
//! condition holds it declares the outcome; otherwise it declares a translated wait on the pull
//! request's GitHub events (`github.pr.wait_review`, `github.checks.wait`) and ends, and the Work
//! resumes when the webhook delivers one (or the wait times out, which fails the hold).

use serde_json::{json, Value};

use crate::connection::Connection;
use crate::report::Failure;
use crate::toolbelt;

/// What the hold waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    /// A review approves the pull request, and no reviewer's latest review requests changes.
    Approved,
    /// Every check suite on the pull request's head has completed, all passing.
    Checks,
}

/// The hold's settings: the condition, the pull request (else the Work's input names it), and
/// how long each wait may last.
pub struct Hold {
    pub until: Until,
    pub repo: Option<String>,
    pub number: Option<u64>,
    pub wait: Option<String>,
}

/// How a segment of the hold ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The outcome was declared: `succeeded` or `failed`, with its summary.
    Declared(&'static str, String),
    /// A wait was declared; the segment should end.
    Waiting,
}

const TIMED_OUT: &str = "core.wait.timed_out";

impl Hold {
    pub fn run(&self, connection: &Connection) -> Result<Held, Failure> {
        let context = connection.send(&toolbelt::read_context())?["output"].take();
        let Some((repo, number)) = self.pull_request(&context) else {
            return declare(
                connection,
                "failed",
                "the hold names no pull request: give repo and number".into(),
            );
        };
        if context["wake"]["type"] == TIMED_OUT {
            return declare(connection, "failed", format!("{repo}#{number}: the wait timed out"));
        }
        let target = json!({"repo": repo, "number": number});
        let verdict = match self.until {
            Until::Approved => self.approval(connection, &target)?,
            Until::Checks => self.checks(connection, &target)?,
        };
        match verdict {
            Some((status, summary)) => declare(connection, status, format!("{repo}#{number}: {summary}")),
            None => Ok(Held::Waiting),
        }
    }

    /// The flags' pull request, else the Work's input's `{"repo", "number"}`.
    fn pull_request(&self, context: &Value) -> Option<(String, u64)> {
        let input = &context["work"]["input"];
        let repo = self
            .repo
            .clone()
            .or_else(|| input["repo"].as_str().map(str::to_owned))?;
        let number = self.number.or_else(|| input["number"].as_u64())?;
        Some((repo, number))
    }

    fn waiting(&self, target: &Value) -> Value {
        let mut input = target.clone();
        if let Some(wait) = &self.wait {
            input["timeout"] = wait.clone().into();
        }
        input
    }

    /// Approved when each reviewer's latest review counts and one approves; otherwise the next
    /// review is awaited.
    fn approval(&self, connection: &Connection, target: &Value) -> Result<Option<(&'static str, String)>, Failure> {
        let reviews = call(connection, "github.pr.reviews", target.clone())?["output"].take();
        if approved(reviews["items"].as_array().map(Vec::as_slice).unwrap_or_default()) {
            return Ok(Some(("succeeded", "approved".into())));
        }
        call(connection, "github.pr.wait_review", self.waiting(target))?;
        Ok(None)
    }

    /// Passed or failed once every suite completed; otherwise `github.checks.wait` declared the wait.
    fn checks(&self, connection: &Connection, target: &Value) -> Result<Option<(&'static str, String)>, Failure> {
        let answer = call(connection, "github.checks.wait", self.waiting(target))?;
        if answer.get("wait").is_some() {
            return Ok(None);
        }
        let suites = answer["output"]["suites"].as_array().cloned().unwrap_or_default();
        let failing: Vec<String> = suites
            .iter()
            .filter(|s| !["success", "neutral", "skipped"].contains(&s["conclusion"].as_str().unwrap_or("")))
            .map(|s| s["app"].as_str().unwrap_or("a check").to_owned())
            .collect();
        Ok(Some(match failing.as_slice() {
            [] => ("succeeded", "checks passed".into()),
            names => ("failed", format!("checks failed: {}", names.join(", "))),
        }))
    }
}

/// Whether the reviews approve: some reviewer's latest approving or changes-requesting review
/// approves, and none requests changes.
pub fn approved(reviews: &[Value]) -> bool {
    let mut latest = std::collections::BTreeMap::new();
    for review in reviews {
        let state = review["state"].as_str().unwrap_or("");
        if ["APPROVED", "CHANGES_REQUESTED", "DISMISSED"].contains(&state) {
            latest.insert(review["author"].as_str().unwrap_or(""), state);
        }
    }
    latest.values().any(|s| *s == "APPROVED") && !latest.values().any(|s| *s == "CHANGES_REQUESTED")
}

fn call(connection: &Connection, operation: &str, input: Value) -> Result<Value, Failure> {
    connection.send(&toolbelt::call(operation, input, None))
}

fn declare(connection: &Connection, status: &'static str, summary: String) -> Result<Held, Failure> {
    connection.send(&toolbelt::declare_outcome(status, Some(summary.clone()), Vec::new()))?;
    Ok(Held::Declared(status, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(author: &str, state: &str) -> Value {
        json!({"author": author, "state": state})
    }

    #[test]
    fn each_reviewers_latest_verdict_counts() {
        for (reviews, expected) in [
            (vec![], false),
            (vec![review("a", "COMMENTED")], false),
            (vec![review("a", "APPROVED")], true),
            (vec![review("a", "APPROVED"), review("b", "CHANGES_REQUESTED")], false),
            (vec![review("b", "CHANGES_REQUESTED"), review("b", "APPROVED")], true),
            (vec![review("a", "APPROVED"), review("a", "COMMENTED")], true),
            (vec![review("a", "APPROVED"), review("a", "DISMISSED")], false),
        ] {
            assert_eq!(approved(&reviews), expected, "{reviews:?}");
        }
    }
}
