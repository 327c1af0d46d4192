//! A confinement policy as data: the trees a process may read, write and execute, what stays hidden
//! inside them, and its network. Built from a binding's `sandbox` setting or from a package's
//! `runtime.requires`; nothing here touches the filesystem.

use std::path::{Path, PathBuf};

use conduit_core::sandbox::{Network, Sandbox};

/// What a grant allows beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
}

impl Access {
    pub const READ: Access = Access {
        read: true,
        write: false,
        execute: false,
    };
    pub const READ_EXECUTE: Access = Access {
        execute: true,
        ..Access::READ
    };
    pub const READ_WRITE: Access = Access {
        write: true,
        ..Access::READ
    };
    pub const ALL: Access = Access {
        read: true,
        write: true,
        execute: true,
    };
}

/// One tree and what may be done beneath it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub access: Access,
}

/// The network a confined process gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    Host,
    /// The host's network, with TCP connections only to port 53 and no TCP listening.
    DnsOnly,
    /// A network namespace of its own with nothing in it.
    None,
}

/// What a confined process may reach. A grant never reaches into a `hidden` tree, except a grant
/// whose own path lies inside it (the execution's run directory inside the state directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub grants: Vec<Grant>,
    pub hidden: Vec<PathBuf>,
    pub network: Net,
}

/// What any program needs to load and run: readable (and, where the policy lets it run programs,
/// executable) even under the narrowest policy.
pub const RUNTIME_PATHS: [&str; 11] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/run", "/proc", "/sys",
];

/// Devices every process may read and write: the sinks and sources shells and runtimes open.
pub const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The dynamic loaders the kernel opens for execution when it starts a program: a policy that
/// names the programs a process may run must let it run these too.
pub const LOADERS: [&str; 5] = [
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/ld-linux-armhf.so.3",
    "/lib/ld-musl-x86_64.so.1",
    "/lib/ld-musl-aarch64.so.1",
];

/// Where one execution's files are.
#[derive(Debug, Clone)]
pub struct ExecutionPaths {
    pub state_dir: PathBuf,
    /// The execution's own run directory (token file, socket), inside the state directory.
    pub run_dir: PathBuf,
    pub workdir: PathBuf,
    pub tmpdir: PathBuf,
    /// An agent CLI's home (its configuration and sessions), the binding's own, writable.
    pub home: Option<PathBuf>,
    pub playbooks: PathBuf,
    /// The directory holding the host's `os` binary.
    pub os_dir: PathBuf,
    /// Files outside the state directory that are the operator's alone (`file:` secrets, the
    /// configuration file).
    pub private_files: Vec<PathBuf>,
}

/// Where one package's files are, and the programs it is started with.
#[derive(Debug, Clone)]
pub struct PackagePaths {
    pub state_dir: PathBuf,
    pub package_dir: PathBuf,
    pub tmpdir: PathBuf,
    /// The entry, its interpreter chain (`#!`, `env`) and the dynamic loaders, resolved.
    pub programs: Vec<PathBuf>,
    /// Installation trees the interpreters load their libraries from (`<prefix>` of `<prefix>/bin/x`).
    pub program_trees: Vec<PathBuf>,
    pub private_files: Vec<PathBuf>,
}

fn net_of(network: Network) -> Net {
    match network {
        Network::Host => Net::Host,
        Network::None => Net::None,
    }
}

fn grants(paths: impl IntoIterator<Item = impl Into<PathBuf>>, access: Access) -> impl Iterator<Item = Grant> {
    paths.into_iter().map(move |p| Grant { path: p.into(), access })
}

fn hidden(state_dir: &Path, private_files: &[PathBuf]) -> Vec<PathBuf> {
    std::iter::once(state_dir.to_owned())
        .chain(private_files.iter().cloned())
        .collect()
}

impl Policy {
    /// The policy of an execution under its binding's setting; `None` when the setting is `off`.
    pub fn for_execution(setting: &Sandbox, paths: &ExecutionPaths) -> Option<Policy> {
        let Sandbox::Confined(spec) = setting else { return None };
        let readable: Vec<PathBuf> = match &spec.read {
            None => vec![PathBuf::from("/")],
            Some(listed) => RUNTIME_PATHS
                .iter()
                .map(PathBuf::from)
                .chain(listed.iter().map(PathBuf::from))
                .chain([paths.os_dir.clone()])
                .collect(),
        };
        let own = [paths.workdir.clone(), paths.tmpdir.clone()]
            .into_iter()
            .chain(paths.home.clone());
        let grants = grants(readable, Access::READ_EXECUTE)
            .chain(grants([&paths.run_dir, &paths.playbooks], Access::READ))
            .chain(grants(own, Access::ALL))
            .chain(grants(spec.write.iter().map(PathBuf::from), Access::ALL))
            .chain(grants(DEVICES, Access::READ_WRITE))
            .collect();
        Some(Policy {
            grants,
            hidden: hidden(&paths.state_dir, &paths.private_files),
            network: net_of(spec.network),
        })
    }

    /// What `kernel` lacks to enforce an execution under `setting` (`None` when it is off): what
    /// `doctor` reports for each binding.
    pub fn unmet_for(setting: &Sandbox, kernel: &Kernel) -> Option<Vec<String>> {
        let Sandbox::Confined(spec) = setting else { return None };
        let needs = Policy {
            grants: Vec::new(),
            hidden: Vec::new(),
            network: net_of(spec.network),
        };
        Some(needs.unmet(kernel))
    }

    /// The policy of a package's process from the primitives it declared (RFC 0076 §A): without
    /// `fs.read` it reads only its own directory, the runtime paths and its interpreters' trees;
    /// without `fs.write` it writes only its temp directory; without `subprocess` it runs only its
    /// entry and interpreters; without `net.*` it has no network, and `net.dns` alone gives DNS.
    pub fn for_package(requires: &[String], paths: &PackagePaths) -> Policy {
        let has = |token: &str| requires.iter().any(|r| r == token);
        let run = if has("subprocess") {
            Access::READ_EXECUTE
        } else {
            Access::READ
        };
        let readable: Vec<PathBuf> = if has("fs.read") {
            vec![PathBuf::from("/")]
        } else {
            RUNTIME_PATHS
                .iter()
                .map(PathBuf::from)
                .chain(paths.program_trees.iter().cloned())
                .collect()
        };
        // `fs.write` alone writes everywhere it may; it does not make everything readable.
        let anywhere = Access {
            read: has("fs.read"),
            write: true,
            ..run
        };
        let writable = has("fs.write").then(|| Grant {
            path: PathBuf::from("/"),
            access: anywhere,
        });
        let grants = grants(readable, run)
            .chain(grants([&paths.package_dir], run))
            .chain(grants(paths.programs.iter().cloned(), Access::READ_EXECUTE))
            .chain(grants([&paths.tmpdir], Access { write: true, ..run }))
            .chain(writable)
            .chain(grants(DEVICES, Access::READ_WRITE))
            .collect();
        let network = match (has("net.outbound"), has("net.dns")) {
            (true, _) => Net::Host,
            (false, true) => Net::DnsOnly,
            (false, false) => Net::None,
        };
        Policy {
            grants,
            hidden: hidden(&paths.state_dir, &paths.private_files),
            network,
        }
    }

    /// Whether `path` lies in (or is) a hidden tree.
    pub fn is_hidden(&self, path: &Path) -> bool {
        self.hidden.iter().any(|h| path.starts_with(h))
    }
}

/// One entry of a directory as [`carve`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    /// A symbolic link is never granted: what it points at is granted (or not) where it really is.
    pub is_symlink: bool,
}

/// The trees that together make `root` less every hidden tree beneath it: `root` itself when
/// nothing hidden lies beneath it, nothing when it is hidden, else the carving of each entry of
/// the directory (`list` reads it). A grant on a directory reaches all beneath it, which is why an
/// ancestor of a hidden tree is never granted whole.
pub fn carve(root: &Path, hidden: &[PathBuf], list: &mut impl FnMut(&Path) -> Vec<Entry>) -> Vec<PathBuf> {
    if hidden.iter().any(|h| root.starts_with(h)) {
        return Vec::new();
    }
    if !hidden.iter().any(|h| h.starts_with(root)) {
        return vec![root.to_owned()];
    }
    list(root)
        .into_iter()
        .filter(|e| !e.is_symlink)
        .flat_map(|e| carve(&e.path, hidden, list))
        .collect()
}

/// A kernel feature a policy needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Landlock ABI 3: reading, writing, executing and truncating files beneath granted trees.
    Filesystem,
    /// Landlock ABI 6: no signals to processes outside the sandbox, no abstract sockets of theirs.
    Scoping,
    /// Landlock ABI 4: TCP connections by port.
    TcpPorts,
    /// A network namespace of the process's own.
    NetworkNamespace,
}

impl Feature {
    fn landlock_abi(self) -> Option<i32> {
        match self {
            Feature::Filesystem => Some(3),
            Feature::TcpPorts => Some(4),
            Feature::Scoping => Some(6),
            Feature::NetworkNamespace => None,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Feature::Filesystem => "Landlock ABI 3 (file access rules)",
            Feature::TcpPorts => "Landlock ABI 4 (TCP port rules, for net.dns alone)",
            Feature::Scoping => "Landlock ABI 6 (signal and abstract-socket scoping)",
            Feature::NetworkNamespace => "network namespaces (for network \"none\")",
        }
    }
}

/// What the running kernel can enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    /// The Landlock ABI version; 0 when Landlock is absent or disabled.
    pub landlock_abi: i32,
    pub network_namespaces: bool,
}

impl Kernel {
    fn offers(&self, feature: Feature) -> bool {
        match feature.landlock_abi() {
            Some(abi) => self.landlock_abi >= abi,
            None => self.network_namespaces,
        }
    }
}

impl Policy {
    /// Every kernel feature this policy needs.
    pub fn needs(&self) -> Vec<Feature> {
        let mut needs = vec![Feature::Filesystem, Feature::Scoping];
        match self.network {
            Net::Host => {}
            Net::DnsOnly => needs.push(Feature::TcpPorts),
            Net::None => needs.push(Feature::NetworkNamespace),
        }
        needs
    }

    /// What this policy needs that `kernel` cannot enforce, described for the operator; empty when
    /// it can be enforced whole. A policy is never applied in part.
    pub fn unmet(&self, kernel: &Kernel) -> Vec<String> {
        self.needs()
            .into_iter()
            .filter(|f| !kernel.offers(*f))
            .map(|f| {
                let mut text = f.describe().to_owned();
                if f.landlock_abi().is_some() {
                    text.push_str(&format!("; this kernel offers Landlock ABI {}", kernel.landlock_abi));
                }
                text
            })
            .collect()
    }
}

/// The interpreter line of a script (`#!/usr/bin/env python3` gives `["/usr/bin/env", "python3"]`),
/// if its first bytes are one.
pub fn shebang(head: &[u8]) -> Option<Vec<String>> {
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let words: Vec<String> = String::from_utf8_lossy(line)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    (!words.is_empty()).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::sandbox::SandboxSpec;

    fn execution() -> ExecutionPaths {
        ExecutionPaths {
            state_dir: "/s".into(),
            run_dir: "/s/runs/k".into(),
            workdir: "/s/runs/k/work".into(),
            tmpdir: "/s/runs/k/tmp".into(),
            home: None,
            playbooks: "/s/playbooks".into(),
            os_dir: "/opt/oc/bin".into(),
            private_files: vec!["/home/me/.config/gh-token".into()],
        }
    }

    fn package() -> PackagePaths {
        PackagePaths {
            state_dir: "/s".into(),
            package_dir: "/s/packages/notes".into(),
            tmpdir: "/s/tmp/package-notes".into(),
            programs: vec!["/s/packages/notes/bin/notes".into(), "/usr/bin/python3.11".into()],
            program_trees: vec!["/opt/py".into()],
            private_files: vec![],
        }
    }

    fn access_of(policy: &Policy, path: &str) -> Vec<Access> {
        let path = Path::new(path);
        policy
            .grants
            .iter()
            .filter(|g| g.path == path)
            .map(|g| g.access)
            .collect()
    }

    fn list(tokens: &[&str]) -> Vec<String> {
        tokens.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn an_execution_policy_from_each_setting() {
        let paths = execution();
        assert_eq!(Policy::for_execution(&Sandbox::Off, &paths), None);
        let default = Policy::for_execution(&Sandbox::default(), &paths).unwrap();
        assert_eq!(access_of(&default, "/"), [Access::READ_EXECUTE]);
        assert_eq!(
            access_of(&default, "/s/runs/k"),
            [Access::READ],
            "token readable, nothing writable"
        );
        assert_eq!(access_of(&default, "/s/runs/k/work"), [Access::ALL]);
        assert_eq!(access_of(&default, "/s/runs/k/tmp"), [Access::ALL]);
        assert_eq!(access_of(&default, "/dev/null"), [Access::READ_WRITE]);
        assert_eq!(
            default.hidden,
            [PathBuf::from("/s"), PathBuf::from("/home/me/.config/gh-token")]
        );
        assert_eq!(default.network, Net::Host);

        let narrow = Sandbox::Confined(SandboxSpec {
            network: Network::None,
            read: Some(list(&["/srv/src"])),
            write: list(&["/srv/out"]),
        });
        let narrow = Policy::for_execution(&narrow, &paths).unwrap();
        assert!(
            access_of(&narrow, "/").is_empty(),
            "a read list replaces the whole filesystem"
        );
        for path in ["/usr", "/etc", "/srv/src", "/opt/oc/bin"] {
            assert_eq!(access_of(&narrow, path), [Access::READ_EXECUTE], "{path}");
        }
        assert_eq!(access_of(&narrow, "/srv/out"), [Access::ALL]);
        assert_eq!(narrow.network, Net::None);
        assert_eq!(narrow.needs().last(), Some(&Feature::NetworkNamespace));
    }

    #[test]
    fn a_package_policy_from_each_requirement() {
        let paths = package();
        let bare = Policy::for_package(&[], &paths);
        assert!(access_of(&bare, "/").is_empty(), "no fs.read: not the whole filesystem");
        assert_eq!(
            access_of(&bare, "/usr"),
            [Access::READ],
            "no subprocess: runtime paths do not run"
        );
        assert_eq!(access_of(&bare, "/opt/py"), [Access::READ]);
        assert_eq!(access_of(&bare, "/s/packages/notes"), [Access::READ]);
        assert_eq!(access_of(&bare, "/usr/bin/python3.11"), [Access::READ_EXECUTE]);
        assert_eq!(access_of(&bare, "/s/tmp/package-notes"), [Access::READ_WRITE]);
        assert_eq!(bare.network, Net::None);

        let read = Policy::for_package(&list(&["fs.read"]), &paths);
        assert_eq!(access_of(&read, "/"), [Access::READ]);
        let write = Policy::for_package(&list(&["fs.write"]), &paths);
        let write_only = Access {
            read: false,
            ..Access::READ_WRITE
        };
        assert_eq!(
            access_of(&write, "/"),
            [write_only],
            "fs.write does not read everything"
        );
        let both = Policy::for_package(&list(&["fs.read", "fs.write"]), &paths);
        assert!(access_of(&both, "/").contains(&Access::READ_WRITE));
        let sub = Policy::for_package(&list(&["subprocess"]), &paths);
        assert_eq!(access_of(&sub, "/usr"), [Access::READ_EXECUTE]);
        assert_eq!(Policy::for_package(&list(&["net.dns"]), &paths).network, Net::DnsOnly);
        let both = list(&["net.dns", "net.outbound"]);
        assert_eq!(Policy::for_package(&both, &paths).network, Net::Host);
        assert_eq!(Policy::for_package(&list(&["net.outbound"]), &paths).network, Net::Host);
        for inert in ["crypto", "clock", "env.read"] {
            let policy = Policy::for_package(&list(&[inert]), &paths);
            assert_eq!(policy, bare, "{inert} changes no confinement");
        }
    }

    #[test]
    fn carving_leaves_out_hidden_trees_and_symlinks() {
        let tree: &[(&str, &[(&str, bool)])] = &[
            ("/", &[("/usr", false), ("/home", false), ("/bin", true)]),
            ("/home", &[("/home/me", false), ("/home/you", false)]),
            (
                "/home/me",
                &[
                    ("/home/me/.state", false),
                    ("/home/me/src", false),
                    ("/home/me/link", true),
                ],
            ),
        ];
        let mut listed = Vec::new();
        let mut list = |dir: &Path| {
            listed.push(dir.to_owned());
            tree.iter()
                .find(|(d, _)| Path::new(d) == dir)
                .map(|(_, entries)| {
                    entries
                        .iter()
                        .map(|(p, is_symlink)| Entry {
                            path: p.into(),
                            is_symlink: *is_symlink,
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let hidden = [PathBuf::from("/home/me/.state")];
        let carved = carve(Path::new("/"), &hidden, &mut list);
        let expect: Vec<PathBuf> = ["/usr", "/home/me/src", "/home/you"].map(PathBuf::from).to_vec();
        assert_eq!(carved, expect);
        assert_eq!(listed.len(), 3, "only ancestors of a hidden tree are listed");
        assert!(carve(Path::new("/home/me/.state/x"), &hidden, &mut |_| unreachable!()).is_empty());
        assert_eq!(
            carve(Path::new("/usr"), &hidden, &mut |_| unreachable!()),
            [PathBuf::from("/usr")]
        );
    }

    #[test]
    fn unmet_features_name_what_is_missing() {
        let policy = Policy::for_execution(&Sandbox::default(), &execution()).unwrap();
        let full = Kernel {
            landlock_abi: 7,
            network_namespaces: true,
        };
        assert!(policy.unmet(&full).is_empty());
        let old = Kernel {
            landlock_abi: 5,
            ..full
        };
        let unmet = policy.unmet(&old);
        assert_eq!(unmet.len(), 1);
        assert!(
            unmet[0].contains("ABI 6") && unmet[0].contains("offers Landlock ABI 5"),
            "{unmet:?}"
        );
        let none = Kernel {
            landlock_abi: 0,
            network_namespaces: false,
        };
        assert_eq!(policy.unmet(&none).len(), 2);
        let mut isolated = policy.clone();
        isolated.network = Net::None;
        assert!(isolated.unmet(&none).iter().any(|m| m.contains("network namespaces")));
    }

    #[test]
    fn shebang_lines() {
        assert_eq!(
            shebang(b"#!/usr/bin/env python3\nimport sys"),
            Some(list(&["/usr/bin/env", "python3"]))
        );
        assert_eq!(shebang(b"#! /bin/sh -e\n"), Some(list(&["/bin/sh", "-e"])));
        assert_eq!(shebang(b"\x7fELF..."), None);
        assert_eq!(shebang(b"#!\n"), None);
    }
}
