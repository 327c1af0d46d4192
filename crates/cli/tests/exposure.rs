//! Nothing secret leaves the daemon: after a run with a planted secret value, a planted reference,
//! an execution token and an operator token, every GET route of the management API (from the
//! server's own route table) and the store's files are scanned for all four.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

const SECRET: &str = "planted-secret-value-4f1e";
const REFERENCE: &str = "PLANTED_REFERENCE_NAME_77";

#[test]
fn no_response_and_no_store_file_carries_a_secret_a_reference_or_a_token() {
    let daemon = Daemon::start_with(|scratch| {
        plant_secrets(scratch, json!({"api": SECRET}));
        let mut config: Value = serde_json::from_str(&shell_config(&publish_and_hold(scratch))).unwrap();
        config["secrets"] = json!({"api_key": "file:api", "unused": format!("env:{REFERENCE}")});
        config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = json!(["api_key"]);
        config.to_string()
    });
    let (work, socket, token_file) = hold_one(&daemon, daemon.scratch());
    let execution_token = read_token(&token_file);
    let (status, emitted) = toolbelt_call(&socket, &execution_token, "emit", json!({"type": "demo.x"}));
    assert_eq!(status, 200);
    std::fs::write(daemon.scratch().join("release"), "").unwrap();
    daemon.await_work(&work, "succeeded");
    let execution = daemon.json(&["executions", "list", "--work", &work])["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let event = emitted["output"]["event_id"].as_str().unwrap().to_owned();
    let operator = daemon.operator_token();

    let mut seen = String::new();
    for (path, method) in conduit_server::management_routes() {
        // No package is installed and no call parked here (their lists are read, empty), so no
        // single one exists.
        if method != "get" || path == "/v1/packages/{name}" || path == "/v1/approvals/{id}" {
            continue;
        }
        let id = match path {
            p if p.starts_with("/v1/work/") => work.clone(),
            p if p.starts_with("/v1/events/") => event.clone(),
            p if p.starts_with("/v1/executions/") => execution.clone(),
            p if p.starts_with("/v1/artifacts/") => format!("log%3A{execution}"),
            p if p.starts_with("/v1/scopes/") => "demo".to_owned(),
            p if p.starts_with("/v1/tools/") => "emit".to_owned(),
            _ => String::new(),
        };
        let path = match path {
            "/v1/ids" => format!("/v1/ids?kind=work&prefix={}", &work[..8]),
            p => p.replace("{id}", &id),
        };
        let response = http_response(
            &daemon.management_socket(),
            "GET",
            &path,
            &[("Authorization", &format!("Bearer {operator}"))],
            "",
        );
        assert!(response.starts_with("HTTP/1.1 200"), "{path}: {response}");
        seen.push_str(&response);
    }
    let store = store_files(&daemon.state);
    for (what, planted) in [
        ("a secret", SECRET),
        ("a reference", REFERENCE),
        ("an execution token", &execution_token),
        ("an operator token", &operator),
    ] {
        assert!(!seen.contains(planted), "a response carries {what}");
        assert!(!contains(&store, planted), "the store carries {what}");
    }
    assert!(
        !daemon.log().contains(SECRET) && !daemon.log().contains(REFERENCE),
        "the daemon's log carries a secret or reference"
    );
}
