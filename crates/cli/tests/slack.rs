//! The `slack` extension against a fake Slack Web API on loopback (through the egress guard's test
//! allowance only), and its Events ingress: a signed mention starts a Work on its thread's key; a
//! bad signature or an old timestamp is refused `401` and changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::calls::{script_of, Answers};
use common::slack::{FakeSlack, BOT_TOKEN};
use common::*;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

const SIGNING_SECRET: &str = "slack-signing-8b2e";

/// A daemon listening on loopback too, whose `demo` scope grants `@slack.responder` to a shell
/// binding running `script`, routes `slack.app_mention` to it, and reaches Slack at `slack`.
fn daemon(slack: &FakeSlack, script: impl FnOnce(&str) -> String) -> (Daemon, u16) {
    let env = [("SLACK_BOT", BOT_TOKEN), ("SLACK_SIGNING", SIGNING_SECRET)];
    let api_url = slack.url();
    daemon_beside(slack.port, &env, |scratch| {
        let operations = json!(["read_context", "declare_outcome", "emit", "@slack.responder"]);
        let mut config = granting(&script(&scratch.display().to_string()), operations);
        config["scopes"]["demo"]["routes"] = json!([{"on": "slack.app_mention", "binding": "shell"}]);
        config["secrets"] = json!({"slack_bot": "env:SLACK_BOT", "slack_signing": "env:SLACK_SIGNING"});
        config["extensions"] = json!({"slack": {"api_url": api_url, "token": "slack_bot",
            "signing_secret": "slack_signing", "scope": "demo"}});
        config.to_string()
    })
}

#[test]
fn slack_operations_round_trip_from_a_real_execution() {
    let slack = FakeSlack::start();
    let calls = [
        ("context", "slack.context", json!({"channel": "C1"})),
        ("thread", "slack.thread", json!({"channel": "C1", "thread_ts": "10.1"})),
        (
            "reply",
            "slack.reply",
            json!({"channel": "C1", "thread_ts": "10.1", "text": "On it."}),
        ),
        ("unknown", "slack.context", json!({"channel": "C9"})),
    ];
    let (daemon, _) = daemon(&slack, |d| script_of(d, &calls));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let answers = Answers(daemon.scratch().to_owned());
    let context = answers.output("context");
    assert_eq!(
        (
            context["channel"]["name"].clone(),
            context["messages"][0]["text"].clone()
        ),
        (json!("help"), json!("hi"))
    );
    assert_eq!(answers.output("thread")["messages"][1]["text"], "me too");
    assert_eq!(answers.output("reply")["ts"], "10.3");
    assert_eq!(answers.refused("unknown"), "slack_channel_not_found");

    let seen = slack.seen.lock().unwrap().clone();
    assert!(seen
        .iter()
        .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {BOT_TOKEN}")[..])));
    let posted = seen.iter().find(|r| r.path == "/api/chat.postMessage").unwrap();
    assert_eq!(
        posted.body,
        json!({"channel": "C1", "thread_ts": "10.1", "text": "On it."})
    );
    let bytes = store_files(&state_beside(daemon.scratch()));
    assert!(
        contains(&bytes, "slack.reply"),
        "control: the scan reads the store's records"
    );
    assert!(!contains(&bytes, BOT_TOKEN));
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn signature(timestamp: &str, body: &str, secret: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("v0={hex}")
}

/// A raw POST of an Events API request to the loopback listener: the status and the JSON answer.
fn post(port: u16, body: &str, timestamp: &str, signature: &str) -> (u16, Value) {
    let headers = [
        ("X-Slack-Request-Timestamp", timestamp),
        ("X-Slack-Signature", signature),
    ];
    tcp_post(port, "/v1/ingress/slack", &headers, body)
}

#[test]
fn a_signed_mention_starts_a_work_on_its_threads_key_and_a_replayed_one_is_refused() {
    let slack = FakeSlack::start();
    let (daemon, port) = daemon(&slack, |d| {
        format!("os context > {d}/context.json; os outcome succeeded")
    });
    let now = unix_now().to_string();

    let check = json!({"type": "url_verification", "challenge": "ch-42"}).to_string();
    let (status, answer) = post(port, &check, &now, &signature(&now, &check, SIGNING_SECRET));
    assert_eq!((status, answer), (200, json!({"challenge": "ch-42"})));

    let mention = json!({"type": "event_callback", "team_id": "T1", "event_id": "Ev1",
        "event": {"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@B> help", "ts": "10.1"}})
    .to_string();
    let old = (unix_now() - 600).to_string();
    for (timestamp, signed, why) in [
        (
            now.clone(),
            signature(&now, &mention, "another-secret"),
            "signed with another secret",
        ),
        (
            now.clone(),
            signature(&old, &mention, SIGNING_SECRET),
            "signed for another timestamp",
        ),
        (
            old.clone(),
            signature(&old, &mention, SIGNING_SECRET),
            "an old request replayed",
        ),
    ] {
        let (status, answer) = post(port, &mention, &timestamp, &signed);
        assert_eq!(
            (status, answer["error"].as_str()),
            (401, Some("unauthenticated")),
            "{why}"
        );
    }
    let listed = daemon.json(&["work", "list"]);
    assert_eq!(
        listed["items"].as_array().unwrap().len(),
        0,
        "a refused request changes nothing"
    );

    let (status, accepted) = post(port, &mention, &now, &signature(&now, &mention, SIGNING_SECRET));
    assert_eq!(status, 200, "{accepted}");
    let (_, again) = post(port, &mention, &now, &signature(&now, &mention, SIGNING_SECRET));
    assert_eq!(
        again["accepted"], accepted["accepted"],
        "Slack's retry is the same event"
    );
    let items = daemon.json(&["work", "list"])["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "one Work for the mention");
    assert!(
        items[0]["keys"]
            .as_array()
            .unwrap()
            .contains(&json!("slack:T1/C1/10.1")),
        "{}",
        items[0]
    );
    let work = items[0]["id"].as_str().unwrap().to_owned();
    daemon.await_work(&work, "succeeded");
    let context: Value =
        serde_json::from_str(&std::fs::read_to_string(daemon.scratch().join("context.json")).unwrap()).unwrap();
    assert_eq!(context["work"]["input"]["text"], "<@B> help", "{context}");
    let mention = context["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "slack.app_mention");
    assert_eq!(mention.map(|e| e["source"].clone()), Some(json!("slack")), "{context}");
}
