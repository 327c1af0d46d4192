//! GitHub webhook deliveries as events: the signature rule and the key scheme. Pure: no I/O.
//!
//! Keys (lower case, as GitHub's names are case-insensitive):
//! - `github:<owner>/<repo>#<number>`: an issue or a pull request (GitHub numbers both in one
//!   sequence), for `issues`, `issue_comment`, `pull_request*` deliveries, and `check_suite` /
//!   `check_run` ones once per pull request they name;
//! - `github:<owner>/<repo>`: the repository, for every other delivery.
//!
//! Types are `github.<event>.<action>` (`github.pull_request_review.submitted`), or
//! `github.<event>` for a delivery without an action (`github.push`).

use conduit_core::names::is_event_type;
use conduit_core::{EventSample, Source};
use serde_json::{json, Value};

use crate::extensions::signature::hmac_hex_matches;

/// The events' source, as the ingress route names it.
pub const SOURCE: &str = "github";

/// Any change to a pull request's reviews: submitted, edited, dismissed.
pub const REVIEWS_CHANGED: &str = "github.pull_request_review.*";
pub const CHECK_SUITE_COMPLETED: &str = "github.check_suite.completed";

/// One event a delivery becomes.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    pub event_type: String,
    pub key: String,
    pub data: Value,
}

pub fn repo_key(repo: &str) -> String {
    format!("github:{}", repo.to_ascii_lowercase())
}

pub fn issue_key(repo: &str, number: u64) -> String {
    format!("{}#{number}", repo_key(repo))
}

/// Whether `header` (`X-Hub-Signature-256`) is `sha256=<hex>` of the body's HMAC-SHA256 under
/// `secret`.
pub fn signature_valid(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    header
        .and_then(|h| h.strip_prefix("sha256="))
        .is_some_and(|hex| hmac_hex_matches(secret, &[body], hex))
}

/// The events a delivery of `event` (`X-GitHub-Event`) with `payload` becomes; `None` when it is
/// not a delivery the host understands (no repository, a malformed name).
pub fn events(event: &str, payload: &Value) -> Option<Vec<Delivered>> {
    let repo = payload["repository"]["full_name"].as_str()?;
    let event_type = match payload["action"].as_str() {
        Some(action) => format!("github.{event}.{action}"),
        None => format!("github.{event}"),
    };
    if !is_event_type(&event_type) {
        return None;
    }
    let numbers = numbers_named(event, payload);
    let keys: Vec<String> = if numbers.is_empty() {
        vec![repo_key(repo)]
    } else {
        numbers.iter().map(|n| issue_key(repo, *n)).collect()
    };
    let data = summary(event, payload, repo);
    Some(
        keys.into_iter()
            .map(|key| Delivered {
                event_type: event_type.clone(),
                key,
                data: data.clone(),
            })
            .collect(),
    )
}

/// What a route on GitHub's events can be traced with (`route --samples`): the events
/// representative deliveries become, each named after its type.
pub fn samples() -> Vec<EventSample> {
    let repo = json!({"full_name": "octo/widgets"});
    let sender = json!({"login": "octocat"});
    let pull = json!({"number": 7, "title": "Fix the widget"});
    let issue = json!({"number": 12, "title": "The widget is broken"});
    let deliveries = [
        ("pull_request", json!({"action": "opened", "pull_request": pull})),
        (
            "pull_request_review",
            json!({"action": "submitted", "pull_request": pull,
                   "review": {"state": "approved", "user": {"login": "reviewer"}, "body": "Looks good"}}),
        ),
        (
            "check_suite",
            json!({"action": "completed", "check_suite": {"status": "completed", "conclusion": "success",
                   "head_sha": "0123abc", "pull_requests": [{"number": 7}]}}),
        ),
        ("issues", json!({"action": "opened", "issue": issue})),
        (
            "issue_comment",
            json!({"action": "created", "issue": issue, "comment": {"user": {"login": "octocat"}, "body": "Any news?"}}),
        ),
    ];
    deliveries
        .into_iter()
        .filter_map(|(event, mut payload)| {
            payload["repository"] = repo.clone();
            payload["sender"] = sender.clone();
            events(event, &payload)?.into_iter().next()
        })
        .map(|d| EventSample {
            name: d.event_type.clone(),
            event_type: d.event_type,
            source: Source::Ingress(SOURCE.to_owned()),
            correlation_key: Some(d.key),
            data: d.data,
        })
        .collect()
}

/// The issue or pull request numbers a delivery is about.
fn numbers_named(event: &str, payload: &Value) -> Vec<u64> {
    let single = |v: &Value| v["number"].as_u64().into_iter().collect();
    match event {
        "issues" | "issue_comment" => single(&payload["issue"]),
        "pull_request" | "pull_request_review" | "pull_request_review_comment" | "pull_request_review_thread" => {
            single(&payload["pull_request"])
        }
        "check_suite" | "check_run" => payload[event]["pull_requests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pr| pr["number"].as_u64())
            .collect(),
        _ => Vec::new(),
    }
}

/// What an agent needs of a delivery, kept small (the event log is not GitHub's archive).
fn summary(event: &str, payload: &Value, repo: &str) -> Value {
    let mut data = json!({"repo": repo, "action": payload["action"], "sender": payload["sender"]["login"]});
    match event {
        "pull_request_review" => {
            let review = &payload["review"];
            data["review"] = json!({"state": review["state"], "author": review["user"]["login"],
                                    "body": review["body"], "url": review["html_url"]});
        }
        "check_suite" | "check_run" => {
            let check = &payload[event];
            data[event] = json!({"status": check["status"], "conclusion": check["conclusion"],
                                 "head_sha": check["head_sha"]});
        }
        "issue_comment" | "pull_request_review_comment" => {
            let comment = &payload["comment"];
            data["comment"] = json!({"author": comment["user"]["login"], "body": comment["body"],
                                     "url": comment["html_url"]});
        }
        _ => {}
    }
    for subject in ["issue", "pull_request"] {
        if let Some(number) = payload[subject]["number"].as_u64() {
            data["number"] = number.into();
            data["title"] = payload[subject]["title"].clone();
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &[u8], body: &[u8]) -> String {
        format!("sha256={}", crate::extensions::signature::sign_hex(secret, &[body]))
    }

    #[test]
    fn only_the_bodys_own_signature_under_the_secret_is_valid() {
        let body = br#"{"zen":"hi"}"#;
        let good = sign(b"s3cret", body);
        assert!(signature_valid(b"s3cret", body, Some(&good)));
        for (secret, body, header) in [
            (&b"other"[..], &body[..], Some(good.as_str())),
            (b"s3cret", br#"{"zen":"ho"}"#, Some(good.as_str())),
            (b"s3cret", body, Some(&good[..good.len() - 2])),
            (b"s3cret", body, Some(good.trim_start_matches("sha256="))),
            (b"s3cret", body, Some("sha256=zz")),
            (b"s3cret", body, None),
        ] {
            assert!(!signature_valid(secret, body, header), "{header:?}");
        }
    }

    #[test]
    fn deliveries_land_on_their_issue_pull_request_or_repository_key() {
        let repo = json!({"full_name": "Acme/App"});
        let review = json!({"action": "submitted", "repository": repo, "pull_request": {"number": 7},
                            "review": {"state": "approved", "user": {"login": "rev"}}});
        let delivered = events("pull_request_review", &review).unwrap();
        assert_eq!(delivered.len(), 1);
        assert_eq!(
            (delivered[0].event_type.as_str(), delivered[0].key.as_str()),
            ("github.pull_request_review.submitted", "github:acme/app#7")
        );
        assert_eq!(delivered[0].data["review"]["state"], "approved");

        let suite = json!({"action": "completed", "repository": repo,
                           "check_suite": {"status": "completed", "pull_requests": [{"number": 1}, {"number": 2}]}});
        let keys: Vec<String> = events("check_suite", &suite)
            .unwrap()
            .into_iter()
            .map(|d| d.key)
            .collect();
        assert_eq!(keys, ["github:acme/app#1", "github:acme/app#2"]);

        let push = json!({"repository": repo, "ref": "refs/heads/main"});
        let pushed = events("push", &push).unwrap();
        assert_eq!(
            (pushed[0].event_type.as_str(), pushed[0].key.as_str()),
            ("github.push", "github:acme/app")
        );

        assert_eq!(events("push", &json!({"ref": "x"})), None, "no repository");
        assert_eq!(events("bad event", &push), None);
    }
}
