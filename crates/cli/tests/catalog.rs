//! The tool catalog on an execution's own socket, through the real daemon: exactly the token's
//! grant, narrowed at once by the configuration, validated against the schema file, and a 404 that
//! does not tell an unknown tool from a hidden one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

fn schema() -> jsonschema::Validator {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas/tool-descriptor.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn ids(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["toolId"].as_str().unwrap())
        .collect()
}

/// The status and body of a GET, with the headers (whose Date may differ) left out.
fn status_and_body(socket: &std::path::Path, path: &str, token: &str) -> (String, String) {
    let auth = format!("Bearer {token}");
    let response = http_response(socket, "GET", path, &[("Authorization", &auth)], "");
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[test]
fn an_execution_sees_exactly_its_grant_and_less_once_the_configuration_narrows() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let daemon = Daemon::start(Some(&shell_config(&hold)));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);

    let (status, tools) = http(&socket, "GET", "/v1/tools", Some(&token), None);
    assert_eq!(status, 200);
    assert_eq!(
        ids(&tools),
        ["create_work", "declare_outcome", "emit", "read_context", "wait"]
    );
    let schema = schema();
    for tool in tools.as_array().unwrap() {
        assert!(schema.is_valid(tool), "{tool}");
    }
    let os = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_os"))
            .args(args)
            .env("OS_ENDPOINT", &socket)
            .env("OS_TOKEN_FILE", &token_file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "os {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listed: Value = serde_json::from_str(&os(&["--json", "tools"])).unwrap();
    assert_eq!(listed, tools, "`os tools` prints the same catalog");
    assert!(os(&["tools"])
        .lines()
        .any(|l| l.starts_with("read_context") && l.contains("read")));
    let shown: Value = serde_json::from_str(&os(&["tools", "emit"])).unwrap();
    assert_eq!(shown["toolId"], "emit");
    let (status, one) = http(&socket, "GET", "/v1/tools/read%5Fcontext", Some(&token), None);
    assert_eq!(
        (status, one["safetyTier"].as_str()),
        (200, Some("read")),
        "the id is percent-decoded"
    );
    assert_eq!(http(&socket, "GET", "/v1/tools", None, None).0, 401);
    let (status, discovery) = http(&socket, "GET", "/.well-known/openwop", None, None);
    assert_eq!(status, 200, "discovery needs no credential");
    assert_eq!(
        discovery["toolCatalog"],
        json!({"supported": true, "sources": ["host-extension"], "sessionLifecycle": true})
    );
    assert_eq!(
        discovery["toolHooks"],
        json!({"supported": true, "prePostEvents": true})
    );
    assert_eq!(
        discovery["httpClient"],
        json!({"supported": true, "ssrfGuard": true, "maxResponseBodyBytes": 10_485_760, "requestTimeoutMs": 30_000,
               "methods": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "safeFetch": {"supported": true}}),
        "RFC 0076 §B: the guarded client's clamps, as the fetch path enforces them"
    );
    let management = daemon.management_socket();
    assert_eq!(
        http(&management, "GET", "/.well-known/openwop", None, None),
        (200, discovery.clone())
    );
    assert!(!discovery.to_string().contains("demo"), "capability flags only");

    let narrowed = granting(&hold, json!(["emit", "read_context", "declare_outcome", "wait"]));
    daemon.apply(&narrowed);

    let (_, tools) = http(&socket, "GET", "/v1/tools", Some(&token), None);
    assert_eq!(
        ids(&tools),
        ["declare_outcome", "emit", "read_context", "wait"],
        "the live token sees less"
    );
    let (_, guidance) = http(&socket, "GET", "/v1/toolbelt/guidance", Some(&token), None);
    let guided: Vec<&str> = guidance["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|op| op["name"].as_str())
        .collect();
    assert!(
        guided.contains(&"emit") && !guided.contains(&"create_work"),
        "the guidance `os mcp` serves lists what the live ceiling allows: {guided:?}"
    );
    let hidden = status_and_body(&socket, "/v1/tools/create_work", &token);
    let unknown = status_and_body(&socket, "/v1/tools/no.such.tool", &token);
    assert!(hidden.0.starts_with("HTTP/1.1 404"), "{hidden:?}");
    assert_eq!(hidden, unknown, "a hidden tool is answered exactly like an unknown one");
    assert_eq!(
        http(&socket, "POST", "/v1/tools", Some(&token), Some(&json!({}))).0,
        405,
        "read-only"
    );
}

#[test]
fn operators_see_every_registered_tool_narrowed_by_scope_and_source() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let socket = daemon.management_socket();
    let token = daemon.operator_token();
    let get = |path: &str| http(&socket, "GET", path, Some(&token), None);

    let (status, all) = get("/v1/tools");
    assert_eq!(status, 200);
    let github = [
        "github.checks.wait",
        "github.git.credential",
        "github.issue.comment",
        "github.issue.list",
        "github.issue.view",
        "github.pr.comment",
        "github.pr.create",
        "github.pr.diff",
        "github.pr.edit",
        "github.pr.review",
        "github.pr.reviews",
        "github.pr.view",
        "github.pr.wait_review",
    ];
    let expected: Vec<&str> = ["create_work", "declare_outcome", "emit"]
        .into_iter()
        .chain(github)
        .chain([
            "http.fetch",
            "introspection.events.list",
            "introspection.work.get",
            "introspection.work.list",
            "read_context",
            "slack.context",
            "slack.reply",
            "slack.thread",
            "wait",
        ])
        .collect();
    assert_eq!(ids(&all), expected);
    let schema = schema();
    assert!(all.as_array().unwrap().iter().all(|t| schema.is_valid(t)));
    assert_eq!(
        ids(&get("/v1/tools?scope=demo").1),
        ["create_work", "declare_outcome", "emit", "read_context", "wait"],
        "demo's ceiling allows every builtin, not the extensions' operations"
    );
    assert_eq!(get("/v1/tools?source=host-extension").1, all);
    assert_eq!(get("/v1/tools/http.fetch").1["egress"], "safe-fetch");
    assert_eq!(get("/v1/tools?source=mcp").1, json!([]));
    assert_eq!(get("/v1/tools?source=plugin").0, 400);
    for unserved in ["workflow", "connector"] {
        assert_eq!(
            get(&format!("/v1/tools?source={unserved}")),
            (200, json!([])),
            "an RFC source this host has none of"
        );
    }
    assert_eq!(get("/v1/tools?scope=nope").1["error"], "unknown_scope");
    assert_eq!(get("/v1/tools/emit").1["safetyTier"], "write");
    assert_eq!(get("/v1/tools/nope").0, 404);
    assert_eq!(http(&socket, "GET", "/v1/tools", None, None).0, 401);

    let narrowed = granting("true", json!(["emit", "read_context"]));
    daemon.apply(&narrowed);
    assert_eq!(ids(&get("/v1/tools?scope=demo").1), ["emit", "read_context"]);
}

/// RFC 0078 §B: "a tool the principal cannot invoke MUST NOT appear". Once the segment declared,
/// every call is `authority_released`, so the catalog lists nothing. The calls' records name their
/// transport as RFC 0064 does.
#[test]
fn after_a_declaration_the_catalog_lists_nothing() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    assert_eq!(http(&socket, "GET", "/v1/tools/emit", Some(&token), None).0, 200);
    let declared = toolbelt_call(&socket, &token, "declare_outcome", json!({"status": "succeeded"}));
    assert_eq!(declared.0, 200, "{}", declared.1);
    let called = toolbelt_call(&socket, &token, "emit", json!({"type": "demo.late"}));
    assert_eq!(called.1["error"], "authority_released");
    assert_eq!(http(&socket, "GET", "/v1/tools", Some(&token), None), (200, json!([])));
    assert_eq!(http(&socket, "GET", "/v1/tools/emit", Some(&token), None).0, 404);
    // RFC 0064's transport vocabulary: a builtin is the host's own, `native`.
    let called: Vec<Value> = daemon
        .events(&work)
        .into_iter()
        .filter(|e| e["type"] == "agent.toolCalled")
        .collect();
    assert!(
        !called.is_empty() && called.iter().all(|e| e["data"]["transport"] == "native"),
        "{called:?}"
    );
    std::fs::write(tmp.path().join("release"), "").unwrap();
}

/// A binding grant a Work takes at creation joins its token, within the scope's ceiling: the Work
/// that took it may call its operations, one that did not may not, and narrowing the ceiling
/// takes them away at once. A grant the binding does not offer is refused; one outside the ceiling
/// makes the configuration invalid.
#[test]
fn a_binding_grant_a_work_takes_joins_its_token_within_the_ceiling() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let mut config = granting(
        &hold,
        json!(["read_context", "declare_outcome", "wait", "create_work", "emit"]),
    );
    let binding = &mut config["scopes"]["demo"]["bindings"]["shell"];
    binding["operations"] = json!(["read_context", "declare_outcome", "wait"]);
    binding["grants"] = json!({"spawn": {"operations": ["create_work", "emit"]}});
    let daemon = Daemon::start(Some(&config.to_string()));
    let create = |grant: Option<&str>| {
        let mut args = vec!["work", "create", "--scope", "demo", "--binding", "shell"];
        args.extend(grant.map(|g| ["--grant", g]).into_iter().flatten());
        daemon.json(&args)["id"].as_str().unwrap().to_owned()
    };
    let (granted, socket, token_file) = hold_created(tmp.path(), || create(Some("spawn")));
    let token = read_token(&token_file);
    assert_eq!(daemon.json(&["work", "get", &granted])["grants"], json!(["spawn"]));
    let context = toolbelt_call(&socket, &token, "read_context", json!({})).1;
    assert_eq!(
        context["output"]["operations"],
        json!(["create_work", "declare_outcome", "emit", "read_context", "wait"]),
        "{context}"
    );
    let child = json!({"binding": "shell"});
    assert_eq!(toolbelt_call(&socket, &token, "create_work", child.clone()).0, 200);

    let (_, plain_socket, plain_token) = hold_created(tmp.path(), || create(None));
    let plain_token = read_token(&plain_token);
    assert_eq!(
        toolbelt_call(&plain_socket, &plain_token, "create_work", child.clone()).0,
        403,
        "no grant taken"
    );
    let (status, refused) = daemon.json_unchecked(&[
        "work",
        "create",
        "--scope",
        "demo",
        "--binding",
        "shell",
        "--grant",
        "nope",
    ]);
    assert_eq!((status, refused["error"].as_str()), (Some(1), Some("invalid_input")));

    let mut narrowed = config.clone();
    narrowed["scopes"]["demo"]["authorization"]["operations"] =
        json!(["read_context", "declare_outcome", "wait", "emit"]);
    narrowed["scopes"]["demo"]["bindings"]["shell"]["grants"]["spawn"]["operations"] = json!(["emit"]);
    daemon.apply(&narrowed);
    assert_eq!(
        toolbelt_call(&socket, &token, "create_work", child).0,
        403,
        "the live ceiling narrows a grant at once"
    );

    let mut widening = config.clone();
    widening["scopes"]["demo"]["bindings"]["shell"]["grants"]["spawn"]["operations"] = json!(["emit", "http.fetch"]);
    let file = daemon.scratch().join("widening.json");
    std::fs::write(&file, widening.to_string()).unwrap();
    let (_, checked) = daemon.json_unchecked(&["config", "check", file.to_str().unwrap()]);
    assert_eq!(
        checked["diagnostics"][0]["pointer"],
        "/scopes/demo/bindings/shell/grants/spawn/operations/1"
    );
    assert_eq!(checked["diagnostics"][0]["code"], "authority_widening");
}

/// With `extensions.introspection`, an execution granted `@introspection.reader` reads its own
/// scope's Work and their events, and nothing of another scope's; without it, the operations are
/// narrowed away from the grant.
#[test]
fn introspection_reads_the_callers_scope_only_when_enabled() {
    let tmp = meeting();
    let hold = publish_and_hold(tmp.path());
    let mut config = granting(
        &hold,
        json!(["read_context", "declare_outcome", "@introspection.reader"]),
    );
    config["scopes"]["other"] = config["scopes"]["demo"].clone();
    config["scopes"]["other"]["bindings"]["shell"]["config"]["command"] =
        json!(["/bin/sh", "-c", "os wait --for demo.never"]);
    config["extensions"] = json!({"introspection": {}});
    let daemon = Daemon::start(Some(&config.to_string()));
    let elsewhere = daemon.create_work("other", "shell");
    let (work, socket, token_file) = hold_one(&daemon, tmp.path());
    let token = read_token(&token_file);
    let call = |op: &str, input: Value| toolbelt_call(&socket, &token, op, input);

    let (status, listed) = call("introspection.work.list", json!({}));
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<&str> = listed["output"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [work.as_str()], "its own scope's Work only");
    let (_, own) = call("introspection.work.get", json!({"work_id": work}));
    assert_eq!(own["output"]["scope"], "demo");
    let (status, hidden) = call("introspection.work.get", json!({"work_id": elsewhere}));
    assert_eq!(
        (status, hidden["error"].as_str()),
        (422, Some("not_found")),
        "another scope's is unknown"
    );
    let (_, events) = call("introspection.events.list", json!({"work_id": work, "limit": 1}));
    assert_eq!(events["output"]["items"][0]["type"], "core.work.created");
    assert_eq!(
        call("introspection.events.list", json!({"work_id": elsewhere})).1["error"],
        "not_found"
    );

    let mut disabled = config.clone();
    disabled.as_object_mut().unwrap().remove("extensions");
    daemon.apply(&disabled);
    let (status, refused) = call("introspection.work.list", json!({}));
    assert_eq!(
        (status, refused["error"].as_str()),
        (403, Some("forbidden")),
        "a generation without the entry narrows the operations away"
    );
}
