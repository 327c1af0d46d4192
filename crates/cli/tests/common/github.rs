//! A fake GitHub REST API on loopback: it checks the `Authorization` header, answers the paths the
//! `github.*` operations use as GitHub does (pagination by `Link`, 404, a 403 rate limit with its
//! headers), and keeps every request it was sent.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::fake_http::{self, json_answer, Answer, Seen};

pub const TOKEN: &str = "gh-test-token-5f1e";
pub const HEAD_SHA: &str = "0123456789abcdef0123456789abcdef01234567";
/// Issues in `acme/app`: two pages at 100 a page.
pub const ISSUES: u64 = 150;

pub struct FakeGithub {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Whether check suites have completed yet.
    pub checks_done: Arc<Mutex<bool>>,
    /// Whether the completed suite failed.
    pub checks_fail: Arc<Mutex<bool>>,
    /// Whether a review has approved pull request 7.
    pub approved: Arc<Mutex<bool>>,
}

/// What the fake's answers depend on, as the test sets it.
#[derive(Clone, Copy)]
struct State {
    checks_done: bool,
    checks_fail: bool,
    approved: bool,
}

fn flag() -> Arc<Mutex<bool>> {
    Arc::new(Mutex::new(false))
}

impl FakeGithub {
    pub fn start() -> FakeGithub {
        let (checks_done, checks_fail, approved) = (flag(), flag(), flag());
        let state = (checks_done.clone(), checks_fail.clone(), approved.clone());
        let (port, seen) = fake_http::start(move |request, port| {
            let now = State {
                checks_done: *state.0.lock().unwrap(),
                checks_fail: *state.1.lock().unwrap(),
                approved: *state.2.lock().unwrap(),
            };
            answer(request, port, now)
        });
        FakeGithub {
            port,
            seen,
            checks_done,
            checks_fail,
            approved,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn issue(number: u64) -> Value {
    json!({"number": number, "title": format!("Issue {number}"), "state": "open", "body": "It breaks.",
           "user": {"login": "reporter"}, "labels": [{"name": "bug"}], "comments": 2,
           "html_url": format!("https://github.example/acme/app/issues/{number}")})
}

fn pull(number: u64, title: &str) -> Value {
    json!({"number": number, "title": title, "state": "open", "body": "Fixes it.", "draft": false, "merged": false,
           "user": {"login": "author"}, "html_url": format!("https://github.example/acme/app/pull/{number}"),
           "head": {"ref": "fix", "sha": HEAD_SHA}, "base": {"ref": "main"}})
}

fn answer(request: &Seen, port: u16, state: State) -> Answer {
    if request.authorization.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        return json_answer(401, json!({"message": "Bad credentials"}));
    }
    let (path, query) = request.path.split_once('?').unwrap_or((&request.path, ""));
    if path.starts_with("/repos/acme/limited/") {
        let reset = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 120;
        let mut limited = json_answer(403, json!({"message": "API rate limit exceeded"}));
        limited.headers.push(("X-RateLimit-Remaining".into(), "0".into()));
        limited.headers.push(("X-RateLimit-Reset".into(), reset.to_string()));
        return limited;
    }
    match (request.method.as_str(), path) {
        ("GET", "/repos/acme/app/issues/1") => json_answer(200, issue(1)),
        ("POST", "/repos/acme/app/issues/1/comments" | "/repos/acme/app/issues/7/comments") => {
            json_answer(201, json!({"id": 901, "html_url": "https://github.example/c/901"}))
        }
        ("GET", "/repos/acme/app/issues") => issues_page(query, port),
        ("GET", "/repos/acme/app/pulls/7") if request.accept.as_deref() == Some("application/vnd.github.diff") => {
            Answer {
                status: 200,
                headers: vec![("Content-Type".into(), "text/plain".into())],
                body: "diff --git a/x b/x\n+fixed\n".into(),
            }
        }
        ("GET", "/repos/acme/app/pulls/7") => json_answer(200, pull(7, "Fix it")),
        ("POST", "/repos/acme/app/pulls") => json_answer(201, pull(8, request.body["title"].as_str().unwrap_or(""))),
        ("PATCH", "/repos/acme/app/pulls/7") => json_answer(200, pull(7, request.body["title"].as_str().unwrap_or(""))),
        ("GET", "/repos/acme/app/pulls/7/reviews") => {
            let review = |id: u64, login: &str, association: &str, review_state: &str| {
                json!({"id": id, "user": {"login": login}, "author_association": association,
                       "state": review_state, "commit_id": HEAD_SHA})
            };
            // A stranger's approval, which a hold must not count.
            let mut reviews = vec![review(1, "passer-by", "NONE", "APPROVED")];
            if state.approved {
                reviews.push(review(2, "rev", "MEMBER", "APPROVED"));
            }
            json_answer(200, Value::Array(reviews))
        }
        ("POST", "/repos/acme/app/pulls/7/reviews") => json_answer(
            200,
            json!({"id": 77, "state": "APPROVED", "html_url": "https://github.example/r/77"}),
        ),
        ("GET", p) if p == format!("/repos/acme/app/commits/{HEAD_SHA}/check-suites") => {
            let status = if state.checks_done { "completed" } else { "in_progress" };
            let conclusion = match (state.checks_done, state.checks_fail) {
                (false, _) => Value::Null,
                (true, false) => json!("success"),
                (true, true) => json!("failure"),
            };
            json_answer(
                200,
                json!({"total_count": 1, "check_suites": [
                {"status": status, "conclusion": conclusion, "app": {"slug": "ci"}}]}),
            )
        }
        _ => json_answer(404, json!({"message": "Not Found"})),
    }
}

/// `per_page=100` pages of the repository's issues, linked as GitHub links them.
fn issues_page(query: &str, port: u16) -> Answer {
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    let page: u64 = param("page").and_then(|p| p.parse().ok()).unwrap_or(1);
    let per_page: u64 = param("per_page").and_then(|p| p.parse().ok()).unwrap_or(30);
    let first = (page - 1) * per_page + 1;
    let items: Vec<Value> = (first..=ISSUES.min(page * per_page)).map(issue).collect();
    let mut answer = json_answer(200, Value::Array(items));
    if page * per_page < ISSUES {
        let next = format!(
            "http://127.0.0.1:{port}/repos/acme/app/issues?state=open&per_page={per_page}&page={}",
            page + 1
        );
        answer.headers.push(("Link".into(), format!("<{next}>; rel=\"next\"")));
    }
    answer
}
