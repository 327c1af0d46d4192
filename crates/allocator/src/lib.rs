//! What the daemon asks of the C allocator (glibc's malloc, which Rust's and SQLite's allocations
//! both go through).
//!
//! glibc gives a thread an arena of its own on its first allocation, until it has eight per core,
//! and keeps what is freed inside each arena for reuse. A burst of calls wakes dozens of blocking
//! threads; measured (`cargo bench -p conduit-cli --bench burst`), the daemon then stayed at
//! 38–41 MiB for good (19 MiB idle), in 17 arenas. So the daemon limits the arenas to one per core
//! ([`limit_arenas`]) and, after a burst, gives the free pages back ([`GiveBack`]).
//!
//! Elsewhere (musl, other systems) each function does nothing: those allocators keep no arenas
//! per thread.

#![deny(unsafe_code)]

/// Lets the allocator create at most `arenas` arenas (at least one), unless the operator set glibc's
/// own limit (`MALLOC_ARENA_MAX`, or `arena_max` in `GLIBC_TUNABLES`). Call it first, before other
/// threads start: glibc settles the limit when it next needs a new arena.
pub fn limit_arenas(arenas: usize) {
    let operator_set = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if !operator_set {
        glibc::set_arena_max(i32::try_from(arenas).unwrap_or(i32::MAX).max(1));
    }
}

/// Bytes the allocator holds free: freed, kept for reuse (given back to the kernel or not).
pub fn held_free() -> usize {
    glibc::held_free()
}

/// Gives the allocator's free pages back to the kernel after a burst: when it holds at least
/// `threshold` bytes free and the process's anonymous memory has grown by `threshold` since it
/// last gave back. Giving back leaves the free chunks counted as free, so the free count alone
/// would ask again on every look; and it walks every arena under its lock, stalling threads that
/// allocate meanwhile, so it should happen once after a burst, not on every look.
pub struct GiveBack {
    threshold: usize,
    /// Anonymous resident bytes after the last give-back (lowered when the process shrinks).
    resident_after: usize,
}

impl GiveBack {
    pub fn new(threshold: usize) -> GiveBack {
        GiveBack {
            threshold,
            resident_after: 0,
        }
    }

    /// Gives back when a burst left enough behind; answers the bytes held free when it did.
    pub fn look(&mut self) -> Option<usize> {
        let (free, resident) = (held_free(), anonymous_resident());
        self.resident_after = self.resident_after.min(resident);
        if free < self.threshold || resident < self.resident_after.saturating_add(self.threshold) {
            return None;
        }
        glibc::trim();
        self.resident_after = anonymous_resident();
        Some(free)
    }
}

/// This process's anonymous resident memory in bytes (`RssAnon` in `/proc/self/status`; 0
/// where there is none, so nothing is given back).
fn anonymous_resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok());
    kib.unwrap_or(0).saturating_mul(1024)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code, reason = "glibc's allocator settings have no safe binding")]
mod glibc {
    pub fn set_arena_max(arenas: i32) {
        // SAFETY: mallopt takes two integers and changes only the allocator's own settings.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    }

    pub fn held_free() -> usize {
        // SAFETY: mallinfo2 (glibc 2.33) only reads the allocator's statistics, under each arena's
        // lock.
        unsafe { libc::mallinfo2() }.fordblks
    }

    pub fn trim() {
        // SAFETY: malloc_trim only hands free pages back (madvise); live allocations are untouched.
        unsafe { libc::malloc_trim(0) };
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod glibc {
    pub fn set_arena_max(_: i32) {}

    pub fn held_free() -> usize {
        0
    }

    pub fn trim() {}
}
