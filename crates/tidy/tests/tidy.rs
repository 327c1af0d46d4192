//! Structural invariants of the workspace, read from `cargo metadata`. Each check has a negative
//! control that doctors the graph and sees the check fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use conduit_tidy::Graph;

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
    let out = Command::new("rustc").arg("-vV").output().expect("rustc -vV runs");
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
        ("conduit-config", "keyring"),
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
