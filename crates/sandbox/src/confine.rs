//! Applying a [`Policy`] to a child process: the Landlock ruleset is built in the parent (every path
//! opened, every rule added), and only system calls that allocate nothing run between fork and exec:
//! a new network namespace where the policy has no network, every capability dropped (with an empty
//! bounding set), `no_new_privs`, and the ruleset's restriction.

use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use rustix::fs::{Mode, OFlags};
use rustix::thread::{CapabilitySet, CapabilitySets, UnshareFlags};

use crate::policy::{carve, Access, Entry, Kernel, Net, Policy};

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
}

/// The ABI whose access rights the rulesets handle: file access with truncation (ABI 3).
const FS_ABI: ABI = ABI::V3;

impl Confinement {
    /// Builds the ruleset for `policy`, refusing (never weakening) a policy `kernel` cannot enforce.
    pub fn prepare(policy: &Policy, kernel: &Kernel) -> Result<Confinement, Unavailable> {
        let missing = policy.unmet(kernel);
        if !missing.is_empty() {
            return Err(Unavailable { missing });
        }
        let refused = |why: String| Unavailable {
            missing: vec![format!("a Landlock ruleset the kernel accepts ({why})")],
        };
        let ruleset = ruleset(policy)
            .map_err(|e| refused(e.to_string()))?
            .ok_or_else(|| refused("Landlock is not enabled".into()))?;
        let root = rustix::process::geteuid().is_root();
        let id_maps = (policy.network == Net::None && !root).then(|| {
            let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
            (format!("{uid} {uid} 1\n"), format!("{gid} {gid} 1\n"))
        });
        Ok(Confinement {
            ruleset,
            network: policy.network,
            id_maps,
        })
    }

    /// Makes `cmd` confine the child it starts.
    pub fn install(self, cmd: &mut tokio::process::Command) {
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
    }

    /// In the child: the network namespace, then capabilities, then Landlock.
    fn enter(self) -> std::io::Result<()> {
        if self.network == Net::None {
            isolate_network(self.id_maps.as_ref())?;
        }
        drop_capabilities()?;
        rustix::thread::set_no_new_privs(true)?;
        restrict_self(&self.ruleset)
    }
}

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

/// Every grant of `policy` as Landlock rules: a grant inside a hidden tree as it is (the daemon
/// placed it there), any other carved around the hidden trees, reading directories everywhere it
/// reads.
fn ruleset(policy: &Policy) -> Result<Option<OwnedFd>, landlock::RulesetError> {
    let hidden: Vec<PathBuf> = policy.hidden.iter().map(|h| canonical(h)).collect();
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(FS_ABI))?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    if policy.network == Net::DnsOnly {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let mut created = ruleset.create()?;
    for grant in &policy.grants {
        let rights = rights(grant.access);
        if policy.is_hidden(&grant.path) {
            created = add(created, &grant.path, rights)?;
            continue;
        }
        let root = canonical(&grant.path);
        if hidden.iter().any(|h| root.starts_with(h)) {
            continue;
        }
        let carved = carve(&root, &hidden, &mut list_dir);
        if carved.first() != Some(&root) && grant.access.read {
            created = add(created, &root, AccessFs::ReadDir.into())?;
        }
        for path in carved {
            created = add(created, &path, rights)?;
        }
    }
    if policy.network == Net::DnsOnly {
        created = created.add_rule(NetPort::new(53, AccessNet::ConnectTcp))?;
    }
    Ok(created.into())
}

fn rights(access: Access) -> BitFlags<AccessFs> {
    let mut rights = BitFlags::empty();
    if access.read {
        rights |= AccessFs::ReadFile | AccessFs::ReadDir;
    }
    if access.execute {
        rights |= AccessFs::Execute;
    }
    if access.write {
        rights |= AccessFs::from_write(FS_ABI);
    }
    rights
}

/// Adds a rule for `path` (opened without following a final symbolic link), with the rights its
/// kind of file can carry. A path that does not exist, or is a link, is skipped.
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    rights: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    let Ok(fd) = rustix::fs::open(path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()) else {
        return Ok(created);
    };
    let Ok(stat) = rustix::fs::fstat(fd.as_fd()) else {
        return Ok(created);
    };
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    let rights = match kind {
        rustix::fs::FileType::Directory => rights,
        rustix::fs::FileType::Symlink => return Ok(created),
        _ => rights & AccessFs::from_file(FS_ABI),
    };
    if rights.is_empty() {
        return Ok(created);
    }
    created.add_rule(PathBeneath::new(fd, rights))
}

fn list_dir(dir: &Path) -> Vec<Entry> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| Entry {
            is_symlink: e.file_type().map(|t| t.is_symlink()).unwrap_or(true),
            path: e.path(),
        })
        .collect()
}

/// The path with every link resolved, or as given when it does not exist.
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}
