//! The walking skeleton end to end: a real daemon, real sockets, a real shell child, the real CLIs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

fn by_type<'a>(events: &'a [Value], ty: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} event in {events:#?}"))
}

#[test]
fn shell_command_emits_and_declares_its_outcome_through_its_toolbelt() {
    let daemon = Daemon::start(None); // the built-in default configuration
    let work = daemon.create_work("setup", "shell");
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["source"], "declared");
    assert_eq!(done["outcome"]["summary"], "said hello");

    let executions = daemon.json(&["executions", "list", "--work", &work])["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(executions.len(), 1);
    assert_eq!(
        (executions[0]["epoch"].as_u64(), executions[0]["state"].as_str()),
        (Some(1), Some("succeeded"))
    );
    let execution = executions[0]["id"].as_str().unwrap();

    let events = daemon.events(&work);
    let created = by_type(&events, "core.work.created");
    let hello = by_type(&events, "demo.hello");
    assert_eq!(hello["source"], format!("execution:{execution}"));
    assert_eq!(hello["execution_id"], execution);
    assert_eq!(hello["data"], json!({"greeting": "hello"}));
    assert_eq!(
        hello["causation"]["parent"], created["id"],
        "the emission continues from what started the segment"
    );
    assert_eq!(
        hello["actor"],
        Value::Null,
        "only the host stamps actors, and only on operator events"
    );

    let chain = daemon.json(&["events", "chain", hello["id"].as_str().unwrap()])["items"]
        .as_array()
        .unwrap()
        .clone();
    let types: Vec<&str> = chain.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["core.work.created", "demo.hello"]);
    assert_eq!(
        chain[0]["actor"], "operator:local",
        "the operator's root names the operator"
    );
    assert_eq!(chain[0]["source"], "core.manual");
}

#[test]
fn a_routed_event_starts_work_and_the_chain_reaches_the_operators_root() {
    let daemon = Daemon::start(None);
    let root = daemon.json(&[
        "emit",
        "demo.requested",
        "--scope",
        "setup",
        "--data",
        r#"{"ticket":7}"#,
    ]);
    let mut work = String::new();
    wait_until("the route to start Work", || {
        let items = daemon.json(&["work", "list"])["items"].as_array().unwrap().clone();
        work = items
            .first()
            .and_then(|w| w["id"].as_str())
            .unwrap_or_default()
            .to_owned();
        !work.is_empty()
    });
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["input"], json!({"ticket": 7}));
    let hello = daemon
        .events(&work)
        .into_iter()
        .find(|e| e["type"] == "demo.hello")
        .unwrap();
    let chain = daemon.json(&["events", "chain", hello["id"].as_str().unwrap()])["items"]
        .as_array()
        .unwrap()
        .clone();
    let ids: Vec<&str> = chain.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], root["id"].as_str().unwrap());
    assert_eq!(chain[1]["type"], "core.work.created");
    assert!(chain.iter().all(|e| e["causation"]["root"] == root["id"]));
}

#[test]
fn a_declared_wait_resumes_in_a_new_attempt_with_a_new_token() {
    let tmp = meeting();
    let dir = tmp.path().display().to_string();
    // First segment: keep the token, wait for demo.go. Second: publish its endpoint and hold.
    let script = format!(
        "case \"$(os context)\" in *demo.go*) {hold}; os outcome succeeded --summary resumed;; \
         *) cp \"$OS_TOKEN_FILE\" {dir}/first.token && os wait --for demo.go --timeout 10m;; esac",
        hold = publish_and_hold(tmp.path())
    );
    let daemon = Daemon::start(Some(&shell_config(&script)));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "waiting");
    let first_token = read_token(&tmp.path().join("first.token"));

    daemon.json(&[
        "emit",
        "demo.go",
        "--scope",
        "demo",
        "--correlation-key",
        &format!("work:{work}"),
    ]);
    wait_until("the second attempt to publish its endpoint", || {
        published_runs(tmp.path()).len() == 1
    });
    let (endpoint, token_file) = published_runs(tmp.path()).remove(0);
    wait_until("the token file", || token_file.exists());
    let second_token = read_token(&token_file);
    assert_ne!(first_token, second_token);

    let (status, body) = toolbelt_call(&endpoint, &first_token, "read_context", json!({}));
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("forbidden")),
        "the superseded token is refused"
    );
    let (status, body) = toolbelt_call(&endpoint, &second_token, "read_context", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"]["execution"]["epoch"], 2);
    assert_eq!(body["output"]["wake"]["type"], "demo.go");

    std::fs::write(tmp.path().join("release"), "").unwrap();
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "resumed");
    let epochs: Vec<u64> = daemon.json(&["executions", "list", "--work", &work])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["epoch"].as_u64().unwrap())
        .collect();
    assert_eq!(epochs, vec![1, 2]);
}

#[test]
fn a_call_after_the_outcome_is_authority_released() {
    let tmp = meeting();
    let dir = tmp.path().display();
    let script = format!(
        "os outcome succeeded --summary early; os emit demo.after 2> {dir}/after.err; echo $? > {dir}/after.code"
    );
    let daemon = Daemon::start(Some(&shell_config(&script)));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("after.code")).unwrap().trim(),
        "1"
    );
    let stderr = std::fs::read_to_string(tmp.path().join("after.err")).unwrap();
    assert!(stderr.starts_with("authority_released"), "{stderr}");
    assert!(daemon.events(&work).iter().all(|e| e["type"] != "demo.after"));
}

#[test]
fn each_socket_accepts_only_its_own_credential_class_and_execution() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    daemon.create_work("demo", "shell");
    daemon.create_work("demo", "shell");
    wait_until("two held attempts", || {
        let runs = published_runs(tmp.path());
        runs.len() == 2 && runs.iter().all(|(e, t)| !e.as_os_str().is_empty() && t.exists())
    });
    let runs = published_runs(tmp.path());
    let (a_socket, a_token) = (&runs[0].0, read_token(&runs[0].1));
    let (b_socket, b_token) = (&runs[1].0, read_token(&runs[1].1));
    let operator = daemon.operator_token();

    let code = |(status, body): (u16, Value)| (status, body["error"].as_str().unwrap_or("").to_owned());
    assert_eq!(toolbelt_call(a_socket, &a_token, "read_context", json!({})).0, 200);
    assert_eq!(
        code(toolbelt_call(b_socket, &a_token, "read_context", json!({}))),
        (403, "forbidden".into())
    );
    assert_eq!(
        code(toolbelt_call(a_socket, "garbage", "read_context", json!({}))),
        (403, "forbidden".into())
    );
    assert_eq!(
        code(toolbelt_call(a_socket, &operator, "read_context", json!({}))),
        (403, "wrong_credential_class".into())
    );
    let mgmt = daemon.management_socket();
    assert_eq!(
        code(http(&mgmt, "GET", "/v1/health", Some(&b_token), None)),
        (403, "wrong_credential_class".into())
    );
    assert_eq!(
        code(http(&mgmt, "GET", "/v1/work", None, None)),
        (401, "unauthenticated".into())
    );
    // Unknown toolbelt paths are 404 before authentication, for any credential or none.
    for token in [None, Some(operator.as_str()), Some(a_token.as_str())] {
        assert_eq!(
            code(http(a_socket, "GET", "/v1/health", token, None)),
            (404, "not_found".into())
        );
        assert_eq!(
            code(http(a_socket, "GET", "/v1/work", token, None)),
            (404, "not_found".into())
        );
    }
    // A call asserting another execution fails the narrowing check.
    let body = json!({"operation": "read_context", "input": {}, "execution_id": "someone-else"});
    assert_eq!(
        code(http(a_socket, "POST", "/v1/toolbelt/call", Some(&a_token), Some(&body))),
        (403, "forbidden".into())
    );
}

#[test]
fn sockets_and_private_files_are_owner_only() {
    let tmp = meeting();
    let daemon = Daemon::start(Some(&shell_config(&publish_and_hold(tmp.path()))));
    let (_, socket, token_file) = hold_one(&daemon, tmp.path());
    assert_eq!(mode(&daemon.management_socket()), 0o600);
    assert_eq!(mode(&daemon.state.join("private")), 0o700);
    assert_eq!(mode(&daemon.state.join("private/operator.token")), 0o600);
    assert_eq!(mode(&daemon.state), 0o700);
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(mode(&token_file), 0o600);
    assert_eq!(mode(token_file.parent().unwrap()), 0o700);
    assert_eq!(mode(socket.parent().unwrap()), 0o700);
    for store_file in ["store.db", "store.db-wal", "store.db-shm", "store.db-redo"] {
        assert_eq!(mode(&daemon.state.join(store_file)), 0o600, "{store_file}");
    }
    for dir in ["runs", "logs", "artifacts"] {
        assert_eq!(mode(&daemon.state.join(dir)), 0o700, "{dir}");
    }
}

#[test]
fn a_group_writable_state_directory_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o770)).unwrap();
    let stderr = refused_start(&state);
    assert!(stderr.contains("chmod 700"), "{stderr}");
    assert!(!state.join("management.sock").exists());
}

/// Starts a daemon on `state` that is expected to refuse: its stderr.
fn refused_start(state: &std::path::Path) -> String {
    let out = std::process::Command::new(OPEN_CONDUIT)
        .arg("daemon")
        .arg("--state")
        .arg(state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_management_socket_path_too_long_for_unix_sockets_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("s".repeat(100));
    let stderr = refused_start(&state);
    assert!(stderr.contains("use a shorter --state directory"), "{stderr}");
}

#[test]
fn a_file_that_is_not_a_socket_is_never_removed_as_stale() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(state.join("management.sock"), "keep").unwrap();
    let stderr = refused_start(&state);
    assert!(stderr.contains("is not a socket you own"), "{stderr}");
    assert_eq!(std::fs::read_to_string(state.join("management.sock")).unwrap(), "keep");
}

#[test]
fn a_second_daemon_on_the_same_state_is_refused() {
    let daemon = Daemon::start(None);
    assert!(refused_start(&daemon.state).contains("lock"));
    assert!(
        daemon.cli(&["health"]).status.success(),
        "the first daemon keeps serving"
    );
}

#[test]
fn events_acknowledged_before_sigkill_survive_the_restart() {
    let mut daemon = Daemon::start(Some(&shell_config("true")));
    let ids: Vec<String> = (0..20)
        .map(|i| {
            let data = format!(r#"{{"i":{i}}}"#);
            daemon.json(&["emit", "demo.noted", "--scope", "demo", "--data", &data])["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    daemon.kill();
    daemon.launch();
    for id in &ids {
        let event = daemon.json(&["events", "chain", id])["items"][0].clone();
        assert_eq!(event["id"], id.as_str());
    }
}

/// 32 executions emit through their toolbelts at once, each retrying a call that got no answer
/// under the same request id (and its outcome while the daemon cannot be reached), while the
/// daemon is killed with SIGKILL and restarted under them: every acknowledged emit survives, and
/// none is stored twice.
#[test]
fn toolbelt_emits_from_32_executions_survive_sigkill_once_each() {
    const EXECUTIONS: usize = 32;
    const TICKS: usize = 25;
    let tmp = meeting();
    let d = tmp.path().display();
    let script = format!(
        "acks=$(mktemp {d}/acks.XXXXXX) && i=0 && while [ $i -lt {TICKS} ]; do \
           if id=$(os emit demo.tick --data \"{{\\\"i\\\":$i}}\" --request-id tick-$i 2>/dev/null); then \
             echo \"$id\" >> $acks; i=$((i+1)); \
           else [ -d {d} ] || exit 1; sleep 0.1; fi; \
         done; while :; do os outcome succeeded 2>/dev/null; s=$?; [ $s -ne 2 ] && exit $s; sleep 0.1; done"
    );
    let mut daemon = Daemon::start(Some(&shell_config(&script)));
    let works: Vec<String> = (0..EXECUTIONS).map(|_| daemon.create_work("demo", "shell")).collect();
    let acks = || -> Vec<String> {
        let files = std::fs::read_dir(tmp.path()).unwrap().flatten();
        let acks = files.filter(|f| f.file_name().to_string_lossy().starts_with("acks."));
        acks.map(|f| std::fs::read_to_string(f.path()).unwrap_or_default())
            .collect()
    };
    let acknowledged = || -> Vec<String> { acks().iter().flat_map(|a| a.lines().map(str::to_owned)).collect() };
    // Every attempt is past its launch (a kill inside a launch is another drill's subject).
    let started = || acks().iter().filter(|a| !a.is_empty()).count();
    wait_until("every execution to have an acknowledged emit", || {
        started() == EXECUTIONS
    });
    daemon.kill();
    let before_kill = acknowledged();
    assert!(
        before_kill.len() < EXECUTIONS * TICKS,
        "the kill came while they were still emitting"
    );
    daemon.launch();
    for work in &works {
        daemon.await_work(work, "succeeded");
    }
    let mut stored = std::collections::HashSet::new();
    for work in &works {
        let events = daemon.json(&["events", "list", "--work", work])["items"].clone();
        let ticks: Vec<&Value> = events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "demo.tick")
            .collect();
        let mut numbers: Vec<i64> = ticks.iter().map(|e| e["data"]["i"].as_i64().unwrap()).collect();
        numbers.sort();
        assert_eq!(
            numbers,
            (0..TICKS as i64).collect::<Vec<_>>(),
            "work {work}: each tick once"
        );
        stored.extend(ticks.iter().map(|e| e["id"].as_str().unwrap().to_owned()));
    }
    let lost: Vec<&String> = before_kill.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(lost.is_empty(), "acknowledged before the kill, then lost: {lost:?}");
    assert_eq!(
        acknowledged().len(),
        EXECUTIONS * TICKS,
        "every emit was acknowledged once"
    );
}

#[test]
fn sigterm_stops_the_daemon_cleanly() {
    let mut daemon = Daemon::start(None);
    assert!(daemon.stop().success());
    assert!(!daemon.management_socket().exists());
    let out = daemon.cli(&["health"]);
    assert_eq!(out.status.code(), Some(2), "health reports the daemon down");
}

#[test]
fn an_attempt_spawned_just_before_a_crash_is_adopted_not_lost() {
    let tmp = meeting();
    let script = format!(
        "{}; os outcome succeeded --summary adopted",
        publish_and_hold(tmp.path())
    );
    let mut daemon = Daemon::start(Some(&shell_config(&script)));
    daemon.kill();
    // The daemon aborts right after spawning the attempt, before the store records its pid.
    daemon.launch_with_env(&[("OPEN_CONDUIT_FAILPOINT", "attempt:spawned")]);
    let work = daemon.create_work("demo", "shell");
    assert!(!daemon.wait_exit().success(), "the failpoint aborted the daemon");
    wait_until("the orphaned attempt to publish its endpoint", || {
        published_runs(tmp.path()).first().is_some_and(|(_, t)| t.exists())
    });
    daemon.launch();
    let (endpoint, token_file) = published_runs(tmp.path()).remove(0);
    // The socket file stays from before the crash; it answers once the new daemon listens on it.
    wait_until("the adopted attempt's socket to answer", || {
        std::os::unix::net::UnixStream::connect(&endpoint).is_ok()
            && std::fs::read_to_string(&token_file)
                .is_ok_and(|t| toolbelt_call(&endpoint, t.trim(), "read_context", json!({})).0 == 200)
    });
    std::fs::write(tmp.path().join("release"), "").unwrap();
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(
        done["outcome"]["summary"], "adopted",
        "the attempt was adopted, not judged lost"
    );
}

#[test]
fn a_running_attempt_survives_a_daemon_kill_with_a_rotated_token() {
    let tmp = meeting();
    let script = format!(
        "{}; os outcome succeeded --summary survived",
        publish_and_hold(tmp.path())
    );
    let mut daemon = Daemon::start(Some(&shell_config(&script)));
    let (work, endpoint, token_file) = hold_one(&daemon, tmp.path());
    let old_token = read_token(&token_file);
    let owner = |daemon: &Daemon| daemon.json(&["executions", "list", "--work", &work])["items"][0]["owner"].clone();
    let before = owner(&daemon);
    let state = daemon.management_socket().parent().unwrap().to_owned();
    let instance = std::fs::read_to_string(state.join("instance")).unwrap();

    daemon.kill();
    daemon.launch();
    wait_until("the token to rotate", || read_token(&token_file) != old_token);
    let new_token = read_token(&token_file);
    let (status, body) = toolbelt_call(&endpoint, &old_token, "read_context", json!({}));
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("forbidden")),
        "the pre-restart token is refused"
    );
    let (status, body) = toolbelt_call(&endpoint, &new_token, "read_context", json!({}));
    assert_eq!(status, 200, "the adopted attempt's socket is served again: {body}");
    assert_eq!(body["output"]["execution"]["epoch"], 2);
    let after = owner(&daemon);
    assert_eq!(after, before, "the restarted daemon is the same instance");
    assert_eq!(
        after.as_str(),
        Some(instance.trim()),
        "the instance id is the one kept in the state directory"
    );

    std::fs::write(tmp.path().join("release"), "").unwrap();
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "survived");
    wait_until("the run directory to go", || !endpoint.parent().unwrap().exists());
}

/// The restarted daemon's first tick looked at what it supervised (nothing yet), skipped the
/// store, and then stopped as fenced the adopted attempt whose supervision had begun meanwhile (CI
/// saw it once, as the token file gone). The pause points order the two: the adopted attempt's
/// supervision begins 200 ms in, while the first tick, which looked at once, is held until 600 ms.
#[test]
fn the_first_tick_after_a_restart_does_not_take_the_adopted_attempt_for_fenced() {
    let tmp = meeting();
    let script = format!("{}; os outcome succeeded --summary kept", publish_and_hold(tmp.path()));
    let mut daemon = Daemon::start(Some(&shell_config(&script)));
    let (work, endpoint, token_file) = hold_one(&daemon, tmp.path());
    let old_token = read_token(&token_file);

    daemon.kill();
    let pauses = "tick:fence=600,attempt:supervise=200";
    daemon.launch_with_env(&[("OPEN_CONDUIT_PAUSEPOINT", pauses)]);
    // A second tick's pause means the first tick made its check.
    wait_until("the first tick to pass its check", || {
        daemon.log().matches("pausepoint tick:fence").count() >= 2
    });
    assert!(daemon.log().contains("pausepoint attempt:supervise"));
    assert!(!daemon.log().contains("fenced by an operator"));
    wait_until("the token to rotate", || {
        std::fs::read_to_string(&token_file).is_ok_and(|t| t.trim() != old_token)
    });
    let (status, body) = toolbelt_call(&endpoint, &read_token(&token_file), "read_context", json!({}));
    assert_eq!(status, 200, "the adopted attempt is still served: {body}");

    std::fs::write(tmp.path().join("release"), "").unwrap();
    let done = daemon.await_work(&work, "succeeded");
    assert_eq!(done["outcome"]["summary"], "kept");
}

#[test]
fn an_os_call_made_while_the_daemon_is_down_is_answered_once_it_is_back() {
    let tmp = meeting();
    let script = format!("{}; os outcome succeeded", publish_and_hold(tmp.path()));
    let mut daemon = Daemon::start(Some(&shell_config(&script)));
    let (work, endpoint, token_file) = hold_one(&daemon, tmp.path());
    daemon.kill();
    wait_until("the socket to stop answering", || {
        std::os::unix::net::UnixStream::connect(&endpoint).is_err()
    });
    // An agent's call while nothing serves its socket: it waits instead of failing.
    let call = std::process::Command::new(env!("CARGO_BIN_EXE_os"))
        .args(["--json", "context"])
        .env("OS_ENDPOINT", &endpoint)
        .env("OS_TOKEN_FILE", &token_file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    daemon.launch();
    let out = call.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "os failed: {stderr}");
    assert!(
        stderr.contains("dialling again"),
        "the wait is said on stderr: {stderr}"
    );
    let context: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        context["output"]["execution"]["epoch"], 2,
        "answered by the adopted attempt, with the rotated token"
    );
    std::fs::write(tmp.path().join("release"), "").unwrap();
    daemon.await_work(&work, "succeeded");
}

#[test]
fn the_attempt_deadline_kills_the_process_group() {
    let config = shell_config("sleep 600").replace(r#""timeout":"5m""#, r#""timeout":"1s""#);
    let daemon = Daemon::start(Some(&config));
    let work = daemon.create_work("demo", "shell");
    let done = daemon.await_work(&work, "failed");
    assert_eq!(done["outcome"]["source"], "exit");
}

/// A shell binding's `env` reaches the process as plain variables (replacing an inherited one),
/// and its `path` directories are searched after the toolbelt's own and before the system's.
#[test]
fn a_shell_bindings_env_and_path_reach_its_process() {
    let daemon = Daemon::start_with(|scratch| {
        let tools = scratch.join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::write(tools.join("greet"), "#!/bin/sh\necho \"hello from $MODE\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tools.join("greet"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = scratch.display();
        let mut config: Value = serde_json::from_str(&shell_config(&format!(
            "greet > {d}/greeted.txt; echo \"$HOME|$PATH\" > {d}/env.txt; os outcome succeeded"
        )))
        .unwrap();
        let shell = &mut config["scopes"]["demo"]["bindings"]["shell"]["config"];
        shell["env"] = json!({"MODE": "ci", "HOME": "/srv/agent-home"});
        shell["path"] = json!([tools]);
        config.to_string()
    });
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let read = |name: &str| std::fs::read_to_string(daemon.scratch().join(name)).unwrap();
    assert_eq!(read("greeted.txt"), "hello from ci\n");
    let env = read("env.txt");
    let (home, path) = env.trim().split_once('|').unwrap();
    assert_eq!(home, "/srv/agent-home");
    let dirs: Vec<&str> = path.split(':').collect();
    let tools = daemon.scratch().join("tools");
    assert_eq!(dirs[1], tools.to_str().unwrap(), "after os's own directory: {path}");
    assert_eq!(&dirs[2..], ["/usr/local/bin", "/usr/bin", "/bin"]);
}

/// A program that cannot start fails its Work with the reason in the outcome and the program's
/// path in the attempt's log.
#[test]
fn a_program_that_cannot_start_says_why_in_the_outcome_and_the_log() {
    let mut config: Value = serde_json::from_str(&shell_config("true")).unwrap();
    config["scopes"]["demo"]["bindings"]["shell"]["config"]["command"] = json!(["/no/such/program", "--flag"]);
    let daemon = Daemon::start(Some(&config.to_string()));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "failed");
    let got = daemon.json(&["work", "get", &work]);
    let summary = got["outcome"]["summary"].as_str().unwrap();
    assert!(summary.contains("not found (ENOENT)"), "{summary}");
    let execution = daemon.first_execution(&work);
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{execution}")]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("could not start `/no/such/program`") && log.contains("No such file or directory"),
        "{log}"
    );
}

/// A state directory so deep that an attempt's toolbelt socket fits neither in its run directory
/// nor in the fallback directory fails the attempt before it starts, with the path in its log and
/// the fix in its outcome; an attempt of a shallower daemon falls back and runs.
#[test]
fn a_toolbelt_socket_path_too_long_everywhere_fails_the_attempt_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = tmp.path().join("r".repeat(70));
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let env = [("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
    let deep = "s".repeat(58);
    let daemon = Daemon::start_in_state(&deep, &env, &shell_config("os outcome succeeded"));
    let work = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&work, "failed");
    let summary = failed["outcome"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("toolbelt endpoint unavailable") && summary.contains("shorter --state"),
        "{summary}"
    );
    assert_eq!(daemon.attempts(&work).len(), 1, "not retried: it would fail again");
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{}", daemon.first_execution(&work))]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains(runtime.join("open-conduit").to_str().unwrap()) && log.contains("toolbelt.sock"),
        "the log names the path: {log}"
    );

    let shallow_runtime = tmp.path().join("run");
    std::fs::create_dir(&shallow_runtime).unwrap();
    std::fs::set_permissions(&shallow_runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let env = [("XDG_RUNTIME_DIR", shallow_runtime.to_str().unwrap())];
    let daemon = Daemon::start_in_state(&deep, &env, &shell_config("os outcome succeeded"));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
}

/// A binding's `cwd` is where every attempt starts: what one Work leaves there the next finds,
/// and a declared artifact is kept from there. A `cwd` that resolves into the state directory is
/// refused before the process starts.
#[test]
fn a_shell_bindings_cwd_is_kept_across_works_and_never_reaches_the_state_directory() {
    let daemon = Daemon::start_with(|scratch| {
        let project = scratch.join("project");
        std::fs::create_dir_all(&project).unwrap();
        let script = "echo visit >> visits.txt; pwd > where.txt; os outcome succeeded --artifact where.txt";
        let mut config: Value = serde_json::from_str(&shell_config(script)).unwrap();
        config["scopes"]["demo"]["bindings"]["shell"]["config"]["cwd"] = json!(project);
        config.to_string()
    });
    let project = daemon.scratch().join("project");
    for _ in 0..2 {
        let work = daemon.create_work("demo", "shell");
        daemon.await_work(&work, "succeeded");
    }
    assert_eq!(
        std::fs::read_to_string(project.join("visits.txt")).unwrap(),
        "visit\nvisit\n"
    );
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let execution = daemon.first_execution(&work);
    let kept = daemon.cli(&["artifacts", "cat", &format!("file:{execution}:0")]);
    assert_eq!(String::from_utf8_lossy(&kept.stdout).trim(), project.to_str().unwrap());

    // A link from outside into the state directory passes the textual check, not the launch's.
    let sneaky = daemon.scratch().join("sneaky");
    let state = state_beside(daemon.scratch());
    std::os::unix::fs::symlink(&state, &sneaky).unwrap();
    let mut config: Value = serde_json::from_str(&shell_config("touch owned; os outcome succeeded")).unwrap();
    config["scopes"]["demo"]["bindings"]["shell"]["config"]["cwd"] = json!(sneaky);
    daemon.apply(&config);
    let work = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&work, "failed");
    assert_eq!(
        failed["outcome"]["summary"],
        "the executor could not start it; see its log"
    );
    assert!(!state.join("owned").exists());
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{}", daemon.first_execution(&work))]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("lies inside the daemon's state directory"), "{log}");

    // Nor one that contains it: the daemon keeps declared files from the working directory.
    let above = daemon.scratch().join("above");
    std::os::unix::fs::symlink(state.parent().unwrap(), &above).unwrap();
    let script = "os outcome succeeded --artifact state/private/operator.token";
    let mut config: Value = serde_json::from_str(&shell_config(script)).unwrap();
    config["scopes"]["demo"]["bindings"]["shell"]["config"]["cwd"] = json!(above);
    daemon.apply(&config);
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "failed");
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{}", daemon.first_execution(&work))]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("contains the daemon's state directory"), "{log}");
}
