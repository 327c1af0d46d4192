//! What confinement adds to starting a process (`cargo bench -p conduit-sandbox --bench spawn`;
//! `BENCH_SPAWNS`, default 300 each), in one run: a plain spawn of `/bin/sh -c 'cat /etc/hostname'`
//! (the floor: std spawns it without a fork of the caller), the same with an empty pre-exec hook
//! (which makes std fork), the ruleset's preparation alone (built whole, from kept cuts, and from a
//! base made ahead as the daemon does), and the confined spawn whole.

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use conduit_core::sandbox::Sandbox;
use conduit_sandbox::{kernel, Confinement, Policy, Rulesets};

#[path = "../tests/common/mod.rs"]
mod common;

fn main() {
    let spawns: usize = std::env::var("BENCH_SPAWNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let layout = common::layout();
    let paths = &layout.paths;
    let policy = Policy::for_execution(&Sandbox::default(), paths).unwrap();
    let kernel = kernel::probe();
    let kept = Rulesets::new();
    let prepare = |rulesets: &Rulesets| Confinement::prepare(&policy, &kernel, rulesets).unwrap();
    // The layout was just made: let its directories settle so their listing is kept.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let spawn = |confinement: Option<Confinement>, hook: bool| {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.args(["-c", "cat /etc/hostname"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if hook {
            // SAFETY: an empty hook.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(|| Ok(()));
            }
        }
        runtime.block_on(async {
            let mut child = match confinement {
                Some(c) => c.spawn(&mut cmd).unwrap(),
                None => cmd.spawn().unwrap(),
            };
            child.wait().await.unwrap()
        });
    };
    let rows = [
        ("plain spawn (floor)", time(spawns, || spawn(None, false))),
        ("spawn with an empty pre-exec hook", time(spawns, || spawn(None, true))),
        (
            "ruleset preparation, built whole",
            time(spawns, || drop(prepare(&Rulesets::new()))),
        ),
        ("ruleset preparation, cuts kept", time(spawns, || drop(prepare(&kept)))),
        ("ruleset preparation, base made ahead", {
            timed(spawns, || {
                kept.make_ready(&policy);
                let start = Instant::now();
                drop(prepare(&kept));
                start.elapsed()
            })
        }),
        (
            "confined spawn (base made ahead)",
            timed(spawns, || {
                kept.make_ready(&policy);
                let start = Instant::now();
                spawn(Some(prepare(&kept)), false);
                start.elapsed()
            }),
        ),
    ];
    let floor = rows[0].1;
    println!("{:<40} {:>10} {:>8}", "case", "p50", "ratio");
    for (name, p50) in rows {
        println!(
            "{name:<40} {:>8.0}µs {:>7.2}x",
            p50.as_secs_f64() * 1e6,
            p50.as_secs_f64() / floor.as_secs_f64()
        );
    }
}

fn time(n: usize, mut f: impl FnMut()) -> Duration {
    timed(n, || {
        let start = Instant::now();
        f();
        start.elapsed()
    })
}

/// The median of what `f` measures itself (leaving out work it does first, off the start's path).
fn timed(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut samples: Vec<Duration> = (0..n).map(|_| f()).collect();
    samples.sort();
    samples[n / 2]
}
