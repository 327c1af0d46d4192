//! Landlock rulesets from policies. Most of a ruleset's cost is the granted directories cut around
//! the hidden trees: every sibling of the state directory's ancestors listed, opened and made a
//! rule. [`Rulesets`] keeps those cuts (as paths: a kept descriptor would keep a mount busy) while
//! the directories listed to make them are unchanged, and builds the next ruleset's share of them
//! ahead ([`Rulesets::make_ready`]), so an attempt's start adds only the rules of its own paths.

use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use landlock::{
    Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, ABI,
};
use rustix::fs::{FileType, Mode, OFlags};

use crate::policy::{carve, Access, Entry, Net, Policy};

/// The ABI whose access rights the rulesets handle: file access with truncation (ABI 3).
const FS_ABI: ABI = ABI::V3;

/// How many cuts and ready rulesets are kept; past that, a configuration with many distinct
/// granted trees pays the listing on each start.
const KEPT: usize = 32;

/// A change this close before a listing may share its timestamp with one just after it (file
/// times tick with a coarse clock, and some filesystems keep whole seconds), so such a listing is
/// used once and not kept.
const RACY: Duration = Duration::from_secs(2);

/// The rulesets of one daemon: the cuts kept, and a ruleset made ahead for each policy's base.
#[derive(Default)]
pub struct Rulesets {
    cuts: Mutex<Vec<Cut>>,
    ready: Mutex<Vec<Ready>>,
}

/// The share of a policy that does not change between its attempts: the grants of directories
/// cut around hidden trees, the hidden trees, and the network.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Base {
    cut: Vec<(PathBuf, Access)>,
    hidden: Vec<PathBuf>,
    network: Net,
}

/// A directory's identity and last change as stat(2) gives them: a listing is stale once a listed
/// directory's stamp differs (adding, removing or renaming an entry changes its mtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

type Listed = Vec<(PathBuf, Stamp)>;

/// One opened tree a rule is anchored at.
#[derive(Debug)]
struct Tree {
    fd: OwnedFd,
    is_dir: bool,
}

/// A directory cut around the hidden trees beneath it.
struct Cut {
    root: PathBuf,
    hidden: Vec<PathBuf>,
    listed: Listed,
    trees: Arc<Vec<PathBuf>>,
}

/// A cut as one ruleset uses it; `listed` is `None` when the listing may already be stale.
struct Carved {
    trees: Arc<Vec<PathBuf>>,
    listed: Option<Listed>,
}

struct Ready {
    base: Base,
    listed: Listed,
    ruleset: RulesetCreated,
}

impl Rulesets {
    pub const fn new() -> Rulesets {
        Rulesets {
            cuts: Mutex::new(Vec::new()),
            ready: Mutex::new(Vec::new()),
        }
    }

    /// The ruleset of `policy`: its base as made ahead when that is still true (else built now),
    /// then the policy's other grants.
    pub(crate) fn ruleset(&self, policy: &Policy) -> Result<Option<OwnedFd>, RulesetError> {
        let (base, rest) = split(policy);
        let mut created = match self.take_ready(&base) {
            Some(ready) => ready,
            None => self.build(&base)?.0,
        };
        for (path, access) in rest {
            created = add_path(created, &path, rights(access))?;
        }
        Ok(created.into())
    }

    /// Builds the base of `policy`'s next ruleset ahead of its attempt (off its start's path).
    pub fn make_ready(&self, policy: &Policy) {
        let (base, _) = split(policy);
        let Ok((ruleset, Some(listed))) = self.build(&base) else {
            return;
        };
        let mut ready = lock(&self.ready);
        ready.retain(|r| r.base != base);
        bound(&mut ready);
        ready.push(Ready { base, listed, ruleset });
    }

    fn take_ready(&self, base: &Base) -> Option<RulesetCreated> {
        let mut ready = lock(&self.ready);
        let at = ready.iter().position(|r| &r.base == base)?;
        let taken = ready.remove(at);
        unchanged(&taken.listed).then_some(taken.ruleset)
    }

    /// A new ruleset with the base's rules, and what was listed to make them (`None` when some of
    /// it may already be stale).
    fn build(&self, base: &Base) -> Result<(RulesetCreated, Option<Listed>), RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(FS_ABI))?
            .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
        if base.network == Net::DnsOnly {
            ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
        }
        let mut created = ruleset.create()?;
        let mut listed = Some(Vec::new());
        for (root, access) in &base.cut {
            let carved = self.carve(root, &base.hidden);
            listed = listed.zip(carved.listed).map(|(mut all, l)| {
                all.extend(l);
                all
            });
            if access.read {
                created = add_path(created, root, AccessFs::ReadDir.into())?;
            }
            for tree in carved.trees.iter() {
                created = add_path(created, tree, rights(*access))?;
            }
        }
        if base.network == Net::DnsOnly {
            created = created.add_rule(NetPort::new(53, AccessNet::ConnectTcp))?;
        }
        Ok((created, listed))
    }

    /// `root` less the hidden trees beneath it, opened; kept when its listing is settled.
    fn carve(&self, root: &Path, hidden: &[PathBuf]) -> Carved {
        if let Some(kept) = self.kept_cut(root, hidden) {
            return kept;
        }
        let began = SystemTime::now();
        let mut looked = Vec::new();
        let paths = carve(root, hidden, &mut |dir| {
            looked.push((dir.to_owned(), stamp(dir)));
            list_dir(dir)
        });
        let trees = Arc::new(paths);
        let listed: Option<Listed> = looked.into_iter().map(|(dir, s)| Some((dir, s?))).collect();
        let listed = listed.filter(|l| l.iter().all(|(_, s)| settled(s, began)));
        if let Some(listed) = &listed {
            let mut cuts = lock(&self.cuts);
            cuts.retain(|c| c.root != root || c.hidden != hidden);
            bound(&mut cuts);
            cuts.push(Cut {
                root: root.to_owned(),
                hidden: hidden.to_owned(),
                listed: listed.clone(),
                trees: trees.clone(),
            });
        }
        Carved { trees, listed }
    }

    fn kept_cut(&self, root: &Path, hidden: &[PathBuf]) -> Option<Carved> {
        let mut cuts = lock(&self.cuts);
        let at = cuts.iter().position(|c| c.root == root && c.hidden == hidden)?;
        if !unchanged(&cuts[at].listed) {
            cuts.remove(at);
            return None;
        }
        Some(Carved {
            trees: cuts[at].trees.clone(),
            listed: Some(cuts[at].listed.clone()),
        })
    }
}

/// The policy's base, and its other grants: those inside a hidden tree (as spelled: the daemon
/// placed them there) and those with nothing hidden beneath (resolved). A grant resolving into a
/// hidden tree is dropped.
fn split(policy: &Policy) -> (Base, Vec<(PathBuf, Access)>) {
    let hidden: Vec<PathBuf> = policy.hidden.iter().map(|h| canonical(h)).collect();
    let (mut cut, mut rest) = (Vec::new(), Vec::new());
    for grant in &policy.grants {
        if policy.is_hidden(&grant.path) {
            rest.push((grant.path.clone(), grant.access));
            continue;
        }
        let root = canonical(&grant.path);
        if hidden.iter().any(|h| root.starts_with(h)) {
            continue;
        }
        match hidden.iter().any(|h| h.starts_with(&root)) {
            true => cut.push((root, grant.access)),
            false => rest.push((root, grant.access)),
        }
    }
    let base = Base {
        cut,
        hidden,
        network: policy.network,
    };
    (base, rest)
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

/// Adds a rule for `path`; a path that does not exist, or is a link, is skipped.
fn add_path(created: RulesetCreated, path: &Path, rights: BitFlags<AccessFs>) -> Result<RulesetCreated, RulesetError> {
    match open_tree(path) {
        Some(tree) => add(created, &tree, rights),
        None => Ok(created),
    }
}

/// Adds a rule for `tree` with the rights its kind of file can carry.
fn add(created: RulesetCreated, tree: &Tree, rights: BitFlags<AccessFs>) -> Result<RulesetCreated, RulesetError> {
    let rights = match tree.is_dir {
        true => rights,
        false => rights & AccessFs::from_file(FS_ABI),
    };
    if rights.is_empty() {
        return Ok(created);
    }
    created.add_rule(PathBeneath::new(&tree.fd, rights))
}

/// The path opened as a rule's anchor, without following a final symbolic link; `None` for a path
/// that does not exist or is a link.
fn open_tree(path: &Path) -> Option<Tree> {
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()).ok()?;
    match FileType::from_raw_mode(rustix::fs::fstat(fd.as_fd()).ok()?.st_mode) {
        FileType::Symlink => None,
        kind => Some(Tree {
            fd,
            is_dir: kind == FileType::Directory,
        }),
    }
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

fn stamp(dir: &Path) -> Option<Stamp> {
    let st = rustix::fs::lstat(dir).ok()?;
    Some(Stamp {
        dev: st.st_dev,
        ino: st.st_ino,
        mtime: (st.st_mtime, st.st_mtime_nsec as i64),
        ctime: (st.st_ctime, st.st_ctime_nsec as i64),
    })
}

fn unchanged(listed: &Listed) -> bool {
    listed.iter().all(|(dir, s)| stamp(dir) == Some(*s))
}

/// Whether the directory's last change lies safely before `began`, so any later change shows.
fn settled(stamp: &Stamp, began: SystemTime) -> bool {
    let (secs, nanos) = stamp.ctime;
    let changed = Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
    began
        .duration_since(SystemTime::UNIX_EPOCH)
        .is_ok_and(|now| changed + RACY < now)
}

/// The path with every link resolved, or as given when it does not exist.
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes room for one more in a kept list, dropping the oldest.
fn bound<T>(kept: &mut Vec<T>) {
    if kept.len() >= KEPT {
        kept.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree with a hidden `state` and two siblings, old enough for its listing to be kept.
    fn settled_tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in ["state", "a", "b"] {
            fs::create_dir(dir.path().join(name)).unwrap();
        }
        std::thread::sleep(RACY + Duration::from_millis(200));
        dir
    }

    fn hidden_in(dir: &Path) -> Vec<PathBuf> {
        vec![canonical(&dir.join("state"))]
    }

    /// A policy reading `granted`, hiding `dir/state`.
    fn policy_over(dir: &Path, granted: &Path) -> Policy {
        Policy {
            grants: vec![crate::policy::Grant {
                path: granted.to_owned(),
                access: Access::READ,
            }],
            hidden: vec![dir.join("state")],
            network: Net::Host,
        }
    }

    #[test]
    fn a_settled_cut_is_reused_until_its_directory_changes() {
        let dir = settled_tree();
        let (root, rulesets) = (canonical(dir.path()), Rulesets::new());
        let first = rulesets.carve(&root, &hidden_in(&root));
        assert_eq!(first.trees.len(), 2);
        let again = rulesets.carve(&root, &hidden_in(&root));
        assert!(
            Arc::ptr_eq(&first.trees, &again.trees),
            "an unchanged listing is reused"
        );
        fs::create_dir(root.join("c")).unwrap();
        let changed = rulesets.carve(&root, &hidden_in(&root));
        assert!(
            !Arc::ptr_eq(&first.trees, &changed.trees),
            "a new entry makes a new cut"
        );
        assert_eq!(changed.trees.len(), 3);
    }

    #[test]
    fn a_listing_taken_just_after_a_change_is_not_kept() {
        let dir = settled_tree();
        fs::create_dir(dir.path().join("fresh")).unwrap();
        let (root, rulesets) = (canonical(dir.path()), Rulesets::new());
        assert!(rulesets.carve(&root, &hidden_in(&root)).listed.is_none());
        assert!(lock(&rulesets.cuts).is_empty());
    }

    #[test]
    fn a_ready_ruleset_is_taken_once_and_dropped_when_stale() {
        let dir = settled_tree();
        let (policy, rulesets) = (policy_over(dir.path(), dir.path()), Rulesets::new());
        let base = split(&policy).0;
        assert_eq!(base.cut.len(), 1, "the granted directory is cut around `state`");
        rulesets.make_ready(&policy);
        assert!(rulesets.take_ready(&base).is_some());
        assert!(rulesets.take_ready(&base).is_none(), "taken once");
        rulesets.make_ready(&policy);
        fs::create_dir(dir.path().join("c")).unwrap();
        assert!(rulesets.take_ready(&base).is_none(), "a changed listing makes it stale");
        assert!(lock(&rulesets.ready).is_empty());
    }

    #[test]
    fn an_uncut_grant_is_left_out_of_the_base() {
        let dir = settled_tree();
        let policy = policy_over(dir.path(), &dir.path().join("a"));
        let (base, rest) = split(&policy);
        assert!(base.cut.is_empty());
        assert_eq!(rest, vec![(canonical(&dir.path().join("a")), Access::READ)]);
    }
}
