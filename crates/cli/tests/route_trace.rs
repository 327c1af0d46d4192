//! Route trace and samples through the real daemon and CLI: each effect, the refusals acceptance
//! would make, and that a trace records nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

/// How many events and Work the daemon has recorded.
fn recorded(daemon: &Daemon) -> (usize, usize) {
    let count = |args: &[&str]| daemon.json(args)["items"].as_array().unwrap().len();
    (count(&["events", "list"]), count(&["work", "list"]))
}

fn trace(daemon: &Daemon, args: &[&str]) -> Value {
    let mut all = vec!["route", "--scope", "demo", "--trace"];
    all.extend_from_slice(args);
    daemon.json(&all)
}

#[test]
fn a_trace_explains_start_unmatched_wake_and_queue_and_records_nothing() {
    let daemon = Daemon::start(Some(&shell_config("os wait --for demo.go")));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let before = recorded(&daemon);

    let start = trace(&daemon, &["demo.requested"]);
    assert_eq!(
        (start["effect"].as_str(), &start["work"]),
        (Some("start"), &Value::Null)
    );
    assert_eq!(start["routes"][0]["verdict"], "match");
    assert_eq!(start["routes"][0]["binding"], "shell");

    let unmatched = trace(&daemon, &["demo.other"]);
    assert_eq!(unmatched["effect"], "unmatched");
    assert_eq!(unmatched["routes"][0]["verdict"], "skip");

    let wake = trace(&daemon, &["demo.go", "--work", &work]);
    assert_eq!(
        (wake["effect"].as_str(), wake["work"].as_str()),
        (Some("wake"), Some(work.as_str()))
    );
    assert_eq!(wake["routes"][0]["verdict"], "bypassed");
    let key = format!("work:{work}");
    assert_eq!(
        trace(&daemon, &["demo.go", "--correlation-key", &key])["effect"],
        "wake"
    );

    let queued = trace(&daemon, &["demo.requested", "--work", &work]);
    assert_eq!(
        queued["effect"], "queue",
        "what a waiting Work does not wait for is input for its next attempt"
    );
    assert_eq!(queued["routes"][0]["verdict"], "bypassed");

    assert_eq!(recorded(&daemon), before, "a trace accepts, routes and records nothing");
    assert_eq!(daemon.json(&["work", "get", &work])["state"], "waiting");
}

#[test]
fn a_trace_on_running_work_injects_and_on_finished_work_drops() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (work, _, _) = hold_one(&daemon, tmp.path());
    let inject = trace(&daemon, &["demo.note", "--work", &work]);
    assert_eq!(
        (inject["effect"].as_str(), inject["work"].as_str()),
        (Some("inject"), Some(work.as_str()))
    );

    daemon.json(&["work", "cancel", &work]);
    let finished = trace(&daemon, &["demo.requested", "--work", &work]);
    assert_eq!(finished["effect"], "drop");
    assert!(finished["detail"].as_str().unwrap().contains("finished"));
}

#[test]
fn a_trace_of_an_event_acceptance_would_refuse_is_refused_not_explained() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    for event_type in ["demo", "core.work.created", "agent.toolCalled"] {
        let (code, answer) = daemon.json_unchecked(&["route", "--scope", "demo", "--trace", event_type]);
        assert_eq!(code, Some(1), "{event_type}");
        assert_eq!(answer["error"], "invalid_request", "{event_type}");
    }
    let socket = daemon.management_socket();
    let token = daemon.operator_token();
    let path = "/v1/scopes/demo/route/trace";
    for source in ["github.webhook", "core.scheduler"] {
        let body = json!({"type": "demo.requested", "source": source});
        let (status, answer) = http(&socket, "POST", path, Some(&token), Some(&body));
        assert_eq!(
            (status, answer["error"].as_str()),
            (422, Some("invalid_request")),
            "{source}"
        );
    }
    let manual = json!({"type": "demo.requested", "source": "core.manual"});
    assert_eq!(http(&socket, "POST", path, Some(&token), Some(&manual)).0, 200);
    let (status, answer) = http(
        &socket,
        "POST",
        "/v1/scopes/nope/route/trace",
        Some(&token),
        Some(&manual),
    );
    assert_eq!((status, answer["error"].as_str()), (422, Some("unknown_scope")));
}

#[test]
fn samples_offer_each_route_type_and_trace_by_name() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let samples = daemon.json(&["route", "--samples", "--scope", "demo"]);
    assert_eq!(
        samples["items"],
        json!([{"name": "demo.requested", "type": "demo.requested", "source": "core.manual",
                "correlation_key": null, "data": null}])
    );
    let text = daemon.cli(&["route", "--scope", "demo", "--trace", "demo.requested"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.starts_with("effect: start"), "{text}");
}

/// An ingress that accepts events in the scope offers its samples for the routes on its events:
/// each is what a representative delivery becomes, and a trace of its name traces it (its source,
/// key and data). An ingress's source is traceable only in the scope it delivers into.
#[test]
fn an_ingress_offers_its_samples_and_its_source_is_traced_in_its_scope() {
    let daemon = Daemon::start_with(|_| {
        let mut config: Value = serde_json::from_str(&shell_config("true")).unwrap();
        config["scopes"]["demo"]["routes"] = json!([
            {"on": "github.pull_request.*", "binding": "shell"},
            {"on": "demo.requested", "binding": "shell"},
        ]);
        config["scopes"]["other"] = json!({});
        config["secrets"] = json!({"gh": "env:GH_TOKEN", "hook": "env:GH_HOOK"});
        config["extensions"] = json!({"github": {"api_url": "https://api.github.com", "token": "gh",
                                                 "webhook_secret": "hook", "scope": "demo"}});
        config.to_string()
    });
    let samples = daemon.json(&["route", "--samples", "--scope", "demo"])["items"].clone();
    let names: Vec<&str> = samples
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["github.pull_request.opened", "demo.requested"],
        "in route order"
    );
    assert_eq!(
        (samples[0]["source"].as_str(), samples[0]["correlation_key"].as_str()),
        (Some("github"), Some("github:octo/widgets#7"))
    );
    assert_eq!(samples[0]["data"]["title"], "Fix the widget");
    assert_eq!(
        daemon.json(&["route", "--samples", "--scope", "other"])["items"],
        json!([]),
        "github delivers into demo only"
    );

    let traced = trace(&daemon, &["github.pull_request.opened"]);
    assert_eq!(traced["effect"], "start", "{traced}");
    assert_eq!(traced["routes"][0]["verdict"], "match");

    let socket = daemon.management_socket();
    let token = daemon.operator_token();
    let body = json!({"type": "github.issues.opened", "source": "github"});
    assert_eq!(
        http(
            &socket,
            "POST",
            "/v1/scopes/demo/route/trace",
            Some(&token),
            Some(&body)
        )
        .0,
        200
    );
    let (status, answer) = http(
        &socket,
        "POST",
        "/v1/scopes/other/route/trace",
        Some(&token),
        Some(&body),
    );
    assert_eq!((status, answer["error"].as_str()), (422, Some("invalid_request")));
    assert!(
        answer["message"].as_str().unwrap().contains("another scope"),
        "{answer}"
    );
    let slack = json!({"type": "slack.app_mention", "source": "slack"});
    let (status, _) = http(
        &socket,
        "POST",
        "/v1/scopes/demo/route/trace",
        Some(&token),
        Some(&slack),
    );
    assert_eq!(status, 422, "slack is not configured to accept events anywhere");
}

/// A final route that matches is the last the event reaches: the trace says `not_reached` of the
/// routes after it, and acceptance starts Work on it alone.
#[test]
fn a_final_route_stops_routing_and_later_routes_are_not_reached() {
    let daemon = Daemon::start_with(|_| {
        let mut config: Value = serde_json::from_str(&shell_config("true")).unwrap();
        let shell = config["scopes"]["demo"]["bindings"]["shell"].clone();
        config["scopes"]["demo"]["bindings"]["other"] = shell;
        config["scopes"]["demo"]["routes"] = json!([
            {"on": "demo.urgent", "binding": "shell", "final": true},
            {"on": "demo.*", "binding": "other"},
        ]);
        config.to_string()
    });
    let traced = trace(&daemon, &["demo.urgent"]);
    let verdicts: Vec<&str> = traced["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["match", "not_reached"], "{traced}");
    assert_eq!(traced["detail"], "starts Work on shell");
    let routine = trace(&daemon, &["demo.routine"]);
    let verdicts: Vec<&str> = routine["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["skip", "match"]);

    daemon.json(&["emit", "demo.urgent", "--scope", "demo"]);
    let started = daemon.json(&["work", "list"])["items"].clone();
    let bindings: Vec<&str> = started
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["binding"].as_str().unwrap())
        .collect();
    assert_eq!(bindings, ["shell"], "acceptance agrees with the trace");
}
