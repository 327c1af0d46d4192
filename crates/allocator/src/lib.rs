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
/// `threshold` bytes free, and since the last give-back either `threshold` more is free or the
/// process's anonymous memory grew by `threshold` (a burst that reused what was given back, then
/// freed it again). Giving back leaves the chunks counted as free, so the free count alone would
/// ask again on every look, or never again; and it walks every arena under its lock, stalling
/// threads that allocate meanwhile, so it should come once after a burst, not on every look.
pub struct GiveBack {
    threshold: usize,
    /// What the last give-back left, each lowered to the least seen since: bytes held free, and
    /// anonymous resident bytes.
    free_after: usize,
    resident_after: usize,
}

impl GiveBack {
    pub fn new(threshold: usize) -> GiveBack {
        GiveBack {
            threshold,
            free_after: 0,
            resident_after: 0,
        }
    }

    /// Gives back when a burst left enough behind; answers the bytes held free when it did.
    pub fn look(&mut self) -> Option<usize> {
        let (free, resident) = (held_free(), anonymous_resident());
        self.free_after = self.free_after.min(free);
        self.resident_after = self.resident_after.min(resident);
        let grew = |now: usize, after: usize| now >= after.saturating_add(self.threshold);
        if free < self.threshold || !(grew(free, self.free_after) || grew(resident, self.resident_after)) {
            return None;
        }
        glibc::trim();
        (self.free_after, self.resident_after) = (free, anonymous_resident());
        Some(free)
    }
}

/// This process's anonymous resident memory in bytes (`RssAnon` in `/proc/self/status`; 0 where
/// there is none).
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
