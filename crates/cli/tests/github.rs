//! The `github` extension against a fake GitHub REST API on loopback (reached through the egress
//! guard's test allowance only): every operation from a real execution, GitHub's refusals as
//! stable codes, the token never in the store, and the webhook ingress waking a translated wait.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::calls::{call_line, script_of, Answers};
use common::git_http::{bare_repo, GitServer};
use common::github::{FakeGithub, HEAD_SHA, ISSUES, TOKEN};
use common::*;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

const WEBHOOK_SECRET: &str = "whsec-7c1d";

/// A daemon listening on loopback too (answering git credentials for the fake's own host), whose
/// `demo` scope grants `@github.author` and
/// `@github.reviewer` to a shell binding running `script`, with GitHub at `github`.
fn daemon(github: &FakeGithub, script: impl FnOnce(&str) -> String) -> (Daemon, u16) {
    daemon_with_git(github, &format!("127.0.0.1:{}", github.port), script)
}

/// [`daemon`], answering git credentials for `git_host`.
fn daemon_with_git(github: &FakeGithub, git_host: &str, script: impl FnOnce(&str) -> String) -> (Daemon, u16) {
    start(github, git_host, |d| granting(&script(d), operations()))
}

/// A daemon whose `demo/shell` binding is the GitHub hold with `config`.
fn holding(github: &FakeGithub, config: Value) -> (Daemon, u16) {
    start(github, &format!("127.0.0.1:{}", github.port), |_| {
        let mut whole = granting("true", operations());
        whole["scopes"]["demo"]["bindings"]["shell"] =
            json!({"executor": "github-hold", "config": config, "operations": operations()});
        whole
    })
}

fn operations() -> Value {
    json!([
        "read_context",
        "declare_outcome",
        "emit",
        "@github.author",
        "@github.reviewer"
    ])
}

/// A daemon on the configuration `config` makes (given the scratch directory), with GitHub's
/// settings, secrets and the test allowance added.
fn start(github: &FakeGithub, git_host: &str, config: impl FnOnce(&str) -> Value) -> (Daemon, u16) {
    let env = [("GH_TOKEN", TOKEN), ("GH_WEBHOOK", WEBHOOK_SECRET)];
    let api_url = github.url();
    daemon_beside(github.port, &env, |scratch| {
        let mut config = config(&scratch.display().to_string());
        config["secrets"] = json!({"gh_token": "env:GH_TOKEN", "gh_webhook": "env:GH_WEBHOOK"});
        config["extensions"] = json!({"github": {"api_url": api_url, "token": "gh_token",
            "webhook_secret": "gh_webhook", "scope": "demo", "git_host": git_host}});
        config.to_string()
    })
}

#[test]
fn every_github_operation_round_trips_from_a_real_execution() {
    let github = FakeGithub::start();
    let pr = |extra: Value| {
        let mut input = json!({"repo": "acme/app", "number": 7});
        input
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        input
    };
    let git_host = format!("127.0.0.1:{}", github.port);
    let calls = [
        (
            "issue_view",
            "github.issue.view",
            json!({"repo": "acme/app", "number": 1}),
        ),
        (
            "issue_comment",
            "github.issue.comment",
            json!({"repo": "acme/app", "number": 1, "body": "On it."}),
        ),
        (
            "issue_list",
            "github.issue.list",
            json!({"repo": "acme/app", "limit": 120}),
        ),
        ("pr_view", "github.pr.view", pr(json!({}))),
        (
            "pr_create",
            "github.pr.create",
            json!({"repo": "acme/app", "title": "Fix", "head": "fix", "base": "main"}),
        ),
        ("pr_edit", "github.pr.edit", pr(json!({"title": "Fix, better"}))),
        ("pr_comment", "github.pr.comment", pr(json!({"body": "Ready."}))),
        ("pr_review", "github.pr.review", pr(json!({"event": "APPROVE"}))),
        ("pr_diff", "github.pr.diff", pr(json!({}))),
        (
            "credential",
            "github.git.credential",
            json!({"protocol": "http", "host": git_host}),
        ),
        (
            "credential_other",
            "github.git.credential",
            json!({"protocol": "https", "host": "github.com"}),
        ),
        (
            "missing",
            "github.issue.view",
            json!({"repo": "acme/gone", "number": 1}),
        ),
        ("escape", "github.issue.view", json!({"repo": "acme/..", "number": 1})),
        (
            "limited",
            "github.issue.view",
            json!({"repo": "acme/limited", "number": 1}),
        ),
        (
            "paused",
            "--json github.issue.view",
            json!({"repo": "acme/app", "number": 1}),
        ),
    ];
    let (daemon, _) = daemon(&github, |d| script_of(d, &calls));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let answers = Answers(daemon.scratch().to_owned());

    assert_eq!(answers.output("issue_view")["labels"], json!(["bug"]));
    assert_eq!(answers.output("issue_comment")["id"], 901);
    let listed = answers.output("issue_list");
    assert_eq!(
        listed["items"].as_array().unwrap().len(),
        120,
        "two pages, cut at the limit"
    );
    assert_eq!(listed["items"][119]["number"], 120);
    assert_eq!(answers.output("pr_view")["head"]["sha"], HEAD_SHA);
    assert_eq!(answers.output("pr_create")["title"], "Fix");
    assert_eq!(answers.output("pr_edit")["title"], "Fix, better");
    assert_eq!(answers.output("pr_comment")["id"], 901);
    assert_eq!(answers.output("pr_review")["state"], "APPROVED");
    assert!(answers.output("pr_diff")["diff"]
        .as_str()
        .unwrap()
        .starts_with("diff --git"));
    assert_eq!(
        answers.output("credential"),
        json!({"username": "x-access-token", "password": TOKEN})
    );
    assert_eq!(
        answers.output("credential_other"),
        json!({}),
        "no credential for another host"
    );
    assert_eq!(answers.refused("missing"), "github_not_found");
    assert_eq!(answers.refused("escape"), "invalid_input");
    assert_eq!(answers.refused("limited"), "github_rate_limited");
    assert_eq!(answers.read("paused", "status").trim(), "1");
    let paused: Value = serde_json::from_str(&answers.read("paused", "out")).unwrap();
    assert_eq!(paused["error"], "github_rate_limited", "{paused}");
    assert!((1..=120).contains(&paused["retry_after"].as_u64().unwrap()), "{paused}");

    let seen = github.requests();
    let sent = |method: &str, path: &str| seen.iter().find(|r| r.method == method && r.path == path).cloned();
    assert!(seen
        .iter()
        .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {TOKEN}")[..])));
    assert_eq!(
        sent("POST", "/repos/acme/app/issues/1/comments").unwrap().body,
        json!({"body": "On it."})
    );
    assert_eq!(
        sent("POST", "/repos/acme/app/pulls/7/reviews").unwrap().body["event"],
        "APPROVE"
    );
    assert_eq!(
        sent("PATCH", "/repos/acme/app/pulls/7").unwrap().body,
        json!({"title": "Fix, better"})
    );
    let pages = seen
        .iter()
        .filter(|r| r.path.starts_with("/repos/acme/app/issues?"))
        .count();
    assert_eq!(pages, 2, "{ISSUES} issues at 100 a page, 120 wanted");
    assert!(
        !seen.iter().any(|r| r.path.contains("..")),
        "a climbing repo is never sent"
    );
    let after_limit = seen
        .iter()
        .skip_while(|r| !r.path.starts_with("/repos/acme/limited/"))
        .count();
    assert_eq!(after_limit, 1, "while GitHub asks to be left alone, nothing is sent");

    let bytes = store_files(&state_beside(daemon.scratch()));
    assert!(
        contains(&bytes, "github.issue.view"),
        "control: the scan reads the store's records"
    );
    assert!(!contains(&bytes, TOKEN), "the token is in no record of the store");
    assert!(!daemon.log().contains(TOKEN), "nor in the daemon's log");
    let audit = daemon.json(&["audit", "--operation", "github.git.credential"]);
    let credential_calls = audit["items"].as_array().unwrap().len();
    assert_eq!(credential_calls, 2, "every call is audited like any other");
}

fn sign(body: &str, secret: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// A raw POST to the loopback listener: the status and the JSON answer.
fn deliver(port: u16, event: &str, body: &str, signature: Option<&str>, delivery: &str) -> (u16, Value) {
    let mut headers = vec![("X-GitHub-Event", event), ("X-GitHub-Delivery", delivery)];
    headers.extend(signature.map(|s| ("X-Hub-Signature-256", s)));
    tcp_post(port, "/v1/ingress/github", &headers, body)
}

/// A Work parks on `github.pr.wait_review`; an unsigned or wrongly signed delivery is refused
/// `401` and changes nothing; the signed one wakes the Work, which then sees the review as input.
#[test]
fn a_signed_review_webhook_wakes_the_work_parked_on_wait_review() {
    let github = FakeGithub::start();
    let (daemon, port) = daemon(&github, |d| {
        let input = json!({"repo": "Acme/App", "number": 7, "timeout": "1h"});
        format!(
            "if [ -f {d}/parked ]; then os context > {d}/context.json; os outcome succeeded; \
             else touch {d}/parked; {}fi",
            call_line(d, "wait", "github.pr.wait_review", input)
        )
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let answers = Answers(daemon.scratch().to_owned());
    assert_eq!(
        answers.read("wait", "status").trim(),
        "3",
        "os tells the segment to end"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&answers.read("wait", "out")).unwrap()["key"],
        "github:acme/app#7"
    );

    let review = json!({"action": "submitted", "repository": {"full_name": "acme/app"}, "pull_request": {"number": 7},
                        "review": {"state": "approved", "user": {"login": "rev"}, "body": "LGTM"}, "sender": {"login": "rev"}})
    .to_string();
    let events_before = daemon.json(&["events", "list"])["items"].as_array().unwrap().len();
    for (signature, why) in [
        (None, "unsigned"),
        (Some(sign(&review, "not-the-secret")), "signed with another secret"),
        (
            Some(sign(&format!("{review} "), WEBHOOK_SECRET)),
            "signed over another body",
        ),
    ] {
        let (status, answer) = deliver(port, "pull_request_review", &review, signature.as_deref(), "d-bad");
        assert_eq!(
            (status, answer["error"].as_str()),
            (401, Some("unauthenticated")),
            "{why}"
        );
    }
    assert_eq!(
        daemon.json(&["events", "list"])["items"].as_array().unwrap().len(),
        events_before,
        "a refused delivery changes nothing"
    );
    assert_eq!(daemon.json(&["work", "get", &work])["state"], "waiting");

    let signed = sign(&review, WEBHOOK_SECRET);
    let (status, accepted) = deliver(port, "pull_request_review", &review, Some(&signed), "d-1");
    assert_eq!(status, 200, "{accepted}");
    let (_, again) = deliver(port, "pull_request_review", &review, Some(&signed), "d-1");
    assert_eq!(
        again["accepted"], accepted["accepted"],
        "a redelivery is the same event"
    );
    daemon.await_work(&work, "succeeded");
    let context: Value = serde_json::from_str(&answers.read("context", "json")).unwrap();
    let woke = &context["wake"];
    assert_eq!(
        (woke["type"].as_str(), woke["source"].as_str()),
        (Some("github.pull_request_review.submitted"), Some("github")),
        "{context}"
    );
    assert_eq!(woke["data"]["review"]["state"], "approved");
    assert!(!daemon.log().contains(WEBHOOK_SECRET));
}

/// `github.checks.wait` parks the segment while a check suite is pending; a signed `check_suite`
/// completion on the pull request wakes it, and the call then answers the completed checks.
#[test]
fn checks_wait_parks_on_pending_checks_and_answers_completed_ones() {
    let github = FakeGithub::start();
    let (daemon, port) = daemon(&github, |d| {
        let input = json!({"repo": "acme/app", "number": 7});
        format!(
            "if [ -f {d}/parked ]; then {}os outcome succeeded; else touch {d}/parked; {}fi",
            call_line(d, "done", "github.checks.wait", input.clone()),
            call_line(d, "pending", "github.checks.wait", input),
        )
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let answers = Answers(daemon.scratch().to_owned());
    assert_eq!(answers.read("pending", "status").trim(), "3");
    let pending: Value = serde_json::from_str(&answers.read("pending", "out")).unwrap();
    assert_eq!(pending["completed"], false, "{pending}");

    *github.checks_done.lock().unwrap() = true;
    let suite = json!({"action": "completed", "repository": {"full_name": "acme/app"},
                       "check_suite": {"status": "completed", "conclusion": "success", "head_sha": HEAD_SHA,
                                       "pull_requests": [{"number": 7}]}})
    .to_string();
    let (status, _) = deliver(
        port,
        "check_suite",
        &suite,
        Some(&sign(&suite, WEBHOOK_SECRET)),
        "d-suite",
    );
    assert_eq!(status, 200);
    daemon.await_work(&work, "succeeded");
    let done = answers.output("done");
    assert_eq!(
        (done["completed"].clone(), done["suites"][0]["conclusion"].clone()),
        (json!(true), json!("success"))
    );
}

/// Real `git` from a confined execution: `clone` and `push` over smart HTTP with `os git-credential`
/// as the only credential source, which answers for the configured host; a clone of the same
/// server under another host name gets no credential and fails.
#[test]
fn git_clones_and_pushes_with_os_git_credential_and_no_other_host_gets_the_token() {
    let github = FakeGithub::start();
    let served = tempfile::tempdir().unwrap();
    let bare = bare_repo(served.path(), "app.git");
    let git = GitServer::start(served.path(), "x-access-token", TOKEN);
    let host = format!("127.0.0.1:{}", git.port);
    let (daemon, _) = daemon_with_git(&github, &host, |d| {
        let helper = "git -c credential.helper= -c 'credential.helper=!os git-credential' -c user.name=agent -c user.email=agent@example.invalid";
        let port = git.port;
        format!(
            "export GIT_TERMINAL_PROMPT=0; \
             {helper} clone -q http://127.0.0.1:{port}/app.git {d}/clone > {d}/clone.log 2>&1; echo $? > {d}/clone.status; \
             cd {d}/clone && echo change > CHANGE && {helper} add CHANGE && {helper} commit -qm change && \
             {helper} push -q origin HEAD:main > {d}/push.log 2>&1; echo $? > {d}/push.status; \
             {helper} clone -q http://localhost:{port}/app.git {d}/other > {d}/other.log 2>&1; echo $? > {d}/other.status; \
             os outcome succeeded"
        )
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let read = |name: &str| std::fs::read_to_string(daemon.scratch().join(name)).unwrap_or_default();
    assert_eq!(read("clone.status").trim(), "0", "{}", read("clone.log"));
    assert_eq!(read("push.status").trim(), "0", "{}", read("push.log"));
    let log = std::process::Command::new("git")
        .args(["--git-dir", bare.to_str().unwrap(), "log", "--format=%s", "main"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout).lines().next(),
        Some("change"),
        "the push landed"
    );
    assert_ne!(read("other.status").trim(), "0", "another host gets no credential");
    let requests = git.requests();
    assert!(requests.iter().any(|r| r.host == host && r.authorized));
    let elsewhere: Vec<_> = requests.iter().filter(|r| r.host.starts_with("localhost")).collect();
    assert!(
        !elsewhere.is_empty() && elsewhere.iter().all(|r| !r.presented),
        "{elsewhere:?}"
    );
}

/// The GitHub hold executor: a Work held `until` approved parks while no review approves, a
/// signed review webhook wakes it, and it succeeds once GitHub lists the approval. One held on
/// checks takes the pull request from the Work's input and fails when a suite fails.
#[test]
fn the_github_hold_holds_a_work_until_the_pull_request_is_approved() {
    let github = FakeGithub::start();
    let (daemon, port) = holding(
        &github,
        json!({"until": "approved", "repo": "acme/app", "number": 7, "wait": "1h"}),
    );
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let waits = daemon.json(&["waits"]);
    assert!(waits.to_string().contains("github:acme/app#7"), "{waits}");

    *github.approved.lock().unwrap() = true;
    let review = json!({"action": "submitted", "repository": {"full_name": "acme/app"}, "pull_request": {"number": 7},
                        "review": {"state": "approved", "user": {"login": "rev"}}})
    .to_string();
    let (status, _) = deliver(
        port,
        "pull_request_review",
        &review,
        Some(&sign(&review, WEBHOOK_SECRET)),
        "d-hold",
    );
    assert_eq!(status, 200);
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "acme/app#7: approved", "{done}");
    assert_eq!(daemon.attempts(&work).len(), 2, "held once, then satisfied");
}

#[test]
fn the_github_hold_on_checks_reads_its_pull_request_from_the_works_input_and_fails_failed_checks() {
    let github = FakeGithub::start();
    *github.checks_done.lock().unwrap() = true;
    *github.checks_fail.lock().unwrap() = true;
    let (daemon, _) = holding(&github, json!({"until": "checks"}));
    let input = r#"{"repo": "acme/app", "number": 7}"#;
    let work = daemon.json(&[
        "work",
        "create",
        "--scope",
        "demo",
        "--binding",
        "shell",
        "--input",
        input,
    ]);
    let work = work["id"].as_str().unwrap().to_owned();
    let done = daemon.await_work(&work, "failed");
    assert_eq!(done["outcome"]["summary"], "acme/app#7: checks failed: ci", "{done}");
}

/// Without `extensions.github`, a configuration that grants its operations still validates and its
/// Work runs, with them narrowed away: its token's catalog lacks them and a call is refused like
/// any operation outside the grant.
#[test]
fn an_unconfigured_extensions_operations_are_narrowed_away_not_the_configuration() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let daemon = Daemon::start(Some(&granting(&hold, operations()).to_string()));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let (_, tools) = http(&socket, "GET", "/v1/tools", Some(&token), None);
    let listed: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["toolId"].as_str().unwrap())
        .collect();
    assert!(!listed.iter().any(|id| id.starts_with("github.")), "{listed:?}");
    assert!(listed.contains(&"read_context"), "{listed:?}");
    let (status, refused) = toolbelt_call(
        &socket,
        &token,
        "github.issue.view",
        json!({"repo": "octo/widgets", "number": 1}),
    );
    assert_eq!((status, refused["error"].as_str()), (403, Some("forbidden")));
}
