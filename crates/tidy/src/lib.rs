//! The workspace's structural invariants as pure functions over `cargo metadata` JSON. The test
//! in `tests/tidy.rs` runs `cargo metadata` and feeds the result here; these functions do no I/O,
//! so a unit test can hand them a doctored graph and see them fail.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

/// Crates that hold rules: no storage, HTTP, keyring or raw system-call backend beneath them.
pub const PURE_CRATES: [&str; 4] = [
    "conduit-core",
    "conduit-toolbelt",
    "conduit-scheduler",
    "conduit-config",
];

/// Backends the pure crates must not reach, directly or through another crate.
pub const FORBIDDEN_BACKENDS: [&str; 7] = [
    "rusqlite",
    "postgres",
    "hyper",
    "axum",
    "keyring",
    "linux-keyutils",
    "rustix",
];

/// The package graph of one resolve: names by id, and each package's normal (non-dev,
/// non-build) dependencies.
pub struct Graph {
    names: BTreeMap<String, String>,
    rust_versions: BTreeMap<String, Version>,
    normal_deps: BTreeMap<String, Vec<String>>,
    all_deps: BTreeMap<String, Vec<String>>,
    members: Vec<String>,
}

/// A `major.minor[.patch]` Rust version, compared numerically.
pub type Version = (u64, u64, u64);

/// A forbidden backend reached by a pure crate, with the chain of package names that reaches it.
#[derive(Debug, PartialEq, Eq)]
pub struct Violation {
    pub chain: Vec<String>,
}

impl Graph {
    /// Reads the graph out of `cargo metadata --format-version 1` output.
    pub fn from_metadata(metadata: &Value) -> Result<Self, String> {
        let mut graph = Graph {
            names: BTreeMap::new(),
            rust_versions: BTreeMap::new(),
            normal_deps: BTreeMap::new(),
            all_deps: BTreeMap::new(),
            members: strings(&metadata["workspace_members"]),
        };
        for package in array(&metadata["packages"]) {
            let id = text(&package["id"])?;
            graph.names.insert(id.clone(), text(&package["name"])?);
            if let Some(version) = package["rust_version"].as_str() {
                graph.rust_versions.insert(id, parse_version(version)?);
            }
        }
        for node in array(&metadata["resolve"]["nodes"]) {
            graph.add_node(node)?;
        }
        Ok(graph)
    }

    fn add_node(&mut self, node: &Value) -> Result<(), String> {
        let id = text(&node["id"])?;
        let mut normal = Vec::new();
        let mut all = Vec::new();
        for dep in array(&node["deps"]) {
            let pkg = text(&dep["pkg"])?;
            if array(&dep["dep_kinds"]).iter().any(|kind| kind["kind"].is_null()) {
                normal.push(pkg.clone());
            }
            all.push(pkg);
        }
        self.normal_deps.insert(id.clone(), normal);
        self.all_deps.insert(id, all);
        Ok(())
    }

    /// Adds a normal dependency edge; how a test shows the check can fail.
    pub fn add_dependency(&mut self, from: &str, to: &str) -> Result<(), String> {
        let (from, to) = (self.id_of(from)?, self.id_of(to)?);
        self.normal_deps.entry(from).or_default().push(to);
        Ok(())
    }

    fn id_of(&self, name: &str) -> Result<String, String> {
        let id = self
            .names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(id, _)| id.clone());
        id.ok_or_else(|| format!("no package named {name} in the resolve"))
    }

    /// Every forbidden backend a pure crate reaches through normal dependencies, shortest chain
    /// first.
    pub fn forbidden_reaches(&self) -> Result<Vec<Violation>, String> {
        let mut violations = Vec::new();
        for krate in PURE_CRATES {
            let parents = self.breadth_first(&self.id_of(krate)?, &self.normal_deps);
            for (id, name) in &self.names {
                if FORBIDDEN_BACKENDS.contains(&name.as_str()) && parents.contains_key(id) {
                    violations.push(Violation {
                        chain: self.chain(&parents, id),
                    });
                }
            }
        }
        Ok(violations)
    }

    /// The highest `rust-version` among the packages the workspace builds (tests included).
    pub fn dependencies_need(&self) -> Option<(Version, String)> {
        let mut reached = BTreeSet::new();
        for member in &self.members {
            reached.extend(self.breadth_first(member, &self.all_deps).into_keys());
        }
        reached
            .iter()
            .filter(|id| !self.members.contains(id))
            .filter_map(|id| Some((*self.rust_versions.get(id)?, self.names.get(id)?.clone())))
            .max()
    }

    /// The `rust-version` every workspace member declares, if they agree.
    pub fn workspace_declares(&self) -> Result<Version, String> {
        let declared: BTreeSet<Version> = self
            .members
            .iter()
            .filter_map(|id| self.rust_versions.get(id).copied())
            .collect();
        match (declared.len(), declared.first()) {
            (1, Some(version)) if self.members.iter().all(|id| self.rust_versions.contains_key(id)) => Ok(*version),
            _ => Err(format!(
                "workspace members declare rust-version inconsistently: {declared:?}"
            )),
        }
    }

    /// Each reached id mapped to the id it was first reached from (the start maps to itself).
    fn breadth_first(&self, start: &str, edges: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, String> {
        let mut parents = BTreeMap::from([(start.to_string(), start.to_string())]);
        let mut queue = VecDeque::from([start.to_string()]);
        while let Some(id) = queue.pop_front() {
            for next in edges.get(&id).into_iter().flatten() {
                if !parents.contains_key(next) {
                    parents.insert(next.clone(), id.clone());
                    queue.push_back(next.clone());
                }
            }
        }
        parents
    }

    fn chain(&self, parents: &BTreeMap<String, String>, end: &str) -> Vec<String> {
        let mut chain = vec![end.to_string()];
        while let Some(parent) = parents.get(chain.last().map_or("", String::as_str)) {
            if chain.contains(parent) {
                break;
            }
            chain.push(parent.clone());
        }
        chain.reverse();
        chain
            .iter()
            .map(|id| self.names.get(id).cloned().unwrap_or_else(|| id.clone()))
            .collect()
    }
}

fn parse_version(text: &str) -> Result<Version, String> {
    let mut parts = text
        .split('.')
        .map(|part| part.parse::<u64>().map_err(|_| format!("bad version {text}")));
    let major = parts.next().unwrap_or(Ok(0))?;
    let minor = parts.next().unwrap_or(Ok(0))?;
    let patch = parts.next().unwrap_or(Ok(0))?;
    Ok((major, minor, patch))
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

fn strings(value: &Value) -> Vec<String> {
    array(value)
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn text(value: &Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "cargo metadata: expected a string".to_string())
}

/// One source file of a crate: its module path below the crate root (`["management", "work"]` for
/// `management/work.rs` or `management/work/mod.rs`) and its text.
pub struct SourceFile {
    pub module: Vec<String>,
    pub text: String,
}

/// The import circles among sibling modules of one crate: each a list of modules (as `a::b`) that
/// reach one another through `crate::` and `super::` paths. A module using its own descendants, or
/// an item its ancestor re-exports, is no circle: only edges between siblings count.
pub fn module_circles(files: &[SourceFile]) -> Vec<Vec<String>> {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in files {
        for target in referenced_modules(file, &modules) {
            if let Some((from, to)) = sibling_edge(&file.module, &target) {
                edges.entry(from).or_default().insert(to);
            }
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut names: Vec<String> = component.iter().map(|m| m.join("::")).collect();
            names.sort();
            names
        })
        .collect()
}

/// The modules `file` names by `crate::` or `super::` paths, each resolved to the longest prefix
/// that is a module.
fn referenced_modules(file: &SourceFile, modules: &BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(&file.module))] {
        for (start, _) in file.text.match_indices(prefix) {
            let preceded_by_ident = file.text[..start].chars().next_back().is_some_and(is_ident_char);
            if preceded_by_ident {
                continue;
            }
            let mut path = base.clone();
            path.extend(path_segments(&file.text[start + prefix.len()..]));
            while !path.is_empty() && !modules.contains(&path) {
                path.pop();
            }
            found.push(path);
        }
    }
    found
}

fn parent(module: &[String]) -> Vec<String> {
    module[..module.len().saturating_sub(1)].to_vec()
}

/// The identifiers of a path, `a::b::{c, d}` giving `a`, `b`.
fn path_segments(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let ident: String = rest.chars().take_while(|c| is_ident_char(*c)).collect();
        if ident.is_empty() {
            return segments;
        }
        rest = &rest[ident.len()..];
        segments.push(ident);
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => return segments,
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The edge between the two children of `from`'s and `to`'s nearest common ancestor that hold
/// them, or none when one holds the other.
fn sibling_edge(from: &[String], to: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..=common].to_vec(), to[..=common].to_vec()))
}

/// Tarjan's strongly connected components.
fn strongly_connected<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Walk<'a, N> {
        edges: &'a BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        components: Vec<Vec<N>>,
    }
    impl<N: Ord + Clone> Walk<'_, N> {
        fn visit(&mut self, node: &N) {
            let at = self.index.len();
            self.index.insert(node.clone(), at);
            self.low.insert(node.clone(), at);
            self.stack.push(node.clone());
            for next in self.edges.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    self.lower(node, self.low[next]);
                } else if self.stack.contains(next) {
                    self.lower(node, self.index[next]);
                }
            }
            if self.low[node] == self.index[node] {
                let split = self.stack.iter().rposition(|n| n == node).unwrap_or(0);
                self.components.push(self.stack.split_off(split));
            }
        }

        fn lower(&mut self, node: &N, to: usize) {
            if let Some(low) = self.low.get_mut(node) {
                *low = (*low).min(to);
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        components: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.components
}
