//! A scripted model server on loopback for the real agent CLIs. It speaks enough of Anthropic's
//! Messages API (Claude Code) and OpenAI's Responses API (Codex) that the agent calls the
//! toolbelt's tools in the script's order, one per model turn, then ends its turn. A result that
//! says the call was parked ends the turn at once, as a well-behaved agent would; a resumed
//! session (which carries its earlier turns) picks the script up where it stopped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// The MCP server name the executors mount the toolbelt under.
const SERVER: &str = "open-conduit";

pub struct ModelServer {
    pub port: u16,
    scripted: Arc<Scripted>,
}

/// One step of the script: the toolbelt tool to call (or, as `=Name`, the CLI's own) and its input.
pub type Step = (&'static str, Value);

/// The script, the model turns seen, and how many of the next turns to hold unanswered.
struct Scripted {
    steps: Vec<Step>,
    seen: Mutex<Vec<Value>>,
    hold: AtomicUsize,
}

impl Scripted {
    /// Records a model turn; `false` when it is to be held (never answered).
    fn record(&self, body: &Value) -> bool {
        self.seen.lock().unwrap().push(body.clone());
        self.hold
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_err()
    }
}

impl ModelServer {
    pub fn start(script: Vec<Step>) -> ModelServer {
        ModelServer::holding(script, 0)
    }

    /// Holds the first `turns` model turns unanswered (the agent hangs on them until it is killed).
    pub fn holding(steps: Vec<Step>, turns: usize) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let scripted = Arc::new(Scripted {
            steps,
            seen: Mutex::new(Vec::new()),
            hold: AtomicUsize::new(turns),
        });
        let shared = scripted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let scripted = shared.clone();
                std::thread::spawn(move || answer(stream, &scripted));
            }
        });
        ModelServer { port, scripted }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bodies of the agent's model turns (requests that offered the toolbelt's tools), in order.
    pub fn turns(&self) -> Vec<Value> {
        self.scripted.seen.lock().unwrap().clone()
    }
}

fn answer(stream: TcpStream, scripted: &Scripted) {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = head
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split('?')
        .next()
        .unwrap_or("");
    let replied = if path.ends_with("/messages") {
        claude_reply(&body, scripted)
    } else if path.ends_with("/responses") {
        codex_reply(&body, scripted).map(|reply| ("text/event-stream", reply))
    } else if path.ends_with("/count_tokens") {
        Some(("application/json", json!({"input_tokens": 42}).to_string()))
    } else {
        Some(("application/json", "{}".to_owned()))
    };
    let Some((kind, reply)) = replied else {
        // Held: wait for the agent to go away.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
        return;
    };
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    );
}

/// What the next turn does, given the tool results so far and whether the last one was parked.
enum Turn {
    Call(&'static str, Value),
    End(&'static str),
}

fn next_turn(results: usize, last_parked: bool, script: &[Step]) -> Turn {
    if last_parked {
        return Turn::End("The call was parked; I stop here and continue when resumed.");
    }
    match script.get(results) {
        Some((tool, input)) => Turn::Call(tool, input.clone()),
        None => Turn::End("Done."),
    }
}

fn is_parked(text: &str) -> bool {
    text.contains("parked by the")
}

fn claude_reply(body: &Value, scripted: &Scripted) -> Option<(&'static str, String)> {
    let prefix = format!("mcp__{SERVER}__");
    let offers = body["tools"].as_array().is_some_and(|tools| {
        tools
            .iter()
            .any(|t| t["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
    });
    let turn = if offers {
        if !scripted.record(body) {
            return None;
        }
        let results: Vec<String> = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|block| block["type"] == "tool_result")
            .map(|block| block["content"].to_string())
            .collect();
        // A resumed session may put its new prompt after the parked result in one message.
        let last_is_result = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_array()?.last().cloned())
            .is_some_and(|block| block["type"] == "tool_result");
        let parked = last_is_result && results.last().is_some_and(|r| is_parked(r));
        next_turn(results.len(), parked, &scripted.steps)
    } else {
        Turn::End("ok")
    };
    let (block, stop) = match turn {
        Turn::Call(tool, input) => (
            json!({"type": "tool_use", "id": format!("toolu_{}", uuid::Uuid::now_v7().simple()),
                "name": claude_tool(&body["tools"], &prefix, tool), "input": input}),
            "tool_use",
        ),
        Turn::End(text) => (json!({"type": "text", "text": text}), "end_turn"),
    };
    let usage =
        json!({"input_tokens": 11, "output_tokens": 7, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let message = json!({"id": "msg_scripted", "type": "message", "role": "assistant", "model": body["model"],
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage});
    if body["stream"] != true {
        let mut whole = message;
        whole["content"] = json!([block]);
        whole["stop_reason"] = json!(stop);
        return Some(("application/json", whole.to_string()));
    }
    let (start, delta) = match block["type"].as_str() {
        Some("tool_use") => (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        ),
        _ => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        ),
    };
    let events = [
        ("message_start", json!({"type": "message_start", "message": message})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 7}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    Some(("text/event-stream", sse(&events)))
}

fn codex_reply(body: &Value, scripted: &Scripted) -> Option<String> {
    let namespace = format!("mcp__{}", SERVER.replace('-', "_"));
    let offers = body["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == namespace));
    let turn = if offers {
        if !scripted.record(body) {
            return None;
        }
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let results: Vec<String> = input
            .iter()
            .filter(|item| item["type"] == "function_call_output")
            .map(|item| item["output"].to_string())
            .collect();
        let last_is_result = input.last().is_some_and(|item| item["type"] == "function_call_output");
        let parked = last_is_result && results.last().is_some_and(|r| is_parked(r));
        next_turn(results.len(), parked, &scripted.steps)
    } else {
        Turn::End("ok")
    };
    let id = uuid::Uuid::now_v7().simple().to_string();
    let item = match turn {
        Turn::Call(tool, input) => {
            let tools = body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["name"] == namespace);
            let name = offered_name(&tools.map_or(Value::Null, |t| t["tools"].clone()), tool);
            json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": format!("call_{id}"),
                "namespace": namespace, "name": name, "arguments": input.to_string()})
        }
        Turn::End(text) => json!({"type": "message", "role": "assistant", "id": format!("msg_{id}"),
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
    };
    let usage = json!({"input_tokens": 13, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 18});
    let events = [
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": format!("resp_{id}"), "status": "in_progress"}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": format!("resp_{id}"), "status": "completed", "usage": usage}}),
        ),
    ];
    Some(sse(&events))
}

/// The toolbelt tool `tool`, or, written `=Name`, the CLI's own tool `Name` (such as `Bash`).
fn claude_tool(tools: &Value, prefix: &str, tool: &str) -> String {
    match tool.strip_prefix('=') {
        Some(own) => own.to_owned(),
        None => offered_name(tools, &format!("{prefix}{tool}")),
    }
}

/// The name under which `tools` offers `wanted` (a CLI may spell `.` and `-` as `_`).
fn offered_name(tools: &Value, wanted: &str) -> String {
    let plain = |name: &str| name.replace(['.', '-'], "_");
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .find(|name| plain(name) == plain(wanted))
        .unwrap_or(wanted)
        .to_owned()
}

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

/// Where `.ci/run` installs the pinned agent CLIs (`.ci/agent-clis/package.json`): `claude` and
/// `codex` found there, or `None` (and the test says how to install them). With
/// `OPEN_CONDUIT_REQUIRE_AGENT_CLIS` set (CI sets it) a missing CLI fails the test instead.
pub fn agent_cli(name: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/agent-clis/node_modules");
    let path = match name {
        "codex" => root.join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"),
        _ => root.join(".bin").join(name),
    };
    if path.exists() {
        return Some(path.canonicalize().unwrap());
    }
    let install = "mkdir -p target/agent-clis && cp .ci/agent-clis/package*.json target/agent-clis/ && npm ci --prefix target/agent-clis";
    assert!(
        std::env::var_os("OPEN_CONDUIT_REQUIRE_AGENT_CLIS").is_none(),
        "`{name}` is not installed; run `{install}`"
    );
    eprintln!("skipped: `{name}` is not installed; run `{install}`");
    None
}
