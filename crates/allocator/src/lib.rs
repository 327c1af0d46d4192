//! What the daemon asks of the C allocator (glibc's malloc, which Rust's and SQLite's allocations
//! both go through).
//!
//! glibc gives each thread that meets contention an arena of its own, up to eight per core, and
//! keeps what is freed inside each arena for reuse. A burst of calls wakes dozens of blocking
//! threads; measured (`cargo bench -p conduit-cli --bench burst`), the daemon then stayed 20 MiB
//! above its idle size for good, in 17 arenas, most of it free. So the daemon limits the arenas to
//! one per core ([`limit_arenas`]) and, when the allocator holds much free memory, gives the free
//! pages back ([`give_back_over`]).
//!
//! Elsewhere (musl, other systems) each function does nothing: those allocators keep no arenas
//! per thread.

#![deny(unsafe_code)]

/// Lets the allocator create at most `arenas` arenas (at least one). Call it first, before other
/// threads start: threads that already have an arena keep it.
pub fn limit_arenas(arenas: usize) {
    let arenas = arenas.clamp(1, i32::MAX as usize) as i32;
    glibc::set_arena_max(arenas);
}

/// Bytes the allocator holds free: freed, kept for reuse, not given back to the kernel.
pub fn held_free() -> usize {
    glibc::held_free()
}

/// Gives the allocator's free pages back to the kernel when it holds at least `threshold` bytes
/// free. Answers the bytes it held free when it gave them back, or `None` when it held fewer.
///
/// Giving back walks every arena under its lock, so it stalls threads allocating meanwhile: the
/// threshold keeps it to the rare moment after a burst, not every look.
pub fn give_back_over(threshold: usize) -> Option<usize> {
    let free = held_free();
    if free < threshold {
        return None;
    }
    glibc::trim();
    Some(free)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code, reason = "glibc's allocator settings have no safe binding")]
mod glibc {
    pub fn set_arena_max(arenas: i32) {
        // SAFETY: mallopt takes two integers and changes only the allocator's own settings.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    }

    pub fn held_free() -> usize {
        // SAFETY: mallinfo2 only reads the allocator's statistics (under each arena's lock).
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
