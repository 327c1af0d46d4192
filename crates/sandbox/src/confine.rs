//! Applying a [`Policy`] to a child process: the Landlock ruleset is built beforehand (every path
//! opened, every rule added), and only system calls on what was prepared run between fork and exec:
//! a new network namespace where the policy has no network, every capability dropped (with an empty
//! bounding set), `no_new_privs`, the ruleset's restriction, and a seccomp filter that refuses the
//! kernel keyring's system calls (`keyctl`, `add_key`, `request_key`): the daemon's `keyring:`
//! secrets live in the keyrings every process of its user inherits, which Landlock does not cover.
//!
//! The confinement is entered in the forked child itself, never in a thread of the daemon that then
//! starts the child with `posix_spawn` (which would spare copying the daemon's page tables): the
//! child would share that thread's Landlock domain, and a domain may signal its own members, so the
//! child could kill the daemon through the thread before it exits.

use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::thread::{CapabilitySet, CapabilitySets, UnshareFlags};

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};

use crate::policy::{Kernel, Net, Policy};
use crate::rulesets::Rulesets;

/// The kernel cannot enforce what the policy needs: the attempt is not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this kernel cannot enforce the sandbox: it needs {}", missing.join("; "))]
pub struct Unavailable {
    pub missing: Vec<String>,
}

/// A policy made ready for one child: install it on the command that starts the child.
pub struct Confinement {
    ruleset: OwnedFd,
    network: Net,
    /// `uid_map` and `gid_map` lines for a user namespace, when an unprivileged daemon needs one to
    /// make a network namespace.
    id_maps: Option<(String, String)>,
    /// The seccomp program that keeps the child out of the kernel keyring.
    keyring_filter: BpfProgram,
}

impl Confinement {
    /// Builds the ruleset for `policy` (from what `rulesets` keeps), refusing (never weakening) a
    /// policy `kernel` cannot enforce.
    pub fn prepare(policy: &Policy, kernel: &Kernel, rulesets: &Rulesets) -> Result<Confinement, Unavailable> {
        let missing = policy.unmet(kernel);
        if !missing.is_empty() {
            return Err(Unavailable { missing });
        }
        let refused = |why: String| Unavailable {
            missing: vec![format!("a Landlock ruleset the kernel accepts ({why})")],
        };
        let ruleset = rulesets
            .ruleset(policy)
            .map_err(|e| refused(e.to_string()))?
            .ok_or_else(|| refused("Landlock is not enabled".into()))?;
        let root = rustix::process::geteuid().is_root();
        let id_maps = (policy.network == Net::None && !root).then(|| {
            let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
            (format!("{uid} {uid} 1\n"), format!("{gid} {gid} 1\n"))
        });
        let keyring_filter = keyring_filter().map_err(|why| Unavailable {
            missing: vec![format!("a seccomp filter for this architecture ({why})")],
        })?;
        Ok(Confinement {
            ruleset,
            network: policy.network,
            id_maps,
            keyring_filter,
        })
    }

    /// Starts `cmd` with the confinement entered in its forked child, between fork and exec.
    pub fn spawn(self, cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
        let mut confinement = Some(self);
        // SAFETY: the hook runs in the forked child before exec. It only makes system calls on
        // values prepared before the fork (no allocation, no locks).
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || match confinement.take() {
                Some(c) => c.enter(),
                None => Err(std::io::ErrorKind::AlreadyExists.into()),
            });
        }
        cmd.spawn()
    }

    /// In the child: the network namespace, then capabilities, then Landlock.
    fn enter(self) -> std::io::Result<()> {
        if self.network == Net::None {
            isolate_network(self.id_maps.as_ref())?;
        }
        drop_capabilities()?;
        rustix::thread::set_no_new_privs(true)?;
        restrict_self(&self.ruleset)?;
        seccompiler::apply_filter(&self.keyring_filter)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::PermissionDenied))
    }
}

/// A filter that answers `EPERM` to the kernel keyring's system calls and lets every other through.
/// On x86_64 the same calls made through the x32 ABI (their numbers with bit 30 set, which the
/// filter's architecture check does not tell apart) are refused too.
fn keyring_filter() -> Result<BpfProgram, seccompiler::BackendError> {
    let native = [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key];
    let x32 = native.map(|call| call | X32_SYSCALL_BIT);
    let rules = native.into_iter().chain(x32).map(|call| (call, Vec::new())).collect();
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| seccompiler::BackendError::InvalidTargetArch(std::env::consts::ARCH.to_owned()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    filter.try_into()
}

/// The bit x86_64 sets in the system call number of an x32 call; elsewhere no call has it.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: libc::c_long = 0x4000_0000;
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: libc::c_long = 0;

fn isolate_network(id_maps: Option<&(String, String)>) -> std::io::Result<()> {
    let flags = match id_maps {
        Some(_) => UnshareFlags::NEWUSER | UnshareFlags::NEWNET,
        None => UnshareFlags::NEWNET,
    };
    // SAFETY: unsharing the user and network namespaces affects only this (single-threaded) child.
    #[allow(unsafe_code)]
    unsafe {
        rustix::thread::unshare_unsafe(flags)?
    };
    if let Some((uid_map, gid_map)) = id_maps {
        write_proc(c"/proc/self/setgroups", "deny")?;
        write_proc(c"/proc/self/uid_map", uid_map)?;
        write_proc(c"/proc/self/gid_map", gid_map)?;
    }
    Ok(())
}

fn write_proc(path: &std::ffi::CStr, text: &str) -> std::io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, text.as_bytes())?;
    Ok(())
}

/// Drops every capability the child holds (a root daemon's child would otherwise keep them all):
/// the bounding set first, so no later exec regains any, then ambient, then the rest.
fn drop_capabilities() -> std::io::Result<()> {
    let held = rustix::thread::capabilities(None)?;
    if held.permitted.is_empty() && held.effective.is_empty() {
        return Ok(());
    }
    for (_, capability) in CapabilitySet::all().iter_names() {
        match rustix::thread::remove_capability_from_bounding_set(capability) {
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(e.into()),
        }
    }
    rustix::thread::clear_ambient_capability_set()?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(())
}

fn restrict_self(ruleset: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: landlock_restrict_self(2) reads only its two integer arguments.
    #[allow(unsafe_code)]
    let done = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
