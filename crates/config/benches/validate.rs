//! Validation of a 1 MiB configuration beside plain `serde_json` parsing of the same bytes, in one
//! run: the floor is what any JSON reader pays; the ratio is what strictness and validation add.
//!
//! `cargo bench -p conduit-config --bench validate` (`BENCH_RUNS` sets the number of runs).

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A valid configuration of about `target` bytes: many scopes, each with bindings and routes.
fn configuration(target: usize) -> Vec<u8> {
    let mut scopes = serde_json::Map::new();
    let mut i = 0;
    loop {
        let scope = json!({
            "authorization": {"operations": ["@core.worker", "!create_work"]},
            "bindings": {
                "agent": {"executor": "shell", "config": {"command": ["/bin/sh", "-c", format!("os emit demo.n{i} && os outcome succeeded")], "timeout": "10m"}, "operations": ["emit", "read_context"], "emits": ["demo.*"]},
                "reader": {"executor": "shell", "config": {"command": ["/bin/sh", "-c", "os context"]}, "operations": ["read_context"]}
            },
            "routes": [{"on": format!("demo.requested{i}"), "binding": "agent"}, {"on": "demo.*", "binding": "reader"}]
        });
        scopes.insert(format!("scope-{i}"), scope);
        i += 1;
        let doc = json!({"version": 1, "scopes": scopes, "limits": {"causal_max_depth": 32, "causal_per_minute": 600}});
        let bytes = serde_json::to_vec_pretty(&doc).expect("serializes");
        if bytes.len() >= target || i > 100_000 {
            return bytes;
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn measure(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm up
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let runs = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    let bytes = configuration(1024 * 1024 - 4096);
    assert!(
        conduit_config::parse(&bytes).is_ok(),
        "the generated configuration validates"
    );
    let floor = measure(runs, || {
        black_box(serde_json::from_slice::<Value>(black_box(&bytes)).expect("json"));
    });
    let ours = measure(runs, || {
        black_box(conduit_config::parse(black_box(&bytes)).is_ok());
    });
    println!("configuration: {} bytes, {runs} runs, medians", bytes.len());
    println!("{:<34}{:>12}{:>10}", "case", "median(ms)", "ratio");
    let row = |name: &str, d: Duration| {
        println!(
            "{name:<34}{:>12.2}{:>10.2}",
            d.as_secs_f64() * 1e3,
            d.as_secs_f64() / floor.as_secs_f64()
        );
    };
    row("serde_json::from_slice (floor)", floor);
    row("conduit_config::parse", ours);
}
