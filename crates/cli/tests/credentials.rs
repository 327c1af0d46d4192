//! Operator credentials through the real socket and CLI: classes, roles (checked before the body is
//! read), named operators, rotation, revocation and recovery.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

fn call(daemon: &Daemon, token: Option<&str>, method: &str, path: &str, key: &str, body: &str) -> (u16, String) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json"), ("Idempotency-Key", key)];
    headers.extend(auth.as_deref().map(|a| ("Authorization", a)));
    let (status, body) = http_raw(&daemon.management_socket(), method, path, &headers, body);
    (status, body["error"].as_str().unwrap_or("").to_owned())
}

fn add_operator(daemon: &Daemon, name: &str, role: &str) -> String {
    let issued = daemon.json(&["auth", "operators", "add", name, "--role", role]);
    issued["token"].as_str().unwrap().to_owned()
}

#[test]
fn each_route_needs_its_role_and_the_right_credential_class() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (viewer, operator, admin) = (
        add_operator(&daemon, "viewer", "view"),
        add_operator(&daemon, "ops", "operate"),
        add_operator(&daemon, "adm", "admin"),
    );
    daemon.create_work("demo", "shell");
    wait_until("a held attempt", || {
        published_runs(tmp.path()).first().is_some_and(|(_, t)| t.exists())
    });
    let execution = read_token(&published_runs(tmp.path())[0].1);

    let work = json!({"scope": "demo", "binding": "shell"}).to_string();
    let config = json!({"config_text": shell_config("true")}).to_string();
    let issue = json!({"name": "later", "role": "view"}).to_string();
    let trace = json!({"type": "demo.requested"}).to_string();
    let garbage = "{not json";
    /// Method, path, body, and the answer for: no credential, an execution token, view, operate, admin.
    type Row<'a> = (&'a str, &'a str, &'a str, [(u16, &'a str); 5]);
    let rows: Vec<Row> = vec![
        (
            "GET",
            "/v1/work",
            "",
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (200, ""),
                (200, ""),
                (200, ""),
            ],
        ),
        (
            "POST",
            "/v1/work",
            &work,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (403, "forbidden_role"),
                (201, ""),
                (201, ""),
            ],
        ),
        (
            "POST",
            "/v1/work",
            garbage,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (403, "forbidden_role"),
                (400, "invalid_request"),
                (400, "invalid_request"),
            ],
        ),
        (
            "POST",
            "/v1/config/validate",
            &config,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (200, ""),
                (200, ""),
                (200, ""),
            ],
        ),
        (
            "POST",
            "/v1/config/apply",
            garbage,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (403, "forbidden_role"),
                (403, "forbidden_role"),
                (400, "invalid_request"),
            ],
        ),
        (
            "POST",
            "/v1/auth/operators",
            &issue,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (403, "forbidden_role"),
                (403, "forbidden_role"),
                (201, ""),
            ],
        ),
        (
            "POST",
            "/v1/scopes/demo/route/trace",
            &trace,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (200, ""),
                (200, ""),
                (200, ""),
            ],
        ),
        (
            "POST",
            "/v1/executions/nope/confirm-stopped",
            garbage,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (403, "forbidden_role"),
                (400, "invalid_request"),
                (400, "invalid_request"),
            ],
        ),
        (
            "POST",
            "/v1/auth/rotate",
            garbage,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (403, "forbidden_role"),
                (400, "invalid_request"),
                (400, "invalid_request"),
            ],
        ),
        (
            "POST",
            "/v1/auth/revoke",
            garbage,
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (403, "forbidden_role"),
                (400, "invalid_request"),
                (400, "invalid_request"),
            ],
        ),
        (
            "GET",
            "/v1/audit/operators",
            "",
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (200, ""),
                (200, ""),
                (200, ""),
            ],
        ),
        (
            "GET",
            "/v1/auth/operators",
            "",
            [
                (401, "unauthenticated"),
                (403, "wrong_credential_class"),
                (200, ""),
                (200, ""),
                (200, ""),
            ],
        ),
    ];
    // Every control takes `operate`, judged before its body is read, then parsed.
    let operate_controls = [
        "/v1/actions",
        "/v1/work/w/hold",
        "/v1/work/w/release",
        "/v1/work/w/rebind",
        "/v1/work/w/attach",
        "/v1/scopes/demo/reconcile",
    ];
    let rows: Vec<Row> = rows
        .into_iter()
        .chain(operate_controls.map(|path| {
            (
                "POST",
                path,
                garbage,
                [
                    (401, "unauthenticated"),
                    (403, "wrong_credential_class"),
                    (403, "forbidden_role"),
                    (400, "invalid_request"),
                    (400, "invalid_request"),
                ],
            )
        }))
        .collect();
    let credentials = [
        None,
        Some(execution.as_str()),
        Some(viewer.as_str()),
        Some(operator.as_str()),
        Some(admin.as_str()),
    ];
    for (row, (method, path, body, expected)) in rows.iter().enumerate() {
        for (column, credential) in credentials.iter().enumerate() {
            let key = format!("matrix-{row}-{column}");
            let got = call(&daemon, *credential, method, path, &key, body);
            assert_eq!(
                (got.0, got.1.as_str()),
                expected[column],
                "{method} {path} with credential {column}"
            );
        }
    }
}

#[test]
fn operators_are_stamped_as_actors_and_their_keys_never_meet() {
    let daemon = Daemon::start(None);
    let (ops, adm) = (
        add_operator(&daemon, "ops", "operate"),
        add_operator(&daemon, "adm", "admin"),
    );
    let event = |ty: &str| json!({"type": ty, "scope": "setup"}).to_string();
    let socket = daemon.management_socket();
    let emit = |token: &str, ty: &str| {
        let auth = format!("Bearer {token}");
        let headers = [
            ("Content-Type", "application/json"),
            ("Idempotency-Key", "same-key"),
            ("Authorization", auth.as_str()),
        ];
        http_raw(&socket, "POST", "/v1/events", &headers, &event(ty))
    };
    let (status_a, a) = emit(&ops, "demo.a");
    let (status_b, b) = emit(&adm, "demo.b");
    assert_eq!(
        (status_a, status_b),
        (201, 201),
        "two operators' requests under one key are two requests"
    );
    assert_ne!(a["id"], b["id"]);
    assert_eq!(a["actor"], "operator:ops");
    assert_eq!(b["actor"], "operator:adm");
    let listed = daemon.json(&["auth", "operators"]);
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["adm", "local", "ops"]);
    assert!(!listed.to_string().contains(&ops), "the listing carries no token");
}

#[test]
fn rotation_revocation_and_recovery() {
    let mut daemon = Daemon::start(None);
    let ops = add_operator(&daemon, "ops", "operate");
    let ops_file = daemon.scratch().join("ops.token");
    std::fs::write(&ops_file, &ops).unwrap();
    let as_ops = |args: &[&str]| {
        let mut all = vec!["--token-file", ops_file.to_str().unwrap()];
        all.extend_from_slice(args);
        daemon.cli(&all)
    };
    assert!(as_ops(&["auth", "rotate"]).status.success());
    let rotated = read_token(&ops_file);
    assert_ne!(rotated, ops);
    assert_eq!(mode(&ops_file), 0o600);
    assert_eq!(
        call(&daemon, Some(&ops), "GET", "/v1/work", "k", "").0,
        401,
        "the rotated-away token is revoked"
    );
    assert_eq!(call(&daemon, Some(&rotated), "GET", "/v1/work", "k", "").0, 200);

    let ids = daemon.json(&["auth", "operators"])["items"].clone();
    let id_of = |name: &str| {
        ids.as_array().unwrap().iter().find(|o| o["name"] == name).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let refused = as_ops(&["--json", "auth", "revoke", &id_of("local")]);
    assert_eq!(
        serde_json::from_slice::<Value>(&refused.stdout).unwrap()["error"],
        "forbidden_role",
        "nobody else revokes the owner"
    );
    assert!(
        daemon.cli(&["auth", "revoke", &id_of("ops")]).status.success(),
        "the owner (admin) revokes a named operator"
    );
    assert_eq!(call(&daemon, Some(&rotated), "GET", "/v1/work", "k", "").0, 401);

    let owner = daemon.operator_token();
    assert!(
        daemon.cli(&["auth", "revoke", &id_of("local")]).status.success(),
        "the owner revokes its own"
    );
    assert_eq!(call(&daemon, Some(&owner), "GET", "/v1/work", "k", "").0, 401);
    let locked = daemon.cli(&["auth", "recover"]);
    assert_eq!(
        locked.status.code(),
        Some(2),
        "recover needs the daemon stopped: it takes the state lock"
    );
    daemon.kill();
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["auth", "recover", "--state"])
        .arg(&daemon.state)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    daemon.launch();
    assert_ne!(daemon.operator_token(), owner);
    assert!(
        daemon.cli(&["health"]).status.success(),
        "the recovered owner's credential works"
    );
}

#[test]
fn an_execution_token_is_revoked_by_its_id() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    assert_eq!(toolbelt_call(&socket, &token, "read_context", json!({})).0, 200);
    let execution = daemon.first_execution(&work);
    let (status, tokens) = http(
        &daemon.management_socket(),
        "GET",
        &format!("/v1/executions/{execution}/tokens"),
        Some(&daemon.operator_token()),
        None,
    );
    assert_eq!(status, 200);
    let token_id = tokens["items"][0]["id"].as_str().unwrap().to_owned();
    assert!(!tokens.to_string().contains(&token), "ids, never tokens");
    assert!(daemon.cli(&["auth", "revoke", &token_id]).status.success());
    let (status, body) = toolbelt_call(&socket, &token, "read_context", json!({}));
    assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")));
}

#[test]
fn revoking_is_keyed_and_the_operators_list_keeps_revoked_credentials() {
    let daemon = Daemon::start(None);
    let ops = add_operator(&daemon, "ops", "operate");
    let owner = daemon.operator_token();
    let ids = daemon.json(&["auth", "operators"]);
    let ops_id = ids["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "ops")
        .unwrap()["id"]
        .clone();
    let body = json!({"token_id": ops_id}).to_string();
    let auth = format!("Bearer {owner}");
    let headers = [("Content-Type", "application/json"), ("Authorization", auth.as_str())];
    let (status, answer) = http_raw(&daemon.management_socket(), "POST", "/v1/auth/revoke", &headers, &body);
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("idempotency_key_required"))
    );
    assert_eq!(
        call(&daemon, Some(&ops), "GET", "/v1/work", "k", "").0,
        200,
        "nothing was revoked"
    );

    let (status, _) = call(&daemon, Some(&owner), "POST", "/v1/auth/revoke", "revoke-ops", &body);
    assert_eq!(status, 200);
    let replayed = call(&daemon, Some(&owner), "POST", "/v1/auth/revoke", "revoke-ops", &body);
    assert_eq!(replayed.0, 200, "a retried revoke answers the same");
    assert_eq!(call(&daemon, Some(&ops), "GET", "/v1/work", "k", "").0, 401);

    let listed = daemon.json(&["auth", "operators"]);
    let revoked = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "ops")
        .unwrap()
        .clone();
    assert_eq!(revoked["id"], ops_id);
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    assert_eq!(revoked["revoked_by"], "operator:local");
    let active = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "local")
        .unwrap()
        .clone();
    assert!(
        active["revoked_at"].is_null() && active["revoked_by"].is_null(),
        "{active}"
    );
}

#[test]
fn two_authorization_headers_are_refused_on_both_sockets() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let owner = format!("Bearer {}", daemon.operator_token());
    let execution = format!("Bearer {}", read_token(&token_file));
    for (target, path, method, body, good) in [
        (daemon.management_socket(), "/v1/health", "GET", "", owner.as_str()),
        (
            socket.clone(),
            "/v1/toolbelt/call",
            "POST",
            r#"{"operation":"read_context","input":{}}"#,
            execution.as_str(),
        ),
    ] {
        for (first, second) in [(good, "Bearer junk"), ("Bearer junk", good), (good, good)] {
            let headers = [
                ("Content-Type", "application/json"),
                ("Authorization", first),
                ("Authorization", second),
            ];
            let (status, answer) = http_raw(&target, method, path, &headers, body);
            assert_eq!(
                (status, answer["error"].as_str()),
                (400, Some("invalid_request")),
                "{path}"
            );
        }
        let single = [("Content-Type", "application/json"), ("Authorization", good)];
        assert_eq!(
            http_raw(&target, method, path, &single, body).0,
            200,
            "the negative control: one header passes"
        );
    }
}
