//! Human approvals through the real daemon and CLI: a covered call parks its Work, a named
//! approver's decision (an event stamped with the operator) wakes it, and the repeated call passes
//! once; a denial and a timeout refuse the repeated call; another approver, and an operator
//! without `operate`, cannot decide.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::tmux::Tmux;
use common::*;
use serde_json::{json, Value};

/// Each attempt calls `http.fetch` (kept per attempt) and succeeds once the call answered.
fn approving_config(scratch: &std::path::Path, port: u16, timeout: Option<&str>) -> Value {
    let d = scratch.display();
    let script = format!(
        "os call http.fetch --input '{{\"url\":\"http://127.0.0.1:{port}/deploy\"}}' > {d}/call-$$.json 2> {d}/err-$$.txt; \
         s=$?; echo \"exit=$s\" >> {d}/err-$$.txt; [ $s -eq 0 ] && os outcome succeeded"
    );
    let mut config = granting(
        &script,
        json!(["read_context", "declare_outcome", "wait", "http.fetch"]),
    );
    let mut rule = json!({"operations": ["http.fetch"], "approvers": ["alice"]});
    if let Some(timeout) = timeout {
        rule["timeout"] = json!(timeout);
    }
    config["scopes"]["demo"]["approvals"] = json!([rule]);
    config
}

fn start(timeout: Option<&str>) -> (Daemon, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let (port, heads) = test_server();
    let allow = format!("127.0.0.1:{port}");
    let daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_TEST_FETCH_ALLOW", &allow)], |scratch| {
        approving_config(scratch, port, timeout).to_string()
    });
    (daemon, heads)
}

/// Writes `token` where the CLI can be pointed at it with `--token-file`.
fn token_file(daemon: &Daemon, name: &str, role: &str) -> String {
    let issued = daemon.json(&["auth", "operators", "add", name, "--role", role]);
    let file = daemon.scratch().join(format!("{name}.token"));
    std::fs::write(&file, issued["token"].as_str().unwrap()).unwrap();
    file.display().to_string()
}

fn pending(daemon: &Daemon) -> Value {
    let listed = daemon.json(&["approvals", "list", "--in-state", "pending"]);
    listed["items"][0].clone()
}

fn stderr_of_attempts(daemon: &Daemon) -> String {
    std::fs::read_dir(daemon.scratch())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("err-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect()
}

#[test]
fn a_covered_call_waits_for_its_named_approver_then_passes_once() {
    let (daemon, heads) = start(None);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    assert!(heads.lock().unwrap().is_empty(), "the operation did not run");
    let told = stderr_of_attempts(&daemon);
    assert!(
        told.contains("parked by the `human` gate: a person's approval"),
        "{told}"
    );
    assert!(told.contains("exit=3"), "a distinct status so the script stops: {told}");
    let approval = pending(&daemon);
    assert_eq!(
        (approval["operation"].as_str(), approval["work_id"].as_str()),
        (Some("http.fetch"), Some(work.as_str()))
    );
    let id = approval["id"].as_str().unwrap().to_owned();
    let url = approval["input"]["url"].as_str().unwrap().to_owned();
    assert!(
        url.ends_with("/deploy"),
        "the approval keeps the exact input: {approval}"
    );
    let shown = String::from_utf8(daemon.cli(&["approvals", "show", &id]).stdout).unwrap();
    assert!(
        shown.contains(&format!("\"url\": \"{url}\"")),
        "an approver sees what they approve: {shown}"
    );
    let listed = String::from_utf8(daemon.cli(&["approvals", "list"]).stdout).unwrap();
    assert!(
        listed.contains(&format!("{{\"url\":\"{url}\"}}")),
        "a one-line summary: {listed}"
    );
    let audit = daemon.cli(&["--json", "audit"]).stdout;
    assert!(
        !String::from_utf8_lossy(&audit).contains("/deploy"),
        "the input is never in audit"
    );

    let (status, refused) = daemon.json_unchecked(&["approvals", "approve", &id]);
    assert_eq!(
        (status, refused["error"].as_str()),
        (Some(1), Some("forbidden")),
        "the owner is not alice"
    );
    let viewer = token_file(&daemon, "alice-viewer", "view");
    let (_, no_role) = daemon.json_unchecked(&["--token-file", &viewer, "approvals", "approve", &id]);
    assert_eq!(no_role["error"], "forbidden_role");
    let alice = token_file(&daemon, "alice", "operate");
    let decided = daemon.json(&["--token-file", &alice, "approvals", "approve", &id]);
    assert_eq!(
        (decided["approval"]["state"].as_str(), decided["woke"].as_bool()),
        (Some("approved"), Some(true))
    );
    assert_eq!(decided["event"]["actor"], "operator:alice");

    daemon.await_work(&work, "succeeded");
    assert_eq!(heads.lock().unwrap().len(), 1, "the repeated call ran once");
    assert_eq!(daemon.json(&["approvals", "show", &id])["state"], "used", "single use");
    let events = daemon.events(&work);
    let decided_event = events.iter().find(|e| e["type"] == "approval.decided").unwrap();
    assert_eq!(decided_event["actor"], "operator:alice");
    let (again, _) = daemon.json_unchecked(&["--token-file", &alice, "approvals", "approve", &id]);
    assert_eq!(again, Some(1), "a decided approval is not decided twice");

    let token = daemon.operator_token();
    let socket = daemon.management_socket();
    let approval_of = |path: &str| http(&socket, "GET", path, Some(&token), None).1["approval"].clone();
    assert_eq!(approval_of("/v1/tools/http.fetch"), "never", "no scope, no rule");
    let scoped = http(&socket, "GET", "/v1/tools?scope=demo", Some(&token), None).1;
    let fetch = scoped
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["toolId"] == "http.fetch")
        .unwrap()
        .clone();
    assert_eq!(fetch["approval"], "always", "a rule of the scope covers it");
    let emit = scoped
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["toolId"] == "read_context")
        .unwrap()
        .clone();
    assert_eq!(emit["approval"], "never");
}

#[test]
fn a_denied_call_is_refused_with_the_reason() {
    let (daemon, heads) = start(None);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let id = pending(&daemon)["id"].as_str().unwrap().to_owned();
    let alice = token_file(&daemon, "alice", "operate");
    daemon.json(&[
        "--token-file",
        &alice,
        "approvals",
        "deny",
        &id,
        "--reason",
        "not on a Friday",
    ]);
    daemon.await_work(&work, "failed");
    let stderr = stderr_of_attempts(&daemon);
    assert!(
        stderr.contains("approval_denied: a person denied this call: not on a Friday"),
        "{stderr}"
    );
    assert!(heads.lock().unwrap().is_empty());
}

#[test]
fn an_undecided_call_expires_at_its_timeout() {
    let (daemon, heads) = start(Some("1s"));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "failed");
    assert!(stderr_of_attempts(&daemon).contains("approval_expired"));
    assert!(heads.lock().unwrap().is_empty());
    let listed = daemon.json(&["approvals", "list", "--in-state", "expired"]);
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
}

/// Cancelling a Work cancels its pending approvals, so none is left listed for someone to decide;
/// the approval's ETag says it changed.
#[test]
fn cancelling_the_work_cancels_its_pending_approval() {
    let (daemon, heads) = start(None);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let id = pending(&daemon)["id"].as_str().unwrap().to_owned();
    assert_revisions(&daemon, &format!("/v1/approvals/{id}"), || {
        daemon.json(&["work", "cancel", &work]);
    });
    let listed = daemon.json(&["approvals", "list", "--in-state", "pending"]);
    assert_eq!(listed["items"], json!([]), "nothing left to decide");
    let approval = daemon.json(&["approvals", "show", &id]);
    assert_eq!(
        (approval["state"].as_str(), approval["decided_by"].as_str()),
        (Some("cancelled"), Some("operator:local"))
    );
    let alice = token_file(&daemon, "alice", "operate");
    let (status, refused) = daemon.json_unchecked(&["--token-file", &alice, "approvals", "approve", &id]);
    assert_eq!((status, refused["error"].as_str()), (Some(1), Some("conflict")));
    assert!(heads.lock().unwrap().is_empty());
}

/// An approval is bound to the call's input: approving a call with one input lets no call with
/// another input through.
#[test]
fn an_approval_for_one_input_does_not_pass_another() {
    let (port, heads) = test_server();
    let allow = format!("127.0.0.1:{port}");
    let daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_TEST_FETCH_ALLOW", &allow)], |scratch| {
        let d = scratch.display();
        // The first attempt asks for /a, every later one for /b.
        let script = format!(
            "p=b; [ -f {d}/first ] || {{ p=a; touch {d}/first; }}; \
             os call http.fetch --input \"{{\\\"url\\\":\\\"http://127.0.0.1:{port}/$p\\\"}}\" > /dev/null"
        );
        let mut config = granting(
            &script,
            json!(["read_context", "declare_outcome", "wait", "http.fetch"]),
        );
        config["scopes"]["demo"]["approvals"] = json!([{"operations": ["http.fetch"]}]);
        config.to_string()
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let first = pending(&daemon)["id"].as_str().unwrap().to_owned();
    daemon.json(&["approvals", "approve", &first]);
    wait_until("the call with the other input to park again", || {
        daemon.json(&["approvals", "list", "--in-state", "pending"])["items"]
            .as_array()
            .is_some_and(|items| items.len() == 1 && items[0]["id"] != first.as_str())
    });
    assert_eq!(
        daemon.json(&["approvals", "show", &first])["state"],
        "approved",
        "still unused"
    );
    assert!(heads.lock().unwrap().is_empty(), "neither call ran");
}

/// `open-conduit tui` as the operator whose token is in `token_file`, in its own tmux server.
fn tui(daemon: &Daemon, name: &str, token_file: &str) -> Tmux {
    let socket = daemon.scratch().join(format!("tmux-{name}"));
    Tmux::run(
        socket,
        (160, 45),
        &format!(
            "{OPEN_CONDUIT} tui --state {} --token-file {token_file}",
            daemon.state.display()
        ),
    )
}

#[test]
fn the_tui_shows_a_parked_calls_input_and_approving_it_resumes_the_work() {
    if !common::tmux::available() {
        return;
    }
    let (daemon, heads) = start(None);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let id = pending(&daemon)["id"].as_str().unwrap().to_owned();

    let viewer = tui(&daemon, "viewer", &token_file(&daemon, "carol", "view"));
    viewer.shows("carol (view)");
    viewer.press("2");
    let screen = viewer.shows("/deploy");
    assert!(
        screen.contains("http.fetch") && screen.contains("Approvals (1)"),
        "{screen}"
    );
    assert!(
        !screen.contains("a approve"),
        "a viewer is offered no approve key: {screen}"
    );
    viewer.press("a");
    viewer.shows("the view role cannot decide approvals");
    assert_eq!(daemon.json(&["approvals", "show", &id])["state"], "pending");

    let alice = tui(&daemon, "alice", &token_file(&daemon, "alice", "operate"));
    alice.shows("alice (operate)");
    alice.press("2");
    let screen = alice.shows("/deploy");
    assert!(screen.contains("a approve") && screen.contains("d deny"), "{screen}");
    alice.press("a");
    alice.shows(&format!("approved {id}"));
    daemon.await_work(&work, "succeeded");
    assert_eq!(heads.lock().unwrap().len(), 1, "the approved call ran once");
    alice.shows("Approvals (0)");
    alice.press("q");
    wait_until("the TUI to quit", || !alice.is_running());
}
