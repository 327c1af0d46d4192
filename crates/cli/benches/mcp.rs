//! `os mcp` `tools/call` round trip beside its floors, in one run against a real daemon and a held
//! execution (`cargo bench -p conduit-cli --bench mcp`; `BENCH_CALLS` sets the count, default 300).
//!
//! - `floor echo`: the public client (a fresh Unix-socket connection per request, as `os mcp`
//!   makes) against a bare HTTP echo that answers `{}`;
//! - `toolbelt call`: the same client calling `read_context` on the execution's toolbelt socket;
//! - `os mcp tools/call`: an MCP client (rmcp) calling `read_context` through `os mcp` over stdio.

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use conduit_client::Client;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

fn main() {
    let calls = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let echo = tmp.path().join("echo.sock");
    serve_echo(&echo);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rows = runtime.block_on(async {
        let token = read_token(&token_file);
        let floor = Client::new(&echo, "t");
        let toolbelt = Client::new(&socket, token);
        let mcp = mount(&socket, &token_file).await;
        let read_context = || CallToolRequestParams::new("read_context").with_arguments(Default::default());
        vec![
            (
                "floor echo",
                time(calls, || async {
                    floor.get("/").await.unwrap();
                })
                .await,
            ),
            (
                "toolbelt call",
                time(calls, || async {
                    toolbelt
                        .post("/v1/toolbelt/call", &json!({"operation": "read_context", "input": {}}))
                        .await
                        .unwrap();
                })
                .await,
            ),
            (
                "os mcp tools/call",
                time(calls, || async {
                    let result = mcp.call_tool(read_context()).await.unwrap();
                    assert_eq!(result.is_error, Some(false));
                })
                .await,
            ),
        ]
    });
    let floor = rows[0].1[rows[0].1.len() / 2];
    println!("{calls} calls each, p50 / p90 (µs), ratio of p50 to the floor's");
    for (name, samples) in &rows {
        let (p50, p90) = (samples[samples.len() / 2], samples[samples.len() * 9 / 10]);
        println!(
            "{name:<20} {:>9.1} {:>9.1} {:>7.1}x",
            micros(p50),
            micros(p90),
            micros(p50) / micros(floor)
        );
    }
}

async fn mount(socket: &Path, token_file: &Path) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_os"));
    cmd.arg("mcp")
        .env("OS_ENDPOINT", socket)
        .env("OS_TOKEN_FILE", token_file);
    ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
}

/// Sorted durations of `n` sequential runs of `f`, after a short warm-up.
async fn time<F: std::future::Future<Output = ()>>(n: usize, f: impl Fn() -> F) -> Vec<Duration> {
    for _ in 0..20 {
        f().await;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f().await;
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A bare HTTP/1.1 server on a Unix socket: reads a request head, answers `{}`, closes.
fn serve_echo(path: &Path) {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
        }
    });
}
