//! `os github-hold`: the GitHub hold executor's program. It holds its Work until a pull request's
//! condition holds, calling the toolbelt itself through its execution's own socket: when the
//! condition holds it declares the outcome; otherwise it declares a translated wait on the pull
//! request's GitHub events (`github.pr.wait_review`, `github.checks.wait`) and ends, and the Work
//! resumes when the webhook delivers one, or when the wait times out (then an `approved` hold
//! looks once more and a `checks` hold fails).

use serde_json::{json, Value};

use crate::connection::Connection;
use crate::report::Failure;
use crate::toolbelt;

/// What the hold waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    /// A maintainer's review of the head commit approves, and no maintainer's latest one requests
    /// changes
    Approved,
    /// Every check suite on the pull request's head has completed, all passing
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
        let timed_out = context["wake"]["type"] == TIMED_OUT;
        let target = json!({"repo": repo, "number": number});
        let verdict = match self.until {
            Until::Approved => self.approval(connection, &target, timed_out),
            Until::Checks if timed_out => Ok(Some(("failed", "the wait for checks timed out".into()))),
            Until::Checks => self.checks(connection, &target),
        };
        match verdict {
            Ok(Some((status, summary))) => declare(connection, status, format!("{repo}#{number}: {summary}")),
            Ok(None) => Ok(Held::Waiting),
            // The hold still has its authority: the Work fails saying why, not with a bare exit.
            Err(Failure::Refused { code, message, .. }) => {
                declare(connection, "failed", format!("{repo}#{number}: {code}: {message}"))
            }
            Err(other) => Err(other),
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

    /// Approved when, on the head commit, a maintainer's latest review approves and none requests
    /// changes; otherwise the next change to the reviews is awaited (or, after a timed-out wait,
    /// the hold fails).
    fn approval(
        &self,
        connection: &Connection,
        target: &Value,
        timed_out: bool,
    ) -> Result<Option<(&'static str, String)>, Failure> {
        let pull = call(connection, "github.pr.view", target.clone())?["output"].take();
        let head = pull["head"]["sha"].as_str().unwrap_or_default();
        let reviews = call(connection, "github.pr.reviews", target.clone())?["output"].take();
        if approved(reviews["items"].as_array().map(Vec::as_slice).unwrap_or_default(), head) {
            return Ok(Some(("succeeded", "approved".into())));
        }
        if timed_out {
            return Ok(Some(("failed", "the wait for an approval timed out".into())));
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

/// Who may approve: the repository's owners, members and collaborators, not any GitHub user.
const APPROVERS: [&str; 3] = ["OWNER", "MEMBER", "COLLABORATOR"];

/// Whether the reviews approve the commit `head`: among maintainers' reviews of it, each
/// reviewer's latest verdict (approve, request changes, dismissed) counts, one approves and none
/// requests changes. An approval of an earlier commit does not carry over to new pushes.
pub fn approved(reviews: &[Value], head: &str) -> bool {
    let mut latest = std::collections::BTreeMap::new();
    for review in reviews {
        let state = review["state"].as_str().unwrap_or("");
        let maintainer = APPROVERS.contains(&review["author_association"].as_str().unwrap_or(""));
        let verdict = ["APPROVED", "CHANGES_REQUESTED", "DISMISSED"].contains(&state);
        if maintainer && verdict && review["commit_id"] == head {
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
        json!({"author": author, "state": state, "author_association": "MEMBER", "commit_id": "h"})
    }

    #[test]
    fn each_maintainers_latest_verdict_on_the_head_counts() {
        for (reviews, expected) in [
            (vec![], false),
            (vec![review("a", "COMMENTED")], false),
            (vec![review("a", "APPROVED")], true),
            (vec![review("a", "APPROVED"), review("b", "CHANGES_REQUESTED")], false),
            (vec![review("b", "CHANGES_REQUESTED"), review("b", "APPROVED")], true),
            (vec![review("a", "APPROVED"), review("a", "COMMENTED")], true),
            (vec![review("a", "APPROVED"), review("a", "DISMISSED")], false),
        ] {
            assert_eq!(approved(&reviews, "h"), expected, "{reviews:?}");
        }
        let mut outsider = review("x", "APPROVED");
        outsider["author_association"] = "NONE".into();
        assert!(
            !approved(&[outsider], "h"),
            "anyone may review; only maintainers approve"
        );
        assert!(
            !approved(&[review("a", "APPROVED")], "newer"),
            "an approval of an earlier commit"
        );
    }
}
