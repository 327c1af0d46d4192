//! The allocator's free pages go back to the kernel once after a burst: measured in this process's
//! own resident set. One test in its binary, since the resident set is the whole process's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_allocator::{held_free, GiveBack};

const CHUNK: usize = 32 * 1024;
const CHUNKS: usize = 1536;
const MIB: usize = 1 << 20;

/// Anonymous resident KiB of this process.
fn anonymous_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// 48 MiB in chunks below the allocator's mmap threshold, written so they are resident, then all
/// freed but the last (which keeps the freed ones from being trimmed off the arena's top).
fn allocate_and_free_all_but_the_last() -> Vec<u8> {
    let mut chunks: Vec<Vec<u8>> = (0..CHUNKS).map(|i| vec![i as u8 | 1; CHUNK]).collect();
    let last = chunks.pop().unwrap();
    drop(std::hint::black_box(chunks));
    last
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn what_a_burst_freed_goes_back_to_the_kernel_once() {
    let before = anonymous_kib();
    let last = allocate_and_free_all_but_the_last();
    let held = anonymous_kib();
    // The controls: freeing alone gave nothing back, nor does a look under the threshold.
    assert!(
        held > before + 40 * 1024,
        "the freed chunks stayed resident: {before} -> {held} KiB"
    );
    assert!(held_free() >= 40 * MIB);
    assert_eq!(GiveBack::new(held_free() + 64 * MIB).look(), None);
    assert!(
        anonymous_kib() + 8 * 1024 > held,
        "nothing was given back under the threshold"
    );

    let mut give_back = GiveBack::new(16 * MIB);
    let free = give_back.look().expect("over the threshold");
    assert!(free >= 40 * MIB, "it held {free} bytes free");
    let after = anonymous_kib();
    assert!(after + 32 * 1024 < held, "given back: {held} -> {after} KiB");
    // What was given back still counts as free: the next look does not walk the arenas again.
    assert!(held_free() >= 40 * MIB);
    assert_eq!(give_back.look(), None, "given back once");
    drop(last);
}
