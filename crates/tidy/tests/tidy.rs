//! Structural invariants of the workspace, read from `cargo metadata`. Each check has a negative
//! control that doctors the graph and sees the check fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use conduit_tidy::{module_circles, Graph, SourceFile};

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let host = host_triple();
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
            &host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().expect("rustc -vV runs");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc names its host")
        .to_string()
}

#[test]
fn pure_crates_reach_no_storage_http_keyring_or_syscall_backend() {
    let graph = Graph::from_metadata(&metadata()).unwrap();
    let violations = graph.forbidden_reaches().unwrap();
    assert!(violations.is_empty(), "a rule crate links a backend: {violations:#?}");
}

#[test]
fn a_forbidden_backend_added_to_a_pure_crate_is_caught() {
    for (pure, backend) in [
        ("conduit-core", "rusqlite"),
        ("conduit-config", "linux-keyutils"),
        ("conduit-scheduler", "hyper"),
    ] {
        let mut graph = Graph::from_metadata(&metadata()).unwrap();
        graph.add_dependency(pure, backend).unwrap();
        let violations = graph.forbidden_reaches().unwrap();
        let chains: Vec<_> = violations.iter().map(|v| v.chain.join(" -> ")).collect();
        assert!(
            chains.iter().any(|c| c.starts_with(pure) && c.ends_with(backend)),
            "{pure} -> {backend} not caught: {chains:?}"
        );
    }
}

#[test]
fn a_backend_reached_through_another_crate_is_caught() {
    // The toolbelt depends on the scheduler; a backend under the scheduler reaches it too.
    let mut graph = Graph::from_metadata(&metadata()).unwrap();
    graph.add_dependency("conduit-scheduler", "axum").unwrap();
    let chains: Vec<_> = graph
        .forbidden_reaches()
        .unwrap()
        .into_iter()
        .map(|v| v.chain.join(" -> "))
        .collect();
    assert!(
        chains
            .iter()
            .any(|c| c.starts_with("conduit-toolbelt") && c.ends_with("axum")),
        "{chains:?}"
    );
}

#[test]
fn rust_version_is_what_the_locked_dependencies_need() {
    let graph = Graph::from_metadata(&metadata()).unwrap();
    let declared = graph.workspace_declares().unwrap();
    let (needed, by) = graph
        .dependencies_need()
        .expect("some dependency declares a rust-version");
    assert_eq!(
        (declared.0, declared.1),
        (needed.0, needed.1),
        "rust-version must be {needed:?}, as {by} needs"
    );
}

/// Every library source file of every workspace crate, by crate.
fn crate_sources() -> Vec<(String, Vec<SourceFile>)> {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            let mut files = Vec::new();
            collect(&src, &src, &mut files);
            all.push((src.display().to_string(), files));
        }
    }
    all
}

fn collect(root: &std::path::Path, dir: &std::path::Path, files: &mut Vec<SourceFile>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let relative = path.strip_prefix(root).unwrap();
        if relative.starts_with("bin") {
            continue; // each binary is a crate of its own
        }
        if path.is_dir() {
            collect(root, &path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut module: Vec<String> = relative
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                module.pop();
            }
            files.push(SourceFile {
                module,
                text: std::fs::read_to_string(&path).unwrap(),
            });
        }
    }
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let circles: Vec<_> = crate_sources()
        .into_iter()
        .flat_map(|(krate, files)| {
            module_circles(&files)
                .into_iter()
                .map(move |c| format!("{krate}: {c:?}"))
        })
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn an_import_circle_is_caught() {
    let file = |module: &[&str], text: &str| SourceFile {
        module: module.iter().map(|m| m.to_string()).collect(),
        text: text.into(),
    };
    let files = [
        file(&[], "mod a; mod b; mod c; mod d;"),
        file(&["a"], "use crate::b::x;"),
        file(&["b"], "fn f() { crate::c::y() }"),
        file(&["c"], "use crate::a::{z, w};"),
        file(&["d"], "use crate::a::z; use crate::Root;"),
    ];
    assert_eq!(module_circles(&files), [vec!["a", "b", "c"]]);
    // A child naming an item its parent holds, or a sibling through `super::`, is judged the same way.
    let nested = [
        file(&["m"], "mod p; mod q; pub struct State;"),
        file(&["m", "p"], "use super::q::f; use super::State;"),
        file(&["m", "q"], "use super::p::g;"),
    ];
    assert_eq!(module_circles(&nested), [vec!["m::p", "m::q"]]);
}

/// Past this a file holds two nouns and becomes a folder (`docs/conventions.md`).
const MAX_FILE_LINES: usize = 600;

#[test]
fn no_library_file_is_longer_than_600_lines() {
    let long: Vec<String> = crate_sources()
        .into_iter()
        .flat_map(|(krate, files)| {
            files
                .into_iter()
                .filter(|f| f.text.lines().count() > MAX_FILE_LINES)
                .map(move |f| format!("{krate}/{}: {} lines", f.module.join("/"), f.text.lines().count()))
        })
        .collect();
    assert!(long.is_empty(), "split these by the nouns they hold: {long:#?}");
}

/// The library modules that may hold `unsafe` code, each with its argument written beside it: the
/// sandbox's system calls, glibc's allocator settings, and the store writer's `Send`. Every crate
/// forbids it or denies it (these three deny it, allowing it only in these modules).
const UNSAFE_ALLOWED: [&str; 4] = [
    "allocator/src:",
    "sandbox/src:confine",
    "sandbox/src:kernel",
    "store-sqlite/src:prepared",
];

/// Each library module that allows (or expects) `unsafe` code and is not in [`UNSAFE_ALLOWED`],
/// each place there that no longer does, and each crate that neither forbids nor denies it. The
/// text is read without its whitespace, as rustfmt may wrap an attribute across lines.
fn unsafe_outside_its_places(crates: &[(String, Vec<SourceFile>)]) -> Vec<String> {
    let mut found = Vec::new();
    let mut allowing = Vec::new();
    for (krate, files) in crates {
        let name = std::path::Path::new(krate).parent().and_then(|p| p.file_name());
        let short = format!("{}/src", name.unwrap().to_string_lossy());
        for file in files {
            let text: String = file.text.chars().filter(|c| !c.is_whitespace()).collect();
            let place = format!("{short}:{}", file.module.join("::"));
            if ["allow(unsafe_code", "expect(unsafe_code"]
                .iter()
                .any(|a| text.contains(a))
            {
                allowing.push(place.clone());
                if !UNSAFE_ALLOWED.contains(&place.as_str()) {
                    found.push(format!("{place} allows unsafe code"));
                }
            }
            let guarded = ["#![forbid(unsafe_code)]", "#![deny(unsafe_code)]"]
                .iter()
                .any(|g| text.contains(g));
            if file.module.is_empty() && !guarded {
                found.push(format!("{short} neither forbids nor denies unsafe code"));
            }
        }
    }
    for place in UNSAFE_ALLOWED {
        if !allowing.iter().any(|a| a == place) {
            found.push(format!("{place} is listed but allows no unsafe code"));
        }
    }
    found
}

#[test]
fn unsafe_code_lives_only_where_its_argument_is_written() {
    let found = unsafe_outside_its_places(&crate_sources());
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn an_unsafe_allowance_elsewhere_is_caught() {
    let mut crates = crate_sources();
    let (_, files) = crates
        .iter_mut()
        .find(|(k, _)| k.ends_with("store-sqlite/src"))
        .unwrap();
    let batch = files.iter_mut().find(|f| f.module == ["batch"]).unwrap();
    // Wrapped as rustfmt wraps an attribute with a long reason.
    batch
        .text
        .push_str("\n#[allow(\n    unsafe_code,\n    reason = \"...\"\n)]\nfn f() {}\n");
    let prepared = files.iter_mut().find(|f| f.module == ["prepared"]).unwrap();
    prepared.text = prepared.text.replace("unsafe_code", "dead_code");
    assert_eq!(
        unsafe_outside_its_places(&crates),
        [
            "store-sqlite/src:batch allows unsafe code",
            "store-sqlite/src:prepared is listed but allows no unsafe code"
        ]
    );
}
