//! The allocator's free pages go back to the kernel: measured in this process's own resident set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

const CHUNK: usize = 32 * 1024;
const CHUNKS: usize = 1536;

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
fn freed_memory_the_allocator_holds_goes_back_to_the_kernel() {
    let before = anonymous_kib();
    let last = allocate_and_free_all_but_the_last();
    let held = anonymous_kib();
    // The control: freeing alone gave nothing back.
    assert!(
        held > before + 40 * 1024,
        "the freed chunks stayed resident: {before} -> {held} KiB"
    );
    assert!(conduit_allocator::held_free() >= 40 << 20);

    let free = conduit_allocator::give_back_over(16 << 20).expect("over the threshold");
    assert!(free >= 40 << 20, "it held {free} bytes free");
    let after = anonymous_kib();
    assert!(after + 32 * 1024 < held, "given back: {held} -> {after} KiB");
    drop(last);
}

#[test]
fn under_the_threshold_nothing_is_given_back() {
    assert_eq!(conduit_allocator::give_back_over(usize::MAX), None);
}
