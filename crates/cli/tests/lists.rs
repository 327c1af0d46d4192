//! Lists are never cut: every list of the management API pages with a cursor, and the CLI follows
//! the cursors to the last page.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

#[test]
fn the_audit_trail_pages_past_a_thousand_records_and_the_cli_shows_them_all() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let execution = daemon.first_execution(&work);
    let calls = 1_100;
    for _ in 0..calls {
        assert_eq!(toolbelt_call(&socket, &token, "read_context", json!({})).0, 200);
    }
    assert_eq!(toolbelt_call(&socket, &token, "no.such.operation", json!({})).0, 403);

    let (records, pages) = every_page(&daemon, &format!("/v1/audit?execution={execution}"), 500);
    assert_eq!(pages, 3);
    let seen: Vec<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(seen.len(), calls + 1, "every record, each once");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "no record twice");

    let all = daemon.json(&["audit", "--execution", &execution]);
    assert_eq!(
        all["items"].as_array().unwrap().len(),
        calls + 1,
        "the CLI follows every cursor"
    );
    let refused = daemon.json(&["audit", "--execution", &execution, "--result", "forbidden"]);
    let refused: Vec<&Value> = refused["items"].as_array().unwrap().iter().collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["operation"], "no.such.operation");
    let of_work = daemon.json(&["audit", "--work", &work, "--operation", "read_context"]);
    assert_eq!(of_work["items"].as_array().unwrap().len(), calls);

    // RFC 3339 texts of one shape compare as their times do.
    let middle = records[calls / 2]["at"].as_str().unwrap();
    let at_or_after = records.iter().filter(|r| r["at"].as_str().unwrap() >= middle).count();
    let since = daemon.json(&["audit", "--execution", &execution, "--since", middle]);
    assert_eq!(since["items"].as_array().unwrap().len(), at_or_after);
    let until = daemon.json(&["audit", "--execution", &execution, "--until", middle]);
    assert_eq!(until["items"].as_array().unwrap().len(), calls + 1 - at_or_after);
    let (refused, answer) = daemon.json_unchecked(&["audit", "--since", "yesterday"]);
    assert_eq!((refused, answer["error"].as_str()), (Some(1), Some("invalid_request")));

    let first = daemon.json(&["audit", "--execution", &execution, "--limit", "150"]);
    assert_eq!(
        first["items"].as_array().unwrap().len(),
        150,
        "past the first page, then cut"
    );
    assert_eq!(
        (first["more"].clone(), first["items"][149]["id"].clone()),
        (json!(true), records[149]["id"].clone())
    );
    let exactly = daemon.json(&[
        "audit",
        "--execution",
        &execution,
        "--result",
        "forbidden",
        "--limit",
        "1",
    ]);
    assert_eq!(exactly["more"], false, "a list of exactly the limit has no more");
    let human = daemon.cli(&["audit", "--execution", &execution, "--limit", "3"]);
    let told = String::from_utf8_lossy(&human.stderr);
    assert!(told.contains("raise --limit"), "{told}");
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Follows a list's cursors `limit` rows at a time; the items of every page, and how many pages.
fn every_page(daemon: &Daemon, list: &str, limit: usize) -> (Vec<Value>, usize) {
    let owner = daemon.operator_token();
    let separator = if list.contains('?') { '&' } else { '?' };
    let mut path = format!("{list}{separator}limit={limit}");
    let (mut items, mut pages) = (Vec::new(), 0);
    loop {
        let (status, page) = http(&daemon.management_socket(), "GET", &path, Some(&owner), None);
        assert_eq!(status, 200, "{list}: {page}");
        pages += 1;
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("{list}{separator}limit={limit}&cursor={}", encode(cursor)),
            None => return (items, pages),
        }
    }
}

#[test]
fn waits_approvals_and_an_executions_tokens_page_with_cursors() {
    let daemon = Daemon::start(Some(&shell_config("os wait --for demo.go --timeout 10m")));
    let works: Vec<String> = (0..3).map(|_| daemon.create_work("demo", "shell")).collect();
    for work in &works {
        daemon.await_work(work, "waiting");
    }
    let (waits, pages) = every_page(&daemon, "/v1/waits", 1);
    assert_eq!((waits.len(), pages), (3, 4), "one wait a page, then an empty last page");
    let (one, _) = every_page(&daemon, &format!("/v1/waits?work={}", works[0]), 1);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["work_id"], works[0].as_str());

    let execution = daemon.first_execution(&works[0]);
    let (tokens, _) = every_page(&daemon, &format!("/v1/executions/{execution}/tokens"), 1);
    assert!(!tokens.is_empty() && tokens.iter().all(|t| t["id"].is_string() && t.get("digest").is_none()));

    let (approvals, pages) = every_page(&daemon, "/v1/approvals?state=pending", 1);
    assert_eq!((approvals.len(), pages), (0, 1));
    assert_eq!(
        daemon.json(&["waits"])["items"].as_array().unwrap().len(),
        3,
        "the CLI follows"
    );
}

#[test]
fn artifacts_page_with_cursors_each_log_before_its_files() {
    let daemon = Daemon::start(Some(&shell_config(
        "printf a > a.txt && printf bb > b.txt && os outcome succeeded --artifact a.txt --artifact b.txt",
    )));
    let works: Vec<String> = (0..2).map(|_| daemon.create_work("demo", "shell")).collect();
    for work in &works {
        daemon.await_work(work, "succeeded");
    }
    let (artifacts, pages) = every_page(&daemon, "/v1/artifacts", 1);
    assert_eq!(
        (artifacts.len(), pages),
        (6, 7),
        "per execution a log and two files, one a page"
    );
    let (first, _) = every_page(&daemon, "/v1/artifacts", 500);
    assert_eq!(first, artifacts, "the same list whatever the page size");
    let executions: Vec<String> = works.iter().map(|w| daemon.first_execution(w)).collect();
    let mut expected: Vec<String> = executions
        .iter()
        .flat_map(|x| [format!("log:{x}"), format!("file:{x}:0"), format!("file:{x}:1")])
        .collect();
    let listed: Vec<String> = artifacts.iter().map(|a| a["id"].as_str().unwrap().to_owned()).collect();
    // The two attempts may have started in either order.
    if listed[0] != expected[0] {
        expected.rotate_left(3);
    }
    assert_eq!(listed, expected);
    let (one, _) = every_page(&daemon, &format!("/v1/artifacts?execution={}", executions[1]), 2);
    assert_eq!(one.len(), 3);
    assert_eq!(one[2]["size"], 2);
}

#[test]
fn scopes_and_operators_page_with_cursors() {
    let config = json!({"version": 1, "scopes": {"a": {}, "b": {}, "c": {"parent": "a"}}}).to_string();
    let daemon = Daemon::start(Some(&config));
    let (scopes, pages) = every_page(&daemon, "/v1/scopes", 1);
    let ids: Vec<&str> = scopes.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!((ids, pages), (vec!["a", "b", "c"], 4));
    for name in ["ann", "bob"] {
        daemon.json(&["auth", "operators", "add", name]);
    }
    let (operators, _) = every_page(&daemon, "/v1/auth/operators", 1);
    let names: Vec<&str> = operators.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ann", "bob", "local"]);
    assert_eq!(
        daemon.json(&["auth", "operators"])["items"].as_array().unwrap().len(),
        3,
        "the CLI follows"
    );
}
