//! Installed packages through the real daemon and CLI: the RFC 0076 install gate (a granted
//! install, the refusal payload byte for byte, a non-gating host projecting requirements, a grant
//! tightened after approval), manifest refusals, name conflicts, and removal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::{json, Value};

/// Writes a package directory: its manifest and an executable entry.
fn package(root: &Path, name: &str, requires: &[&str], operation: &str) -> PathBuf {
    let dir = root.join(format!("pkg-{name}"));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let manifest = json!({"name": name, "version": "1.0.0",
        "runtime": {"language": "process", "entry": "bin/run", "requires": requires},
        "provides": {"operations": [{"name": operation, "summary": "Do it.", "input_schema": {"type": "object"}, "safety_tier": "read"}]},
        "permissions": ["http.safeFetch"]});
    std::fs::write(dir.join("open-conduit.json"), manifest.to_string()).unwrap();
    std::fs::write(dir.join("bin/run"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(dir.join("bin/run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn install(daemon: &Daemon, dir: &Path) -> (Option<i32>, Value) {
    daemon.json_unchecked(&["packages", "install", dir.to_str().unwrap()])
}

#[test]
fn a_granted_package_installs_and_shows_what_it_requires_and_asks_for() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "notes", &["clock"], "notes.view");
    let (status, listing) = install(&daemon, &dir);
    assert_eq!(status, Some(0), "{listing}");
    assert_eq!(listing["manifest"], "notes@1.0.0");
    assert_eq!(
        (listing["requires"].clone(), listing["status"].clone()),
        (json!(["clock"]), json!("ok"))
    );
    assert_eq!(listing["permissions"], json!(["http.safeFetch"]));
    assert_eq!(
        listing["approved"],
        json!({"grant": ["crypto", "clock"], "gating": true})
    );
    let copy = daemon.state.join("packages/notes/bin/run");
    assert_eq!(
        mode(&copy),
        0o700,
        "the installed copy is owner-only and keeps its execute bit"
    );

    let human = daemon.cli(&["packages", "show", "notes"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("requires:    clock") && text.contains("permissions: http.safeFetch"),
        "{text}"
    );
    assert_eq!(daemon.json(&["packages", "list"])["items"][0]["name"], "notes");
    assert_eq!(
        daemon.json(&["package", "list"])["items"][0]["name"],
        "notes",
        "the singular stays an alias"
    );
    let (status, etag) = revalidate(&daemon, "/v1/packages/notes", None);
    assert_eq!(status, 200);
    assert_eq!(
        revalidate(&daemon, "/v1/packages/notes", etag.as_deref()).0,
        304,
        "a revision"
    );

    assert_eq!(daemon.json(&["packages", "remove", "notes"])["removed"], "notes");
    assert!(!daemon.state.join("packages/notes").exists());
    assert_eq!(
        daemon.json_unchecked(&["packages", "show", "notes"]).1["error"],
        "not_found"
    );
}

#[test]
fn installed_packages_page_with_cursors_by_name() {
    let daemon = Daemon::start(None);
    for name in ["gamma", "alpha", "beta"] {
        let dir = package(daemon.scratch(), name, &["clock"], &format!("{name}.view"));
        assert_eq!(install(&daemon, &dir).0, Some(0));
    }
    let owner = daemon.operator_token();
    let mut path = "/v1/packages?limit=2".to_owned();
    let mut names = Vec::new();
    loop {
        let (status, page) = http(&daemon.management_socket(), "GET", &path, Some(&owner), None);
        assert_eq!(status, 200, "{page}");
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/packages?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(names, ["alpha", "beta", "gamma"]);
    assert_eq!(
        daemon.json(&["packages", "list"])["items"].as_array().unwrap().len(),
        3,
        "the CLI follows"
    );
}

/// RFC 0078 §C: every descriptor the catalog serves, an installed package's included, validates
/// against the descriptor schema.
#[test]
fn every_served_descriptor_an_installed_packages_included_validates_against_the_schema() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "notes", &["clock"], "notes.view");
    let path = dir.join("open-conduit.json");
    let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["provides"]["operations"][0]["output_schema"] = json!({"type": "object", "required": ["text"]});
    std::fs::write(&path, manifest.to_string()).unwrap();
    assert_eq!(install(&daemon, &dir).0, Some(0));
    let schema_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas/tool-descriptor.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let schema = jsonschema::validator_for(&schema).unwrap();
    let (status, tools) = http(
        &daemon.management_socket(),
        "GET",
        "/v1/tools",
        Some(&daemon.operator_token()),
        None,
    );
    assert_eq!(status, 200);
    let tools = tools.as_array().unwrap();
    let served = tools
        .iter()
        .find(|t| t["toolId"] == "notes.view")
        .expect("the package's tool");
    assert_eq!(
        (
            served["source"].as_str(),
            served["outputSchema"]["required"][0].as_str()
        ),
        (Some("node-pack"), Some("text"))
    );
    for tool in tools {
        assert!(schema.is_valid(tool), "{tool}");
    }
    let (_, discovery) = http(&daemon.management_socket(), "GET", "/.well-known/openwop", None, None);
    assert_eq!(
        discovery["toolCatalog"]["sources"],
        json!(["host-extension", "node-pack"])
    );
    assert_eq!(
        discovery["packRuntime"],
        json!({"requires": ["net.dns", "net.outbound", "crypto", "subprocess", "fs.read", "fs.write", "env.read", "clock"],
               "grant": ["crypto", "clock"], "gating": true})
    );
}

#[test]
fn a_gating_host_refuses_an_unmet_requirement_with_exactly_the_rfc_payload() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "cron", &["clock", "subprocess"], "cron.schedule");
    let body = json!({"dir": dir}).to_string();
    let auth = format!("Bearer {}", daemon.operator_token());
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Idempotency-Key", "install-cron"),
    ];
    let response = http_response(&daemon.management_socket(), "POST", "/v1/packages", &headers, &body);
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    let payload = response.split("\r\n\r\n").nth(1).unwrap();
    assert!(
        payload.starts_with(
            r#"{"error":"pack_runtime_requirement_unmet","unmet":["subprocess"],"manifest":"cron@1.0.0","advice":""#
        ),
        "{payload}"
    );
    let keys: Vec<String> = serde_json::from_str::<Value>(payload)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 4, "exactly error, unmet, manifest, advice");

    let (status, envelope) = install(&daemon, &dir);
    assert_eq!(status, Some(1));
    assert_eq!(
        envelope,
        serde_json::from_str::<Value>(payload).unwrap(),
        "--json prints the API's envelope"
    );
    assert!(
        daemon.json(&["packages", "list"])["items"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing installed"
    );
}

#[test]
fn a_non_gating_host_installs_and_projects_what_a_package_requires() {
    let daemon = Daemon::start(None);
    daemon.json(&["config", "set", "/packages", r#"{"gating": false}"#]);
    let dir = package(daemon.scratch(), "cron", &["subprocess", "fs.write"], "cron.schedule");
    let (status, listing) = install(&daemon, &dir);
    assert_eq!(status, Some(0), "{listing}");
    assert_eq!(listing["requires"], json!(["subprocess", "fs.write"]));
    assert_eq!(listing["approved"]["gating"], false);
    assert_eq!(listing["status"], "ok");
}

#[test]
fn a_grant_tightened_after_approval_flags_the_package() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "notes", &["clock"], "notes.view");
    assert_eq!(install(&daemon, &dir).0, Some(0));
    daemon.json(&["config", "set", "/packages", r#"{"grant": ["crypto"]}"#]);
    let listed = daemon.json(&["packages", "list"])["items"][0].clone();
    assert_eq!(
        (listed["status"].as_str(), listed["unmet"].clone()),
        (Some("requirement_unmet"), json!(["clock"]))
    );
    assert_eq!(
        listed["approved"]["grant"],
        json!(["crypto", "clock"]),
        "the approval keeps what it was"
    );
    let doctor = daemon.json_unchecked(&["doctor"]).1;
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "packages")
        .cloned();
    assert_eq!(check.map(|c| c["status"].clone()), Some(json!("fail")), "{doctor}");

    let d = daemon.scratch().display().to_string();
    let mut config = granting(
        &format!("os call notes.view 2> {d}/refused.txt; os outcome succeeded"),
        json!(["read_context", "declare_outcome", "notes.view"]),
    );
    config["packages"] = json!({"grant": ["crypto"]});
    daemon.apply(&config);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let refused = std::fs::read_to_string(daemon.scratch().join("refused.txt")).unwrap();
    assert!(
        refused.starts_with("pack_runtime_requirement_unmet:"),
        "its operations are refused: {refused}"
    );

    daemon.json(&["config", "set", "/packages", r#"{"grant": ["crypto", "clock"]}"#]);
    assert_eq!(daemon.json(&["packages", "list"])["items"][0]["status"], "ok");
}

/// RFC 0078 §B/§F-2 and RFC 0076: once the grant set no longer covers a package's requirement, its
/// tools leave every catalog that lists what a caller could call, and a call is refused with the
/// same payload the install gate gives.
#[test]
fn a_package_whose_requirement_is_unmet_is_hidden_and_refused_with_the_rfc_payload() {
    let tmp = meeting();
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "notes", &["clock"], "notes.view");
    assert_eq!(install(&daemon, &dir).0, Some(0));
    let mut config = granting(
        &publish_and_hold(tmp.path()),
        json!(["read_context", "declare_outcome", "notes.view"]),
    );
    config["packages"] = json!({"grant": ["crypto", "clock"]});
    daemon.apply(&config);
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let ids = |path: &str| -> Vec<String> {
        let (status, tools) = http(&socket, "GET", path, Some(&token), None);
        assert_eq!(status, 200, "{path}: {tools}");
        tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["toolId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids("/v1/tools"), ["declare_outcome", "notes.view", "read_context"]);
    assert_eq!(ids("/v1/tools?source=node-pack"), ["notes.view"]);
    assert_eq!(
        ids("/v1/tools?source=host-extension"),
        ["declare_outcome", "read_context"]
    );
    assert!(ids("/v1/tools?source=workflow").is_empty());
    assert_eq!(
        http(&socket, "GET", "/v1/tools?source=plugin", Some(&token), None).0,
        400
    );

    config["packages"] = json!({"grant": ["crypto"]});
    daemon.apply(&config);
    assert_eq!(
        ids("/v1/tools"),
        ["declare_outcome", "read_context"],
        "hidden once unmet"
    );
    assert_eq!(http(&socket, "GET", "/v1/tools/notes.view", Some(&token), None).0, 404);
    let management = |path: &str| {
        http(
            &daemon.management_socket(),
            "GET",
            path,
            Some(&daemon.operator_token()),
            None,
        )
        .1
    };
    let scoped = management("/v1/tools?scope=demo");
    assert!(
        !scoped.as_array().unwrap().iter().any(|t| t["toolId"] == "notes.view"),
        "{scoped}"
    );
    assert_eq!(
        management("/v1/tools/notes.view")["toolId"],
        "notes.view",
        "still registered"
    );

    let auth = format!("Bearer {token}");
    let body = json!({"operation": "notes.view", "input": {}}).to_string();
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let (status, refused) = http_raw(&socket, "POST", "/v1/toolbelt/call", &headers, &body);
    assert_eq!(status, 400, "{refused}");
    let mut keys: Vec<&String> = refused.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["advice", "error", "manifest", "unmet"],
        "exactly the RFC payload: {refused}"
    );
    assert_eq!(
        (
            refused["error"].as_str(),
            refused["unmet"].clone(),
            refused["manifest"].as_str()
        ),
        (
            Some("pack_runtime_requirement_unmet"),
            json!(["clock"]),
            Some("notes@1.0.0")
        )
    );
    std::fs::write(tmp.path().join("release"), "").unwrap();
}

#[test]
fn manifests_and_names_that_cannot_be_installed_are_refused() {
    let daemon = Daemon::start(None);
    let raw = package(daemon.scratch(), "raw", &["node:dns/promises"], "raw.op");
    let (status, refused) = install(&daemon, &raw);
    assert_eq!((status, refused["error"].as_str()), (Some(1), Some("invalid_manifest")));
    assert!(
        refused["message"].as_str().unwrap().contains("node:dns/promises"),
        "the token is named"
    );
    assert_eq!(refused["pointer"], "/runtime/requires/0");

    let outside = package(daemon.scratch(), "sneaky", &[], "notes.view");
    assert_eq!(
        install(&daemon, &outside).1["error"],
        "invalid_manifest",
        "an operation outside its namespace"
    );
    let host = package(daemon.scratch(), "http", &[], "http.get");
    assert_eq!(
        install(&daemon, &host).1["error"],
        "conflict",
        "the host's own registration name"
    );
    for (field, schema, pointer) in [
        (
            "output_schema",
            json!("not-a-schema"),
            "/provides/operations/0/output_schema",
        ),
        (
            "input_schema",
            json!({"type": 5}),
            "/provides/operations/0/input_schema",
        ),
    ] {
        let dir = package(daemon.scratch(), "schemas", &[], "schemas.op");
        let path = dir.join("open-conduit.json");
        let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["provides"]["operations"][0][field] = schema;
        std::fs::write(&path, manifest.to_string()).unwrap();
        let (_, refused) = install(&daemon, &dir);
        assert_eq!(
            (refused["error"].as_str(), refused["pointer"].as_str()),
            (Some("invalid_manifest"), Some(pointer))
        );
    }
    let missing = daemon.scratch().join("nothing-here");
    assert_eq!(install(&daemon, &missing).1["error"], "invalid_manifest");

    let linked = package(daemon.scratch(), "linked", &[], "linked.op");
    std::os::unix::fs::symlink("/etc/passwd", linked.join("passwd")).unwrap();
    assert_eq!(
        install(&daemon, &linked).1["error"],
        "invalid_manifest",
        "a symbolic link in the package"
    );
    assert!(!daemon.state.join("packages/linked").exists());
}

/// The worked example in `examples/packages/notes`, installed and called from a real execution:
/// an operation answered by the package's process (with an emission), and one that calls the host
/// back with `http.safeFetch` (a local server through the test allowance, then a metadata address
/// the guard refuses), each callback audited on the Work's log.
#[test]
fn the_example_package_answers_an_execution_and_fetches_through_the_host() {
    let (port, heads) = test_server();
    let allow = format!("127.0.0.1:{port}");
    let env = [("OPEN_CONDUIT_TEST_FETCH_ALLOW", allow.as_str())];
    let daemon = Daemon::start_with_env(&env, |_| shell_config("true"));
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/notes");
    assert_eq!(install(&daemon, &example).0, Some(0), "served at once, no restart");

    let d = daemon.scratch().display().to_string();
    let script = format!(
        "os call notes.echo --input '{{\"text\":\"hi\"}}' > {d}/echo.json; \
         os call notes.fetch --input '{{\"url\":\"http://127.0.0.1:{port}/note\"}}' > {d}/fetch.json; \
         os call notes.fetch --input '{{\"url\":\"http://169.254.169.254/\"}}' 2> {d}/blocked.txt; \
         os outcome succeeded"
    );
    let config = granting(
        &script,
        json!([
            "emit",
            "read_context",
            "declare_outcome",
            "wait",
            "create_work",
            "@notes.reader"
        ]),
    );
    daemon.apply(&config);

    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let read = |name: &str| std::fs::read_to_string(daemon.scratch().join(name)).unwrap();
    let echoed: Value = serde_json::from_str(&read("echo.json")).unwrap_or(Value::Null);
    assert_eq!(echoed, json!({"text": "hi", "package": "notes"}), "{}", daemon.log());
    let fetched: Value = serde_json::from_str(&read("fetch.json")).unwrap_or(Value::Null);
    assert_eq!(fetched, json!({"status": 200, "body": "hello"}));
    assert!(
        read("blocked.txt").starts_with("ssrf_blocked:"),
        "{}",
        read("blocked.txt")
    );
    assert_eq!(heads.lock().unwrap().len(), 1, "the blocked fetch connected nowhere");

    let events = daemon.events(&work);
    assert!(
        events.iter().any(|e| e["type"] == "notes.echoed"),
        "the package's emission"
    );
    let in_use = daemon.json_unchecked(&["packages", "remove", "notes"]);
    assert_eq!(
        in_use.1["error"], "conflict",
        "the active configuration grants its toolset"
    );
    let fetches: Vec<&Value> = events
        .iter()
        .filter(|e| e["data"]["toolName"] == "http.safeFetch")
        .collect();
    let kinds: Vec<(&str, &str)> = fetches
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["data"]["status"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        kinds,
        [
            ("agent.toolCalled", ""),
            ("agent.toolReturned", "ok"),
            ("agent.toolCalled", ""),
            ("agent.toolReturned", "error")
        ]
    );
    assert!(fetches
        .iter()
        .filter(|e| e["type"] == "agent.toolCalled")
        .all(|e| e["data"]["transport"] == "http" && e["data"]["principal"] == "package:notes"));
    assert_eq!(fetches[1]["causation"]["parent"], fetches[0]["id"]);
    // The package's own operation is the host running it: native; its callbacks carry `http`.
    assert!(events
        .iter()
        .filter(|e| e["type"] == "agent.toolCalled" && e["data"]["toolName"] == "notes.fetch")
        .all(|e| e["data"]["transport"] == "native"));
}

/// A package that did not declare `env.read` gets a scrubbed environment: a system PATH, a locale
/// and HOME, none of the daemon's variables.
#[test]
fn a_package_without_env_read_gets_a_scrubbed_environment() {
    let daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_PLANTED", "daemon-only")], |_| shell_config("true"));
    let dir = package(daemon.scratch(), "envcheck", &[], "envcheck.names");
    let entry = "#!/usr/bin/env python3\nimport json, os, sys\nfor line in sys.stdin:\n    m = json.loads(line)\n    result = {\"output\": sorted(os.environ)} if m[\"method\"] == \"operation.call\" else {}\n    print(json.dumps({\"jsonrpc\": \"2.0\", \"id\": m[\"id\"], \"result\": result}), flush=True)\n";
    std::fs::write(dir.join("bin/run"), entry).unwrap();
    assert_eq!(install(&daemon, &dir).0, Some(0));
    let d = daemon.scratch().display().to_string();
    let config = granting(
        &format!("os call envcheck.names > {d}/names.json; os outcome succeeded"),
        json!(["read_context", "declare_outcome", "envcheck.names"]),
    );
    daemon.apply(&config);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let names: Value =
        serde_json::from_str(&std::fs::read_to_string(daemon.scratch().join("names.json")).unwrap()).unwrap();
    assert_eq!(names, json!(["HOME", "LANG", "PATH", "TMPDIR"]));
}

/// A package's operation may answer a translated wait: the calling segment parks on it (in the
/// package's own key namespace), and an event on that key wakes the Work for its next attempt.
#[test]
fn a_packages_translated_wait_parks_the_work_until_its_event() {
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "watcher", &[], "watcher.until");
    let entry = "#!/usr/bin/env python3\nimport json, sys\nfor line in sys.stdin:\n    m = json.loads(line)\n    result = {\"output\": {\"watching\": \"watcher:1\"}, \"wait\": {\"types\": [\"watcher.seen\"], \"keys\": [\"watcher:1\"], \"timeout\": \"1h\"}} if m[\"method\"] == \"operation.call\" else {}\n    print(json.dumps({\"jsonrpc\": \"2.0\", \"id\": m[\"id\"], \"result\": result}), flush=True)\n";
    std::fs::write(dir.join("bin/run"), entry).unwrap();
    assert_eq!(install(&daemon, &dir).0, Some(0));
    let d = daemon.scratch().display().to_string();
    let script = format!(
        "if [ -f {d}/woken ]; then os outcome succeeded; else touch {d}/woken; \
         os call watcher.until > {d}/answer.json 2> {d}/told.txt; echo $? > {d}/status; fi"
    );
    daemon.apply(&granting(
        &script,
        json!(["read_context", "declare_outcome", "watcher.until"]),
    ));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let read = |name: &str| std::fs::read_to_string(daemon.scratch().join(name)).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&read("answer.json")).unwrap(),
        json!({"watching": "watcher:1"})
    );
    assert_eq!(read("status").trim(), "3", "os exits 3: the segment should end");
    assert!(
        read("told.txt").contains("`watcher.until` declared a wait"),
        "{}",
        read("told.txt")
    );
    assert_eq!(daemon.emit_event("demo", "watcher.seen", "watcher:2"), 201);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        daemon.json(&["work", "get", &work])["state"],
        "waiting",
        "another key wakes nothing"
    );
    assert_eq!(daemon.emit_event("demo", "watcher.seen", "watcher:1"), 201);
    daemon.await_work(&work, "succeeded");
    assert_eq!(daemon.attempts(&work).len(), 2);
}

/// An installed gate over the example package's operation: it is asked only in the scopes the
/// configuration lists, its refusal reaches the caller, and a garbage answer, a crash or a hang
/// fails closed. A package without the `operation.gate` permission gets no gate.
#[test]
fn an_installed_gate_decides_and_fails_closed() {
    let daemon = Daemon::start(None);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/notes");
    assert_eq!(install(&daemon, &example).0, Some(0));
    let guard = "#!/usr/bin/env python3\nimport json, sys, time\nfor line in sys.stdin:\n    m = json.loads(line)\n    answer = {\"jsonrpc\": \"2.0\", \"id\": m[\"id\"], \"result\": {}}\n    if m[\"method\"] == \"operation.gate\":\n        mode = m[\"params\"][\"input\"][\"text\"]\n        if mode == \"crash\":\n            sys.exit(1)\n        if mode == \"hang\":\n            time.sleep(60)\n        answer[\"result\"] = {\"decision\": \"pass\" if mode == \"pass\" else \"maybe\"}\n        if mode == \"refuse\":\n            answer = {\"jsonrpc\": \"2.0\", \"id\": m[\"id\"], \"error\": {\"code\": -32000, \"message\": \"not today\", \"data\": {\"code\": \"guard_refused\"}}}\n    print(json.dumps(answer), flush=True)\n";
    // `lax` would refuse every call, but without the permission its gate is never installed.
    let refuse_all = "#!/usr/bin/env python3\nimport json, sys\nfor line in sys.stdin:\n    m = json.loads(line)\n    print(json.dumps({\"jsonrpc\": \"2.0\", \"id\": m[\"id\"], \"error\": {\"code\": -32000, \"message\": \"never\", \"data\": {\"code\": \"lax_refused\"}}}), flush=True)\n";
    for (name, permissions, entry) in [
        ("guard", json!(["operation.gate"]), guard),
        ("lax", json!([]), refuse_all),
    ] {
        let dir = package(daemon.scratch(), name, &[], &format!("{name}.op"));
        let mut manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("open-conduit.json")).unwrap()).unwrap();
        manifest["provides"]["operation_gate"] = json!(true);
        manifest["permissions"] = permissions;
        std::fs::write(dir.join("open-conduit.json"), manifest.to_string()).unwrap();
        std::fs::write(dir.join("bin/run"), entry).unwrap();
        let (status, listing) = install(&daemon, &dir);
        assert_eq!(status, Some(0), "{listing}");
    }
    assert_eq!(daemon.json(&["packages", "show", "guard"])["gate"], "installed");
    assert!(daemon.json(&["packages", "show", "lax"])["gate"]
        .as_str()
        .unwrap()
        .starts_with("not installed"));
    // Catalog honesty: a package's gate may park other tools, so their approval is conditional.
    let tool = |id: &str| {
        let path = format!("/v1/tools/{id}");
        http(
            &daemon.management_socket(),
            "GET",
            &path,
            Some(&daemon.operator_token()),
            None,
        )
        .1
    };
    assert_eq!(tool("notes.echo")["approval"], "conditional");
    assert_eq!(
        tool("guard.op")["approval"],
        "never",
        "its own gate is not asked about it"
    );
    assert_eq!(tool("emit")["approval"], "never", "builtins pass no gate");

    let d = daemon.scratch().display().to_string();
    let script = format!(
        "for m in pass refuse garbage crash hang; do \
         os call notes.echo --input \"{{\\\"text\\\":\\\"$m\\\"}}\" > {d}/out-$m.json 2> {d}/err-$m.txt; done; \
         os outcome succeeded"
    );
    let mut config = granting(&script, json!(["read_context", "declare_outcome", "notes.echo"]));
    config["packages"] = json!({"gates": {"guard": ["demo"], "lax": ["demo"]}});
    daemon.apply(&config);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let read = |name: &str| std::fs::read_to_string(daemon.scratch().join(name)).unwrap();
    assert!(
        read("out-pass.json").contains("\"text\": \"pass\""),
        "{}",
        read("err-pass.txt")
    );
    assert!(
        read("err-refuse.txt").starts_with("guard_refused: not today"),
        "{}",
        read("err-refuse.txt")
    );
    for mode in ["garbage", "crash", "hang"] {
        assert!(
            read(&format!("err-{mode}.txt")).starts_with("gate_failed:"),
            "{mode}: {}",
            read(&format!("err-{mode}.txt"))
        );
    }
}

/// A package probe: for `{"probe": ...}` it tries one primitive and answers `allowed` or `refused`.
fn probe_entry(outside: &Path, config: &Path, port: u16) -> String {
    let (outside, config) = (outside.display(), config.display());
    format!(
        r#"#!/usr/bin/env python3
import json, os, socket, subprocess, sys
def attempt(probe):
    if probe == "read":
        open("{outside}/readable").read()
    elif probe == "config":
        open("{config}").read()
    elif probe == "write":
        open("{outside}/written-%d" % os.getpid(), "w").write("x")
    elif probe == "exec":
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
    elif probe == "tcp":
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
for line in sys.stdin:
    m = json.loads(line)
    result = {{}}
    if m["method"] == "operation.call":
        try:
            attempt(m["params"]["input"]["probe"])
            result = {{"output": "allowed"}}
        except Exception:
            result = {{"output": "refused"}}
    print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": result}}), flush=True)
"#
    )
}

/// Each `runtime.requires` token is enforced: the primitive is refused to a package that did not
/// declare it and allowed to one that did (reading a file outside the package, writing one,
/// running `/bin/sh`, opening a TCP connection); `net.dns` alone opens no TCP connection but to
/// port 53. `fs.read` still does not reach the daemon's configuration file.
#[test]
fn each_runtime_requirement_is_enforced_refused_without_it_and_allowed_with_it() {
    let (port, heads) = test_server();
    let grant = json!([
        "net.outbound",
        "net.dns",
        "fs.read",
        "fs.write",
        "subprocess",
        "crypto",
        "clock"
    ]);
    // A configuration file of its own, outside the state directory, for the `config` probe.
    let daemon = Daemon::start(Some(&shell_config("true")));
    daemon.json(&["config", "set", "/packages", &json!({"grant": grant}).to_string()]);
    let outside = daemon.scratch().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("readable"), "text").unwrap();
    let packages = [
        ("bare", vec![]),
        ("reader", vec!["fs.read"]),
        ("writer", vec!["fs.write"]),
        ("spawner", vec!["subprocess"]),
        ("dialer", vec!["net.outbound"]),
        ("resolver", vec!["net.dns"]),
    ];
    for (name, requires) in &packages {
        let dir = package(daemon.scratch(), name, requires, &format!("{name}.probe"));
        std::fs::write(dir.join("bin/run"), probe_entry(&outside, &daemon.config_file(), port)).unwrap();
        assert_eq!(install(&daemon, &dir).0, Some(0), "{name}");
    }
    let rows = [
        ("read", "bare", "reader"),
        ("write", "bare", "writer"),
        ("exec", "bare", "spawner"),
        ("tcp", "bare", "dialer"),
        ("tcp", "resolver", "dialer"),
    ];
    let d = daemon.scratch().display().to_string();
    let mut script = format!("os call reader.probe --input '{{\"probe\": \"config\"}}' > {d}/config-reader.json; ");
    for (probe, without, with) in rows {
        for name in [without, with] {
            let input = json!({"probe": probe}).to_string();
            script.push_str(&format!(
                "os call {name}.probe --input '{input}' > {d}/{probe}-{name}.json; "
            ));
        }
    }
    script.push_str("os outcome succeeded");
    let operations: Vec<String> = packages.iter().map(|(name, _)| format!("{name}.probe")).collect();
    let mut config = granting(&script, json!(["read_context", "declare_outcome"]));
    for op in &operations {
        config["scopes"]["demo"]["authorization"]["operations"]
            .as_array_mut()
            .unwrap()
            .push(json!(op));
        config["scopes"]["demo"]["bindings"]["shell"]["operations"]
            .as_array_mut()
            .unwrap()
            .push(json!(op));
    }
    config["packages"] = json!({"grant": grant});
    daemon.apply(&config);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let answer = |probe: &str, name: &str| {
        let text = std::fs::read_to_string(daemon.scratch().join(format!("{probe}-{name}.json"))).unwrap();
        text.trim().trim_matches('"').to_owned()
    };
    for (probe, without, with) in rows {
        assert_eq!(answer(probe, without), "refused", "{probe} without: {without}");
        assert_eq!(answer(probe, with), "allowed", "{probe} with: {with}");
    }
    assert_eq!(answer("config", "reader"), "refused", "the configuration file");
    assert_eq!(
        heads.lock().unwrap().len(),
        2,
        "only the package granted net.outbound connected"
    );
}

/// A package's `http.safeFetch` callbacks are refused without the permission
/// (`permission_denied`) and for a `call_id` that names no operation call in flight
/// (`invalid_params`): a package can fetch only for a call it is answering.
#[test]
fn safe_fetch_callbacks_need_the_permission_and_a_call_in_flight() {
    let daemon = Daemon::start_with(|_| shell_config("true"));
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/notes");
    let variant = |name: &str, edit: &dyn Fn(&mut Value, &mut String)| {
        let dir = daemon.scratch().join(name);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let mut manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(example.join("open-conduit.json")).unwrap()).unwrap();
        let mut script = std::fs::read_to_string(example.join("bin/notes")).unwrap();
        manifest["name"] = json!(name);
        let own = |text: &str| text.replace("notes.", &format!("{name}."));
        script = own(&script);
        manifest = serde_json::from_str(&own(&manifest.to_string())).unwrap();
        edit(&mut manifest, &mut script);
        std::fs::write(dir.join("open-conduit.json"), manifest.to_string()).unwrap();
        std::fs::write(dir.join("bin/notes"), script).unwrap();
        std::fs::set_permissions(dir.join("bin/notes"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(install(&daemon, &dir).0, Some(0), "{name} installs");
    };
    variant("unpermitted", &|manifest, _| {
        manifest["permissions"] = json!([]);
        manifest["provides"]["operations"][1]
            .as_object_mut()
            .unwrap()
            .remove("egress");
    });
    variant("stray", &|_, script| {
        *script = script.replace(r#"{"call_id": params["call_id"],"#, r#"{"call_id": "no-such-call","#);
    });
    let d = daemon.scratch().display().to_string();
    let script = format!(
        "os call unpermitted.fetch --input '{{\"url\":\"http://127.0.0.1:9/\"}}' 2> {d}/unpermitted.txt; \
         os call stray.fetch --input '{{\"url\":\"http://127.0.0.1:9/\"}}' 2> {d}/stray.txt; os outcome succeeded"
    );
    let config = granting(&script, json!(["declare_outcome", "unpermitted.fetch", "stray.fetch"]));
    daemon.apply(&config);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let read = |name: &str| std::fs::read_to_string(daemon.scratch().join(name)).unwrap();
    assert!(
        read("unpermitted.txt").starts_with("permission_denied:"),
        "{}",
        read("unpermitted.txt")
    );
    assert!(
        read("stray.txt").starts_with("invalid_params:"),
        "{}",
        read("stray.txt")
    );
}

#[test]
fn a_packages_operation_serves_the_capability_it_declares_to_a_token_granted_it() {
    let tmp = meeting();
    let daemon = Daemon::start(None);
    let dir = package(daemon.scratch(), "vault", &[], "vault.git");
    let manifest = dir.join("open-conduit.json");
    let mut declared: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    declared["provides"]["operations"][0]["capabilities"] = json!(["git.credential"]);
    std::fs::write(&manifest, declared.to_string()).unwrap();
    assert_eq!(install(&daemon, &dir).0, Some(0));
    daemon.apply(&granting(
        &publish_and_hold(tmp.path()),
        json!(["read_context", "vault.git"]),
    ));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let serving = |capability: &str| {
        let path = format!("/v1/toolbelt/serving?capability={capability}");
        http(&socket, "GET", &path, Some(&token), None)
    };
    assert_eq!(
        serving("git.credential"),
        (
            200,
            json!({"capability": "git.credential", "operations": ["vault.git"]})
        )
    );
    assert_eq!(serving("slack.reply").1["operations"], json!([]));
    daemon.apply(&granting(&publish_and_hold(tmp.path()), json!(["read_context"])));
    assert_eq!(
        serving("git.credential").1["operations"],
        json!([]),
        "narrowed with the ceiling"
    );
}

/// A new version of an installed package may add to its toolsets but not drop an operation from
/// one (nor re-date it): a grant that names the toolset never loses what it granted.
#[test]
fn a_new_version_whose_toolset_loses_an_operation_is_refused() {
    let daemon = Daemon::start(None);
    let versioned = |version: &str, toolset: Value| {
        let dir = package(daemon.scratch(), "notes", &[], "notes.view");
        let manifest_path = dir.join("open-conduit.json");
        let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
        manifest["version"] = json!(version);
        let ops = manifest["provides"]["operations"].as_array_mut().unwrap();
        let add =
            json!({"name": "notes.add", "summary": "Add.", "input_schema": {"type": "object"}, "safety_tier": "write"});
        ops.push(add);
        manifest["provides"]["toolsets"] = json!([{"name": "notes.writer", "operations": toolset}]);
        std::fs::write(&manifest_path, manifest.to_string()).unwrap();
        dir
    };
    let both = json!([{"name": "notes.view", "since": "1.0.0"}, {"name": "notes.add", "since": "1.0.0"}]);
    assert_eq!(install(&daemon, &versioned("1.0.0", both.clone())).0, Some(0));
    assert_eq!(
        install(&daemon, &versioned("1.1.0", both)).0,
        Some(0),
        "an unchanged toolset installs again"
    );

    let dropped = json!([{"name": "notes.view", "since": "1.0.0"}]);
    let (status, refused) = install(&daemon, &versioned("1.2.0", dropped));
    assert_eq!((status, refused["error"].as_str()), (Some(1), Some("invalid_manifest")));
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("notes.writer: notes.add (since 1.0.0)"),
        "{refused}"
    );
    let redated = json!([{"name": "notes.view", "since": "1.2.0"}, {"name": "notes.add", "since": "1.0.0"}]);
    assert_eq!(
        install(&daemon, &versioned("1.2.0", redated)).1["error"],
        "invalid_manifest"
    );
    assert_eq!(
        daemon.json(&["packages", "show", "notes"])["version"],
        "1.1.0",
        "the installed version stays"
    );
}
