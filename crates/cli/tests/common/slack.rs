//! A fake Slack Web API on loopback: it checks the bot token, answers `conversations.info`,
//! `conversations.history`, `conversations.replies` and `chat.postMessage` as Slack does
//! (`200` with `"ok": false` and an `error` for a refusal), and keeps every request.

use serde_json::{json, Value};

use super::fake_http::{self, json_answer, Answer, Requests};

pub const BOT_TOKEN: &str = "xoxb-test-3a9c";

pub struct FakeSlack {
    pub port: u16,
    pub seen: Requests,
}

impl FakeSlack {
    pub fn start() -> FakeSlack {
        let (port, seen) = fake_http::start(|request, _| {
            answer(
                &request.method,
                &request.path,
                request.authorization.as_deref(),
                &request.body,
            )
        });
        FakeSlack { port, seen }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/api", self.port)
    }
}

fn ok(mut body: Value) -> Answer {
    body["ok"] = true.into();
    json_answer(200, body)
}

fn answer(method: &str, path: &str, authorization: Option<&str>, body: &Value) -> Answer {
    if authorization != Some(&format!("Bearer {BOT_TOKEN}")) {
        return json_answer(200, json!({"ok": false, "error": "invalid_auth"}));
    }
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let channel_known = query.contains("channel=C1") || body["channel"] == "C1";
    if !channel_known {
        return json_answer(200, json!({"ok": false, "error": "channel_not_found"}));
    }
    match (method, path) {
        ("GET", "/api/conversations.info") => {
            ok(json!({"channel": {"id": "C1", "name": "help", "topic": {"value": "Ask here"}}}))
        }
        ("GET", "/api/conversations.history") => ok(json!({"messages": [{"user": "U1", "text": "hi", "ts": "10.1"}]})),
        ("GET", "/api/conversations.replies") if query.contains("ts=10.1") => ok(json!({"messages": [
            {"user": "U1", "text": "<@B> help", "ts": "10.1", "thread_ts": "10.1"},
            {"user": "U2", "text": "me too", "ts": "10.2", "thread_ts": "10.1"}]})),
        ("POST", "/api/chat.postMessage") => ok(json!({"channel": "C1", "ts": "10.3"})),
        _ => json_answer(404, json!({"ok": false, "error": "unknown_method"})),
    }
}
