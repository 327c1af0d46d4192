//! Slack Events API requests as events: the signing rule, the replay window, and the key scheme.
//! Pure: no I/O, no clock (the caller passes the time).
//!
//! A thread's key is `slack:<team>/<channel>/<thread_ts>`, where a top-level message is its own
//! thread (`thread_ts` = its `ts`). An `app_mention` becomes `slack.app_mention` (a route on it
//! starts a Work that owns the thread's key); a later message in that thread becomes
//! `slack.message` on the same key, which wakes the Work's waits.

use conduit_core::{EventSample, Source};
use serde_json::{json, Value};

use crate::extensions::signature::hmac_hex_matches;

pub const SOURCE: &str = "slack";
pub const MENTION: &str = "slack.app_mention";
pub const MESSAGE: &str = "slack.message";

/// How far a request's timestamp may lie from now: Slack's own advice, five minutes.
pub const WINDOW_SECONDS: i64 = 300;

pub fn thread_key(team: &str, channel: &str, thread_ts: &str) -> String {
    format!("slack:{team}/{channel}/{thread_ts}")
}

/// Whether `signature` (`X-Slack-Signature`) is `v0=<hex>` of HMAC-SHA256 over
/// `v0:<timestamp>:<body>` under the signing secret.
pub fn signature_valid(secret: &[u8], timestamp: &str, body: &[u8], signature: Option<&str>) -> bool {
    signature
        .and_then(|s| s.strip_prefix("v0="))
        .is_some_and(|hex| hmac_hex_matches(secret, &[b"v0:", timestamp.as_bytes(), b":", body], hex))
}

/// Whether `timestamp` (`X-Slack-Request-Timestamp`, Unix seconds) is within the window of `now`:
/// an old request replayed is refused even with a good signature.
pub fn fresh(timestamp: &str, now_unix: i64) -> bool {
    timestamp
        .parse::<i64>()
        .is_ok_and(|at| (now_unix - at).abs() <= WINDOW_SECONDS)
}

/// One event a request becomes, and the identity that makes Slack's retry a no-op.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub event_type: &'static str,
    pub key: String,
    pub data: Value,
    pub event_id: String,
}

/// What a verified request says: answer Slack's URL check, or these events (none for what the
/// host does not act on).
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Challenge(String),
    Events(Vec<Incoming>),
}

pub fn read(payload: &Value) -> Option<Request> {
    match payload["type"].as_str()? {
        "url_verification" => Some(Request::Challenge(payload["challenge"].as_str()?.to_owned())),
        "event_callback" => Some(Request::Events(callback(payload).into_iter().collect())),
        _ => Some(Request::Events(Vec::new())),
    }
}

/// What a route on Slack's events can be traced with (`route --samples`): a mention, and a reply
/// in its thread, as the events they become.
pub fn samples() -> Vec<EventSample> {
    let mention = json!({"type": "app_mention", "channel": "C0123", "user": "U0456",
                         "text": "<@U0BOT> can you look at the build?", "ts": "1700000000.000100"});
    let reply = json!({"type": "message", "channel": "C0123", "user": "U0456", "text": "it failed again",
                       "ts": "1700000100.000200", "thread_ts": "1700000000.000100"});
    [mention, reply]
        .into_iter()
        .filter_map(|event| callback(&json!({"team_id": "T0789", "event_id": "Ev0", "event": event})))
        .map(|incoming| EventSample {
            name: incoming.event_type.to_owned(),
            event_type: incoming.event_type.to_owned(),
            source: Source::Ingress(SOURCE.to_owned()),
            correlation_key: Some(incoming.key),
            data: incoming.data,
        })
        .collect()
}

fn callback(payload: &Value) -> Option<Incoming> {
    let event = &payload["event"];
    let event_type = match event["type"].as_str()? {
        "app_mention" => MENTION,
        // A reply in a thread; bots' own messages (the host's replies) wake nothing.
        "message" if event.get("thread_ts").is_some() && event.get("bot_id").is_none() => MESSAGE,
        _ => return None,
    };
    let team = payload["team_id"].as_str()?;
    let channel = event["channel"].as_str()?;
    let ts = event["ts"].as_str()?;
    let thread_ts = event["thread_ts"].as_str().unwrap_or(ts);
    Some(Incoming {
        event_type,
        key: thread_key(team, channel, thread_ts),
        data: json!({"team": team, "channel": channel, "user": event["user"], "text": event["text"],
                     "ts": ts, "thread_ts": thread_ts}),
        event_id: payload["event_id"].as_str()?.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extensions::signature::sign_hex;

    #[test]
    fn the_signature_covers_the_version_the_timestamp_and_the_body() {
        let body = b"{\"type\":\"event_callback\"}";
        let good = format!("v0={}", sign_hex(b"sign", &[b"v0:", b"1700000000", b":", body]));
        assert!(signature_valid(b"sign", "1700000000", body, Some(&good)));
        for (secret, ts, header) in [
            (&b"other"[..], "1700000000", Some(good.as_str())),
            (b"sign", "1700000001", Some(good.as_str())),
            (b"sign", "1700000000", Some(good.trim_start_matches("v0="))),
            (b"sign", "1700000000", None),
        ] {
            assert!(!signature_valid(secret, ts, body, header), "{ts} {header:?}");
        }
    }

    #[test]
    fn the_window_is_five_minutes_either_way() {
        let now = 1_700_000_000;
        for (ts, ok) in [
            ("1700000000", true),
            ("1699999700", true),
            ("1699999699", false),
            ("1700000301", false),
            ("x", false),
        ] {
            assert_eq!(fresh(ts, now), ok, "{ts}");
        }
    }

    #[test]
    fn a_mention_and_its_thread_share_the_threads_key() {
        let mention = json!({"type": "event_callback", "team_id": "T1", "event_id": "Ev1",
            "event": {"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@B> help", "ts": "10.1"}});
        let Some(Request::Events(events)) = read(&mention) else {
            panic!("events")
        };
        assert_eq!(
            (events[0].event_type, events[0].key.as_str()),
            (MENTION, "slack:T1/C1/10.1")
        );
        let reply = json!({"type": "event_callback", "team_id": "T1", "event_id": "Ev2",
            "event": {"type": "message", "channel": "C1", "user": "U2", "text": "more", "ts": "11.0", "thread_ts": "10.1"}});
        let Some(Request::Events(events)) = read(&reply) else {
            panic!("events")
        };
        assert_eq!(
            (events[0].event_type, events[0].key.as_str()),
            (MESSAGE, "slack:T1/C1/10.1")
        );
        let own = json!({"type": "event_callback", "team_id": "T1", "event_id": "Ev3",
            "event": {"type": "message", "channel": "C1", "bot_id": "B", "ts": "12.0", "thread_ts": "10.1"}});
        assert_eq!(
            read(&own),
            Some(Request::Events(vec![])),
            "the host's own replies wake nothing"
        );
        let check = json!({"type": "url_verification", "challenge": "c-1"});
        assert_eq!(read(&check), Some(Request::Challenge("c-1".into())));
    }
}
