//! Several daemons on one PostgreSQL store, as real processes: attempts are taken over after their
//! daemon dies, and fenced. Skipped without the server `OPEN_CONDUIT_TEST_POSTGRES` names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::timing::{median, millis};
use common::*;
use conduit_config::{parse, CurrentConfig};
use conduit_server::SystemClock;
use conduit_store::Store;
use conduit_store_postgres::testing::TestDatabase;
use conduit_store_postgres::PostgresStore;
use conduit_toolbelt::Toolbelt;
use serde_json::Value;

const WORKS: usize = 60;
/// The shortest there is, so the drill waits ten seconds for a takeover, not the default 30.
const LEASE: [(&str, &str); 1] = [("OPEN_CONDUIT_LEASE", "10s")];
/// Far more than the drill needs (about twenty seconds); it stops here whatever happens.
const DRILL_BOUND: Duration = Duration::from_secs(120);

/// A binding that emits, sleeps and declares, noting each acknowledged event's id in `meet/acked`.
fn drill_config(meet: &Path) -> String {
    let acked = meet.join("acked");
    let a = acked.display();
    shell_config(&format!(
        r#"set -e
e=$(os emit drill.step --data '{{"step":1}}'); echo "$e" >> {a}; sleep 1
e=$(os emit drill.step --data '{{"step":2}}'); echo "$e" >> {a}; sleep 1
os outcome succeeded --summary drilled"#
    ))
}

#[test]
fn three_daemons_lose_one_to_kill_9_and_every_work_succeeds_exactly_once() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let meet = meeting();
    let config = drill_config(meet.path());
    let (mut a, b) = two_daemons(&db, &LEASE, &config);
    let c = a.joining(&LEASE, |_| config.clone());
    let creators: BTreeMap<String, String> = (0..WORKS)
        .map(|i| {
            let daemon = [&a, &b, &c][i % 3];
            (daemon.create_work("demo", "shell"), daemon.instance())
        })
        .collect();

    let killed = a.instance();
    let mut doomed = Vec::new();
    wait_until("the daemon to kill runs attempts that emitted", || {
        doomed = running_of(&b, &killed);
        doomed.len() >= 3 && emitted_by(&b, &doomed)
    });
    let old_tokens: Vec<(String, String)> = doomed
        .iter()
        .filter_map(|id| Some((id.clone(), token_of(&a, id)?)))
        .collect();
    assert!(!old_tokens.is_empty());
    a.kill();

    let authority = Authority::on(&db, &config);
    watch_until_all_succeeded(&b, &c, &creators, &authority);
    let executions = all_executions(&b);
    for work in creators.keys() {
        check_work(work, &executions, &b);
    }
    // Each killed daemon's attempt was taken over: abandoned, or finished with the outcome it had
    // declared before the kill.
    let mut abandoned = 0;
    for (id, _) in &old_tokens {
        let x = executions.iter().find(|x| x["id"] == id.as_str()).unwrap();
        let summary = x["outcome"]["summary"].as_str().unwrap_or_default();
        match x["state"].as_str() {
            Some("failed") if summary.contains("stopped renewing the lease") => abandoned += 1,
            Some("succeeded") if summary == "drilled" => {}
            _ => panic!("{x}"),
        }
    }
    assert!(abandoned > 0, "some of the killed daemon's attempts were mid-run");
    let known: HashSet<String> = b.json(&["events", "list"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    let acked = acked(meet.path());
    assert!(acked.len() >= 2 * WORKS, "every Work emitted twice at least");
    for id in &acked {
        assert!(known.contains(id), "the acknowledged event {id} is in the store");
    }
    for (execution, token) in &old_tokens {
        assert!(
            !authority.accepts(execution, token),
            "the killed daemon's token for {execution} is refused"
        );
    }
    report_claim_latency(&creators, &b, &executions);
}

/// The running attempts leased to `owner`, as the store has them.
fn running_of(daemon: &Daemon, owner: &str) -> Vec<String> {
    all_executions(daemon)
        .iter()
        .filter(|x| x["state"] == "running" && x["owner"] == owner)
        .map(|x| x["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Whether one of `executions` has an event in the store.
fn emitted_by(daemon: &Daemon, executions: &[String]) -> bool {
    let events = daemon.json(&["events", "list"])["items"].as_array().unwrap().clone();
    events
        .iter()
        .any(|e| e["type"] == "drill.step" && executions.iter().any(|x| e["execution_id"] == x.as_str()))
}

fn all_executions(daemon: &Daemon) -> Vec<Value> {
    daemon.json(&["executions", "list"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// The event ids the drill's commands saw acknowledged.
fn acked(meet: &Path) -> Vec<String> {
    std::fs::read_to_string(meet.join("acked"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The token an attempt of `daemon` holds, read from its run directory (gone once it ended).
fn token_of(daemon: &Daemon, execution: &str) -> Option<String> {
    let file = daemon
        .state
        .join("runs")
        .join(conduit_daemon::run_key(execution))
        .join("token/token");
    Some(std::fs::read_to_string(file).ok()?.trim().to_owned())
}

/// The toolbelt's authority over the shared store, in process: the checks every daemon's sockets
/// run, reachable even for a killed daemon's attempts, whose sockets went with it.
struct Authority(Toolbelt);

impl Authority {
    fn on(db: &TestDatabase, config: &str) -> Authority {
        let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&db.url()).unwrap());
        let snapshot = parse(config.as_bytes()).unwrap().at_generation(1);
        Authority(Toolbelt::new(
            store,
            CurrentConfig::new(snapshot),
            Arc::new(SystemClock),
            Arc::default(),
        ))
    }

    fn accepts(&self, execution: &str, token: &str) -> bool {
        match self.0.tools(execution, token, None) {
            Ok(_) => true,
            Err(refusal) => {
                assert_eq!(refusal.code, conduit_core::ErrorCode::Forbidden, "{refusal:?}");
                false
            }
        }
    }
}

/// Watches the survivors until every Work succeeded, checking all along that no Work has two
/// running attempts, and that the authority accepts a token a survivor holds live (the control
/// for the refusal of the killed daemon's tokens).
fn watch_until_all_succeeded(b: &Daemon, c: &Daemon, works: &BTreeMap<String, String>, authority: &Authority) {
    let start = Instant::now();
    let mut live_accepted = false;
    loop {
        let executions = all_executions(b);
        let mut running = BTreeSet::new();
        for x in executions.iter().filter(|x| x["state"] == "running") {
            let (id, work) = (x["id"].as_str().unwrap(), x["work_id"].as_str().unwrap());
            assert!(running.insert(work.to_owned()), "two running attempts of {work}");
            if !live_accepted && x["owner"] == b.instance().as_str() {
                live_accepted = token_of(b, id).is_some_and(|token| authority.accepts(id, &token));
            }
        }
        let succeeded = c.json(&["work", "list", "--in-state", "succeeded"])["items"]
            .as_array()
            .unwrap()
            .len();
        if succeeded == works.len() {
            assert!(live_accepted, "control: a survivor's live token was accepted");
            return;
        }
        assert!(
            start.elapsed() < DRILL_BOUND,
            "{succeeded} of {} Works succeeded; executions: {executions:?}",
            works.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Work succeeded exactly once, and its attempts held their leases one after the other: each
/// started after the one before ended and, when that one was taken over, after its lease lapsed.
fn check_work(work: &str, executions: &[Value], daemon: &Daemon) {
    assert_eq!(daemon.json(&["work", "get", work])["state"], "succeeded");
    let mut attempts: Vec<&Value> = executions.iter().filter(|x| x["work_id"] == work).collect();
    attempts.sort_by_key(|x| x["epoch"].as_u64());
    let succeeded = attempts.iter().filter(|x| x["state"] == "succeeded").count();
    assert_eq!(succeeded, 1, "{work}: {attempts:?}");
    for pair in attempts.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        let started = after["started_at"].as_str().unwrap();
        assert!(started >= before["ended_at"].as_str().unwrap(), "{work}: {attempts:?}");
        if before["outcome"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("renewing"))
        {
            assert!(
                started >= before["lease_expires_at"].as_str().unwrap(),
                "{work}: {attempts:?}"
            );
        }
    }
}

/// Prints how long Work waited from creation to its first attempt, by whether the daemon that
/// created it claimed it.
fn report_claim_latency(creators: &BTreeMap<String, String>, daemon: &Daemon, executions: &[Value]) {
    let created: BTreeMap<String, Value> = daemon.json(&["work", "list"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["id"].as_str().unwrap().to_owned(), w["created_at"].clone()))
        .collect();
    let (mut same, mut other) = (Vec::new(), Vec::new());
    for x in executions.iter().filter(|x| x["epoch"] == 1) {
        let work = x["work_id"].as_str().unwrap();
        let Some(creator) = creators.get(work) else { continue };
        let waited = millis(&x["started_at"]) - millis(&created[work]);
        if &x["owner"] == creator { &mut same } else { &mut other }.push(waited);
    }
    let show = |v: &mut Vec<f64>| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            format!("{:.0} ms", median(v))
        }
    };
    println!(
        "claim latency p50: by the creating daemon {} ({}), by another {} ({})",
        show(&mut same),
        same.len(),
        show(&mut other),
        other.len()
    );
}

#[test]
fn a_frozen_daemons_attempt_is_taken_over_and_its_late_calls_are_refused() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let meet = meeting();
    let config = shell_config(&publish_and_hold(meet.path()));
    let a = Daemon::start_on_store(&db.url(), &LEASE, |_| config.clone());
    let (work, socket, token_file) = hold_one(&a, meet.path());
    let (token, frozen_socket) = (read_token(&token_file), socket.clone());
    let frozen = a.first_execution(&work);
    // Started after A claimed the Work, so A is the one that runs its first attempt.
    let b = a.joining(&LEASE, |_| config.clone());
    signal(&a, "STOP");
    // A frozen daemon may hold the store's write lock until the server ends its session (60 s).
    wait_within(
        Duration::from_secs(90),
        "the frozen daemon's attempt to be taken over",
        || execution(&b, &frozen)["state"] == "failed",
    );
    wait_until("the Work's next attempt to hold on the survivor", || {
        published_runs(meet.path()).len() == 2
    });
    // Sent while A is frozen, so A reads it only once it thaws, with its attempt already taken over.
    let late = std::thread::spawn(move || {
        std::panic::catch_unwind(|| toolbelt_call(&socket, &token, "emit", serde_json::json!({"type": "drill.late"})))
            .ok()
    });
    std::thread::sleep(Duration::from_millis(300));
    signal(&a, "CONT");
    // Answered with a refusal, or not at all when the thawed daemon closed the fenced attempt's
    // socket before reading it; either way it leaves nothing (checked below).
    if let Some((status, body)) = late.join().unwrap() {
        assert_eq!(status, 403, "the old epoch's call is refused: {body}");
    }
    wait_until("the thawed daemon to stop its fenced attempt", || {
        a.log().contains("lease lost; stopping the attempt")
    });
    let x = execution(&b, &frozen);
    assert!(
        x["outcome"]["summary"].as_str().unwrap().contains("stopped renewing"),
        "{x}"
    );
    let attempts = b.attempts(&work);
    assert_eq!((attempts.len(), &attempts[1]["owner"]), (2, &Value::from(b.instance())));
    let (live_socket, live_token) = published_runs(meet.path())
        .into_iter()
        .find(|(s, _)| *s != frozen_socket)
        .unwrap();
    let (status, _) = toolbelt_call(
        &live_socket,
        &read_token(&live_token),
        "emit",
        serde_json::json!({"type": "drill.live"}),
    );
    assert_eq!(status, 200, "control: the current epoch's call is accepted");
    let types: Vec<Value> = b.events(&work).iter().map(|e| e["type"].clone()).collect();
    assert!(types.contains(&Value::from("drill.live")), "{types:?}");
    assert!(
        !types.contains(&Value::from("drill.late")),
        "the late call left nothing: {types:?}"
    );
}

/// Two daemons on `db`'s store, both started with `config` and `env`: the second with the first's
/// operator token.
fn two_daemons(db: &TestDatabase, env: &[(&str, &str)], config: &str) -> (Daemon, Daemon) {
    let first = Daemon::start_on_store(&db.url(), env, |_| config.to_owned());
    let second = first.joining(env, |_| config.to_owned());
    (first, second)
}

/// Two daemons on `db` whose binding holds its attempts in `meet` ([`publish_and_hold`]): the
/// holding script, and the daemons.
fn holding_pair(db: &TestDatabase, meet: &Path) -> (String, Daemon, Daemon) {
    let hold = publish_and_hold(meet);
    let (a, b) = two_daemons(db, &[], &shell_config(&hold));
    (hold, a, b)
}

fn execution(daemon: &Daemon, id: &str) -> Value {
    all_executions(daemon)
        .into_iter()
        .find(|x| x["id"] == id)
        .expect("the execution")
}

/// Sends a daemon SIGSTOP or SIGCONT.
fn signal(daemon: &Daemon, which: &str) {
    let sent = std::process::Command::new("kill")
        .arg(format!("-{which}"))
        .arg(daemon.pid().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
}

/// The operations the configuration tests start with; narrowing drops `emit`.
const ALL: [&str; 5] = ["emit", "read_context", "declare_outcome", "wait", "create_work"];

#[test]
fn an_apply_on_one_daemon_governs_the_next_call_on_another() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let meet = meeting();
    let (hold, a, b) = holding_pair(&db, meet.path());
    let (work, socket, token_file) = hold_one(&a, meet.path());
    let token = read_token(&token_file);
    let runner = &a.attempts(&work)[0]["owner"];
    let (running, other) = if runner.as_str() == Some(a.instance().as_str()) {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let emit = || toolbelt_call(&socket, &token, "emit", serde_json::json!({"type": "demo.step"})).0;
    assert_eq!(emit(), 200, "control: granted before the apply");

    let narrowed = granting(&hold, serde_json::json!(ALL[1..]));
    let applied = other.apply(&narrowed);
    assert_eq!(
        emit(),
        403,
        "the next call on the daemon running the attempt is narrowed"
    );
    let (_, tools) = http(&socket, "GET", "/v1/tools", Some(&token), None);
    assert!(!tools.to_string().contains("\"emit\""), "{tools}");
    let seen = running.json(&["config", "show"]);
    assert_eq!(
        (&seen["generation"], &seen["hash"]),
        (&applied["generation"], &applied["hash"])
    );
}

#[test]
fn two_daemons_applying_at_once_one_wins_and_both_then_serve_it() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let config = shell_config("true");
    let (a, b) = two_daemons(&db, &[], &config);
    let generation = a.json(&["config", "show"])["generation"].to_string();
    let apply = |daemon: &Daemon, operations: &[&str]| {
        let file = daemon.scratch().join("candidate.json");
        std::fs::write(&file, granting("true", serde_json::json!(operations)).to_string()).unwrap();
        let file = file.to_str().unwrap().to_owned();
        daemon.json_unchecked(&["config", "apply", &file, "--expected-generation", &generation])
    };
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| apply(&a, &ALL[1..]));
        let second = s.spawn(|| apply(&b, &ALL[2..]));
        (first.join().unwrap(), second.join().unwrap())
    });
    let (won, lost) = match (first.0, second.0) {
        (Some(0), Some(1)) => (first.1, second.1),
        (Some(1), Some(0)) => (second.1, first.1),
        _ => panic!("one apply wins and one is refused: {first:?} {second:?}"),
    };
    assert_eq!(lost["error"], "stale_generation", "{lost}");
    for daemon in [&a, &b] {
        let seen = daemon.json(&["config", "show"]);
        assert_eq!((&seen["generation"], &seen["hash"]), (&won["generation"], &won["hash"]));
    }
}

#[test]
fn the_store_holds_no_reference_text_and_a_daemon_resolves_only_references_given_to_it() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let meet = meeting();
    let mut config: Value = serde_json::from_str(&shell_config(&format!(
        "printf %s \"$DEPLOY_KEY\" > $(mktemp {}/seen.XXXXXX)",
        meet.path().display()
    )))
    .unwrap();
    config["secrets"] = serde_json::json!({"deploy_key": "cmd:printf reference-only-on-a"});
    config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = serde_json::json!(["deploy_key"]);
    let with_secret = config.to_string();
    let a = Daemon::start_on_store(&db.url(), &[], |_| with_secret.clone());
    // B's own file names no secret: the generation it runs comes from the store, sealed.
    let b = a.joining(&[], |_| shell_config("true"));
    let dump = db.dump();
    assert!(
        !contains(&dump, "reference-only-on-a"),
        "no reference text in the store"
    );
    let sealed = conduit_config::seal("cmd:printf reference-only-on-a");
    assert!(
        contains(&dump, &sealed),
        "control: the dump holds the generation, sealed"
    );
    let shown = b.json(&["config", "show"]);
    assert_eq!(shown["config"]["secrets"]["deploy_key"], "sealed:<redacted>");

    let refused = run_on(&b, &a);
    assert!(
        refused["outcome"]["summary"]
            .as_str()
            .unwrap()
            .contains("could not be resolved"),
        "{refused}"
    );
    assert!(b.log().contains("reference_unknown"), "the log says which");
    // Applying the same configuration through B teaches it the reference, changing nothing else.
    let file = b.scratch().join("same.json");
    std::fs::write(&file, writing_scratch(&config.to_string(), a.scratch())).unwrap();
    let again = b.json(&["config", "apply", file.to_str().unwrap()]);
    assert_eq!(
        (&again["changed"], &again["generation"]),
        (&Value::from(false), &shown["generation"])
    );
    let ran = run_on(&b, &a);
    assert_eq!(ran["state"], "succeeded", "{ran}");
    let seen: Vec<String> = std::fs::read_dir(meet.path())
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(seen.contains(&"reference-only-on-a".to_owned()), "{seen:?}");
}

/// Runs one Work on `runner` with `idle` stopped (so it cannot claim it), and answers it finished.
fn run_on(runner: &Daemon, idle: &Daemon) -> Value {
    signal(idle, "STOP");
    let work = runner.create_work("demo", "shell");
    wait_until("the Work to finish", || {
        let state = runner.json(&["work", "get", &work])["state"].clone();
        state == "succeeded" || state == "failed"
    });
    let done = runner.json(&["work", "get", &work]);
    signal(idle, "CONT");
    done
}

#[test]
fn a_daemon_that_cannot_run_the_latest_generation_refuses_calls_until_it_can() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let meet = meeting();
    let (hold, a, b) = holding_pair(&db, meet.path());
    signal(&a, "STOP");
    let (_, socket, token_file) = hold_one(&b, meet.path());
    signal(&a, "CONT");
    let token = read_token(&token_file);
    let emit = || toolbelt_call(&socket, &token, "emit", serde_json::json!({"type": "demo.step"}));
    assert_eq!(emit().0, 200, "control: B runs the latest generation");

    // A generation naming a package only A has: B cannot validate it, so it serves nothing older.
    let package = probe_package(meet.path());
    assert_eq!(
        a.json(&["packages", "install", package.to_str().unwrap()])["status"],
        "ok"
    );
    let mut operations = ALL.to_vec();
    operations.push("probe.look");
    let applied = a.apply(&granting(&hold, serde_json::json!(operations)));
    let (status, refused) = emit();
    assert_eq!(
        (status, &refused["error"]),
        (503, &Value::from("generation_unavailable")),
        "{refused}"
    );
    assert_eq!(refused["generation"], applied["generation"]);
    assert!(b.log().contains("cannot run the generation another daemon committed"));

    assert_eq!(
        b.json(&["packages", "install", package.to_str().unwrap()])["status"],
        "ok"
    );
    assert_eq!(emit().0, 200, "installed here too, B runs it");
    assert_eq!(b.json(&["config", "show"])["generation"], applied["generation"]);
}

/// A package directory whose one operation, `probe.look`, needs nothing.
fn probe_package(root: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join("pkg-probe");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let manifest = serde_json::json!({"name": "probe", "version": "1.0.0",
        "runtime": {"language": "process", "entry": "bin/run", "requires": []},
        "provides": {"operations": [{"name": "probe.look", "summary": "Look.", "input_schema": {"type": "object"}, "safety_tier": "read"}]}});
    std::fs::write(dir.join("open-conduit.json"), manifest.to_string()).unwrap();
    std::fs::write(dir.join("bin/run"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(dir.join("bin/run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn an_event_accepted_on_one_daemon_wakes_work_another_ran() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let script = "case \"$(os context)\" in *demo.go*) os outcome succeeded;; *) os wait --for demo.go;; esac";
    let config = shell_config(script);
    let (a, b) = two_daemons(&db, &[], &config);
    signal(&a, "STOP");
    let work = b.create_work("demo", "shell");
    b.await_work(&work, "waiting");
    signal(&a, "CONT");
    let woke = a.json(&["work", "wake", &work, "--type", "demo.go"]);
    assert_eq!(woke["woke"], true);
    b.await_work(&work, "succeeded");
    let attempts = a.attempts(&work);
    assert_eq!(
        attempts[0]["owner"].as_str(),
        Some(b.instance().as_str()),
        "B ran the first segment"
    );
    let waited = millis(&attempts[1]["started_at"]) - millis(&woke["event"]["accepted_at"]);
    println!("woken on another daemon: the next attempt started {waited:.0} ms after the event");
}

#[test]
fn a_daemon_reaches_its_store_over_tls_with_a_password_from_a_secret_reference() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let (url, access) = db.over_tls();
    let meet = meeting();
    let ca = meet.path().join("ca.pem");
    std::fs::write(&ca, access.ca_pem.as_ref().unwrap()).unwrap();
    let password = access.password.clone().unwrap();
    let ca = ca.to_str().unwrap();
    let reference = [
        ("OPEN_CONDUIT_STORE_PASSWORD", "env:OC_TEST_STORE_PASSWORD"),
        ("OPEN_CONDUIT_STORE_CA", ca),
    ];

    // Control first: without the variable the reference names, the daemon does not start, and says why.
    let state = tempfile::tempdir().unwrap();
    let refused = std::process::Command::new(OPEN_CONDUIT)
        .args(["daemon", "--state"])
        .arg(state.path().join("state"))
        .args(["--store", &url])
        .envs(reference)
        .env_remove("OC_TEST_STORE_PASSWORD")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("env_unset"), "{said}");

    let mut env = reference.to_vec();
    env.push(("OC_TEST_STORE_PASSWORD", &password));
    let daemon = Daemon::start_on_store(&url, &env, |_| shell_config("os outcome succeeded"));
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    assert!(!daemon.log().contains(&password), "the password is never logged");
}

#[test]
fn a_daemon_frozen_while_its_attempts_secrets_resolve_does_not_start_the_process() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let meet = meeting();
    let started = format!("echo started > $(mktemp {}/started.XXXXXX)", meet.path().display());
    let mut config: Value = serde_json::from_str(&shell_config(&started)).unwrap();
    config["secrets"] = serde_json::json!({"slow": "cmd:sleep 3; printf s"});
    config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = serde_json::json!(["slow"]);
    let config = config.to_string();
    let a = Daemon::start_on_store(&db.url(), &LEASE, |_| config.clone());
    let b = a.joining(&LEASE, |_| config.clone());
    signal(&b, "STOP");
    let work = a.create_work("demo", "shell");
    wait_until("A to claim the Work", || !a.attempts(&work).is_empty());
    // Frozen while its secret resolves: B takes the attempt over and runs the next one.
    signal(&a, "STOP");
    signal(&b, "CONT");
    let starts = || std::fs::read_dir(meet.path()).unwrap().count();
    wait_within(Duration::from_secs(40), "the next attempt's process to start", || {
        starts() > 0
    });
    signal(&a, "CONT");
    wait_until("A to find its lease lost", || {
        a.log().contains("lease lost before the process started")
    });
    b.await_work(&work, "succeeded");
    assert_eq!(starts(), 1, "only the attempt holding its lease started a process");
    let attempts = b.attempts(&work);
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[1]["owner"].as_str(), Some(b.instance().as_str()));
}
