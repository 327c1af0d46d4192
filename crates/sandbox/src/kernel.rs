//! What the running kernel can enforce, asked once: the Landlock ABI it offers, and whether a child
//! can be given a network namespace of its own (tried by doing it).

use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rustix::thread::UnshareFlags;

use crate::policy::Kernel;

/// The running kernel's answer, probed on first use.
pub fn probe() -> Kernel {
    static PROBED: OnceLock<Kernel> = OnceLock::new();
    *PROBED.get_or_init(|| {
        let kernel = Kernel {
            landlock_abi: landlock_abi(),
            network_namespaces: network_namespaces(),
        };
        injected(kernel)
    })
}

fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute, a zero size and the version flag, landlock_create_ruleset(2)
    // only answers the ABI version; it reads and writes no memory.
    #[allow(unsafe_code)]
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(abi).unwrap_or(0).max(0)
}

/// Whether `/bin/true` starts in a new network namespace (with a user namespace, unless root).
fn network_namespaces() -> bool {
    let flags = if rustix::process::geteuid().is_root() {
        UnshareFlags::NEWNET
    } else {
        UnshareFlags::NEWUSER | UnshareFlags::NEWNET
    };
    let mut probe = Command::new("/bin/true");
    probe.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: the hook only makes one system call in the forked child.
    #[allow(unsafe_code)]
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut probe, move || {
            rustix::thread::unshare_unsafe(flags).map_err(Into::into)
        });
    }
    probe.status().is_ok_and(|s| s.success())
}

/// Tests stand in for an older kernel with `OPEN_CONDUIT_TEST_LANDLOCK_ABI` (and
/// `OPEN_CONDUIT_TEST_NETNS=0`); only builds with the `test-kernel` feature read them.
#[cfg(feature = "test-kernel")]
fn injected(mut kernel: Kernel) -> Kernel {
    if let Some(abi) = std::env::var("OPEN_CONDUIT_TEST_LANDLOCK_ABI")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        kernel.landlock_abi = abi;
    }
    if std::env::var("OPEN_CONDUIT_TEST_NETNS").is_ok_and(|v| v == "0") {
        kernel.network_namespaces = false;
    }
    kernel
}

#[cfg(not(feature = "test-kernel"))]
fn injected(kernel: Kernel) -> Kernel {
    kernel
}
