//! Attempt start latency under the default sandbox beside `"sandbox": "off"`, in one run against a
//! real daemon (`cargo bench -p conduit-cli --bench attempt_start`; `BENCH_ATTEMPTS`, default 60
//! each). An attempt's start is the time from its claim (the execution's `started_at`) to its first
//! toolbelt call (the first `agent.toolCalled` accepted on its Work), both in the store's
//! millisecond timestamps; the two bindings run the same command, alternately.

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::timing::{mean, median, millis};
use common::*;
use serde_json::{json, Value};

fn main() {
    let attempts: usize = std::env::var("BENCH_ATTEMPTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(60);
    let mut config: Value = serde_json::from_str(&shell_config(
        "os emit bench.go > /dev/null && os outcome succeeded > /dev/null",
    ))
    .unwrap();
    let bindings = &mut config["scopes"]["demo"]["bindings"];
    bindings["confined"] = bindings["shell"].clone();
    bindings["confined"]["sandbox"] = json!({});
    bindings["loose"] = bindings["shell"].clone();
    bindings["loose"]["sandbox"] = json!("off");
    let daemon = Daemon::start(Some(&config.to_string()));
    // The state directory was just made, and a ruleset's cuts are kept only once the directories
    // they list have been still for 2 s: measure the daemon as it runs after that, warmed up.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for binding in ["confined", "loose"] {
        start_latency(&daemon, binding);
    }
    let (mut confined, mut loose) = (Vec::new(), Vec::new());
    for _ in 0..attempts {
        confined.push(start_latency(&daemon, "confined"));
        loose.push(start_latency(&daemon, "loose"));
    }
    let (c, l) = (median(&mut confined), median(&mut loose));
    println!("attempt start, claim to first toolbelt call ({attempts} attempts each)");
    println!("  sandbox off      p50 {l:>6.1} ms  mean {:>6.1} ms", mean(&loose));
    println!("  default sandbox  p50 {c:>6.1} ms  mean {:>6.1} ms", mean(&confined));
    println!(
        "  ratio            p50 {:.2}x  mean {:.2}x",
        c / l.max(0.5),
        mean(&confined) / mean(&loose).max(0.5)
    );
}

/// Runs one Work of `binding` to its end; milliseconds from its claim to its first toolbelt call.
fn start_latency(daemon: &Daemon, binding: &str) -> f64 {
    let work = daemon.create_work("demo", binding);
    daemon.await_work(&work, "succeeded");
    let execution = daemon.json(&["executions", "list", "--work", &work])["items"][0].clone();
    let called = daemon
        .events(&work)
        .into_iter()
        .find(|e| e["type"] == "agent.toolCalled")
        .expect("a toolbelt call");
    millis(&called["accepted_at"]) - millis(&execution["started_at"])
}
