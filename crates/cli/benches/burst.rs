//! The daemon's memory through a burst, and a toolbelt call's latency beside a connection flood, in
//! one run against a real daemon (`cargo bench -p conduit-cli --bench burst`).
//!
//! Memory: the daemon's resident set with no execution; idle with 8 live (held) executions 2 s and
//! 13 s after they started (the difference, per execution, is what a live execution costs; the
//! second is past the keep-alive of the blocking threads their starts woke); with 8 more, 13 s
//! after they started (what one more costs once the first have paid for what every start uses
//! once); right after `BENCH_BURST` (default 2,000) concurrent `read_context` calls spread over the
//! first 8 executions' sockets, and `BENCH_SETTLE` seconds (default 60) later; twice, so a leak
//! shows as growth from the first burst to the second. Latency: `read_context` p50/p99 on one
//! execution, alone and while a helper process holds 20,000 idle connections (two helper processes
//! of 10,000) on another execution's socket.

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::holder::Holder;
use common::*;
use serde_json::json;

const SOCKETS: usize = 8;

fn main() {
    let setting = |name: &str, default: u64| std::env::var(name).ok().and_then(|n| n.parse().ok()).unwrap_or(default);
    let (burst, settle) = (setting("BENCH_BURST", 2_000) as usize, setting("BENCH_SETTLE", 60));
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    std::thread::sleep(Duration::from_secs(2));
    let empty = memory(daemon.pid());
    let held: Vec<(PathBuf, String)> = (0..SOCKETS)
        .map(|_| {
            let (_, socket, token_file) = hold_one(&daemon, tmp.path());
            (socket, read_token(&token_file))
        })
        .collect();
    let pid = daemon.pid();
    std::thread::sleep(Duration::from_secs(2));
    let idle = memory(pid);
    // Past the keep-alive of the blocking threads the starts woke (the daemon's 2 s): what stays.
    std::thread::sleep(Duration::from_secs(11));
    let kept = memory(pid);
    // What one more costs once the first ones have paid for what every start uses once (the code
    // pages a start runs first, the store's page cache, the blocking threads' arenas).
    let _more: Vec<_> = (0..SOCKETS).map(|_| hold_one(&daemon, tmp.path())).collect();
    std::thread::sleep(Duration::from_secs(13));
    let doubled = memory(pid);
    let per_execution = |of: fn(&Memory) -> u64, m: &Memory| of(m).saturating_sub(of(&empty)) as f64 / SOCKETS as f64;
    let per_more = |of: fn(&Memory) -> u64| of(&doubled).saturating_sub(of(&kept)) as f64 / SOCKETS as f64;

    let first = burst_and_settle(pid, &held, burst, settle);
    let second = burst_and_settle(pid, &held, burst, settle);
    println!("memory through bursts of {burst} concurrent read_context calls over {SOCKETS} sockets");
    println!(
        "  RSS, no execution         {:>7.1} MiB, {} threads",
        mib(empty.rss),
        empty.threads
    );
    for (when, m) in [("2 s after they started", &idle), ("13 s after", &kept)] {
        println!(
            "  RSS idle, {SOCKETS} executions    {:>7.1} MiB ({:.0} KiB per live execution, {:.0} KiB of it \
             anonymous, the rest file pages: code their start first ran, the WAL index), {} threads, {when}",
            mib(m.rss),
            per_execution(|m| m.rss, m),
            per_execution(|m| m.anon, m),
            m.threads
        );
    }
    println!(
        "  RSS idle, {} executions   {:>7.1} MiB ({:.0} KiB per execution past the first {SOCKETS}, {:.0} KiB of it \
         anonymous), {} threads, 13 s after the next {SOCKETS} started",
        2 * SOCKETS,
        mib(doubled.rss),
        per_more(|m| m.rss),
        per_more(|m| m.anon),
        doubled.threads
    );
    let idle = idle.rss;
    for (n, b) in [first, second].iter().enumerate() {
        println!(
            "  burst {} over the first {SOCKETS} of {} held ({:.1?}, {} retried at a cap)",
            n + 1,
            2 * SOCKETS,
            b.took,
            b.retries
        );
        for (when, &Memory { rss, threads, .. }) in [("right after", &b.after), ("after settling", &b.settled)] {
            println!(
                "    {when:<15} RSS {:>7.1} MiB ({:.2}x idle), {threads} threads",
                mib(rss),
                rss as f64 / idle as f64
            );
        }
    }

    let (socket, token) = &held[0];
    let quiet = latencies(socket, token, 1_000);
    let flood = [
        Holder::start(&held[1].0, 10_000, false),
        Holder::start(&held[1].0, 10_000, false),
    ];
    let flooded = latencies(socket, token, 1_000);
    drop(flood);
    println!("read_context on one execution, 1,000 calls one after another");
    println!(
        "  alone                                  p50 {:>7.2?}  p99 {:>7.2?}",
        quiet.0, quiet.1
    );
    println!(
        "  20,000 idle connections on another     p50 {:>7.2?}  p99 {:>7.2?}",
        flooded.0, flooded.1
    );
    println!(
        "  ratio                                  p50 {:.2}x   p99 {:.2}x",
        flooded.0.as_secs_f64() / quiet.0.as_secs_f64(),
        flooded.1.as_secs_f64() / quiet.1.as_secs_f64()
    );
    std::fs::write(tmp.path().join("release"), "").unwrap();
}

/// What one burst did to the daemon: its RSS (KiB) and threads right after and once settled.
struct Burst {
    took: Duration,
    retries: usize,
    after: Memory,
    settled: Memory,
}

fn burst_and_settle(pid: u32, held: &[(PathBuf, String)], count: usize, settle: u64) -> Burst {
    let started = Instant::now();
    let retries = concurrent_calls(held, count);
    let took = started.elapsed();
    let after = memory(pid);
    eprintln!("settling for {settle} s ...");
    std::thread::sleep(Duration::from_secs(settle));
    let settled = memory(pid);
    Burst {
        took,
        retries,
        after,
        settled,
    }
}

/// `count` calls at once, each on a thread of its own spread over the sockets; a connection a
/// socket closed at its cap is tried again. Answers how many were tried again.
fn concurrent_calls(held: &[(PathBuf, String)], count: usize) -> usize {
    let gate = std::sync::Arc::new(std::sync::Barrier::new(count));
    let threads: Vec<_> = (0..count)
        .map(|i| {
            let (socket, token) = held[i % held.len()].clone();
            let gate = gate.clone();
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    gate.wait();
                    let mut retries = 0;
                    while call(&socket, &token) != Some(200) {
                        retries += 1;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    retries
                })
                .unwrap()
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

/// One `read_context` call; its status, or `None` when the socket closed the connection.
fn call(socket: &Path, token: &str) -> Option<u16> {
    let body = json!({"operation": "read_context", "input": {}}).to_string();
    let request = format!(
        "POST /v1/toolbelt/call HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split(' ').nth(1)?.parse().ok()
}

/// p50 and p99 of `n` calls one after another.
fn latencies(socket: &Path, token: &str, n: usize) -> (Duration, Duration) {
    let mut took: Vec<Duration> = (0..n)
        .map(|_| {
            let started = Instant::now();
            assert_eq!(call(socket, token), Some(200));
            started.elapsed()
        })
        .collect();
    took.sort();
    (took[n / 2], took[n * 99 / 100])
}

/// The daemon's resident set and its anonymous part (KiB), and its thread count.
struct Memory {
    rss: u64,
    anon: u64,
    threads: u64,
}

fn memory(pid: u32) -> Memory {
    Memory {
        rss: status_field(pid, "VmRSS:"),
        anon: status_field(pid, "RssAnon:"),
        threads: status_field(pid, "Threads:"),
    }
}

/// A number of `/proc/<pid>/status`: the first word after `field`.
fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
