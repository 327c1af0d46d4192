//! The harness every end-to-end test shares: a real daemon on a temporary state directory, the real
//! CLIs, and a raw HTTP client for probing sockets the CLIs would never misuse.

// Test helpers, like tests, stop loudly on what they did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

pub mod calls;
pub mod fake_http;
pub mod git_http;
pub mod github;
pub mod holder;
pub mod model;
pub mod slack;
pub mod timing;
pub mod tmux;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const OPEN_CONDUIT: &str = env!("CARGO_BIN_EXE_open-conduit");

/// A daemon running on its own temporary state directory; killed when dropped.
pub struct Daemon {
    pub tmp: tempfile::TempDir,
    pub state: PathBuf,
    scratch: PathBuf,
    pub config: Option<PathBuf>,
    child: Option<Child>,
    /// The URL of the PostgreSQL store it runs on (`--store`), when not its embedded SQLite file.
    store: Option<String>,
    /// The database made for it when `OPEN_CONDUIT_TEST_DAEMON_STORE=postgres` runs every daemon
    /// test on PostgreSQL.
    database: Option<conduit_store_postgres::testing::TestDatabase>,
}

impl Daemon {
    /// Starts a daemon with the given configuration JSON (or the built-in default) and waits until
    /// it answers `health`.
    pub fn start(config: Option<&str>) -> Daemon {
        match config {
            Some(text) => Daemon::start_with(|_| text.to_owned()),
            None => Daemon::launched(tempfile::tempdir().unwrap(), None),
        }
    }

    /// Starts a daemon whose configuration is built from its scratch directory (for commands that
    /// publish into it).
    pub fn start_with(config: impl FnOnce(&Path) -> String) -> Daemon {
        Daemon::start_with_env(&[], config)
    }

    /// Starts with extra environment variables for the daemon (such as a test fetch allowance).
    pub fn start_with_env(env: &[(&str, &str)], config: impl FnOnce(&Path) -> String) -> Daemon {
        let mut daemon = Daemon::configured(config);
        daemon.launch_with_env(env);
        daemon
    }

    /// Starts with its state directory named `name` (in its temporary directory) and with `env`.
    pub fn start_in_state(name: &str, env: &[(&str, &str)], config: &str) -> Daemon {
        let mut daemon = Daemon::configured(|_| config.to_owned());
        daemon.state = daemon.tmp.path().join(name);
        daemon.launch_with_env(env);
        daemon
    }

    /// Starts on the PostgreSQL store at `url` with extra environment variables, its configuration
    /// built from its scratch directory.
    pub fn start_on_store(url: &str, env: &[(&str, &str)], config: impl FnOnce(&Path) -> String) -> Daemon {
        let mut daemon = Daemon::configured(config);
        daemon.store = Some(url.to_owned());
        daemon.launch_with_env(env);
        daemon
    }

    /// Starts another daemon on this one's PostgreSQL store, with this one's operator token put in
    /// its state directory first, as an operator joining a daemon to a shared store copies it.
    pub fn joining(&self, env: &[(&str, &str)], config: impl FnOnce(&Path) -> String) -> Daemon {
        let mut daemon = Daemon::configured(config);
        daemon.store = self.store.clone();
        let private = daemon.state.join("private");
        for dir in [&daemon.state, &private] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let token = private.join("operator.token");
        std::fs::write(&token, self.operator_token()).unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        daemon.launch_with_env(env);
        daemon
    }

    /// The cursors this daemon seals, with its store's shared key read beside it.
    pub fn cursors(&self) -> conduit_server::Cursors {
        match &self.store {
            Some(url) => {
                let store = conduit_store_postgres::PostgresStore::open(url).unwrap();
                conduit_server::Cursors::of_store(&store).unwrap()
            }
            None => {
                // Not a second `SqliteStore`: the store refuses to open while its daemon has it.
                // Read beside it, the key is there once the daemon's commit (at most 200 ms) made it.
                let conn = rusqlite::Connection::open(self.state.join("store.db")).unwrap();
                let key = || -> Option<Vec<u8>> {
                    let sql = "SELECT key FROM shared_keys WHERE name = ?1";
                    conn.query_row(sql, [conduit_server::CURSOR_KEY], |r| r.get(0)).ok()
                };
                wait_until("the daemon's cursor key to be committed", || key().is_some());
                conduit_server::Cursors::of_shared_key(&key().unwrap())
            }
        }
    }

    /// This daemon's instance id, the owner its attempts record.
    pub fn instance(&self) -> String {
        std::fs::read_to_string(self.state.join("instance"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// Not yet launched, with a configuration file built from its scratch directory.
    fn configured(config: impl FnOnce(&Path) -> String) -> Daemon {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.json");
        let scratch = scratch_of(tmp.path());
        std::fs::write(&path, writing_scratch(&config(&scratch), &scratch)).unwrap();
        Daemon::unlaunched(tmp, Some(path))
    }

    fn launched(tmp: tempfile::TempDir, config: Option<PathBuf>) -> Daemon {
        let mut daemon = Daemon::unlaunched(tmp, config);
        daemon.launch();
        daemon
    }

    fn unlaunched(tmp: tempfile::TempDir, config: Option<PathBuf>) -> Daemon {
        let state = tmp.path().join("state");
        let database = (std::env::var("OPEN_CONDUIT_TEST_DAEMON_STORE").as_deref() == Ok("postgres"))
            .then(conduit_store_postgres::testing::TestDatabase::create)
            .flatten();
        Daemon {
            store: database.as_ref().map(|db| db.url()),
            database,
            scratch: scratch_of(tmp.path()),
            tmp,
            state,
            config,
            child: None,
        }
    }

    /// The scratch directory tests share with their shell commands (beside the state directory,
    /// not around it, so a sandbox can let commands write it).
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }

    pub fn launch(&mut self) {
        self.launch_with_env(&[]);
    }

    /// Starts with `config` under an open-files limit of `open_files` (soft and hard, as
    /// `prlimit` sets it before the daemon starts).
    pub fn start_with_open_files(open_files: u64, config: &str) -> Daemon {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.json");
        let scratch = scratch_of(tmp.path());
        std::fs::write(&path, writing_scratch(config, &scratch)).unwrap();
        let mut daemon = Daemon::unlaunched(tmp, Some(path));
        let mut prlimit = Command::new("prlimit");
        prlimit
            .arg(format!("--nofile={open_files}:{open_files}"))
            .arg("--")
            .arg(OPEN_CONDUIT);
        daemon.launch_via(prlimit, &[]);
        daemon
    }

    /// Launches with extra environment variables (such as a failpoint) and waits for health.
    pub fn launch_with_env(&mut self, env: &[(&str, &str)]) {
        self.launch_via(Command::new(OPEN_CONDUIT), env);
    }

    /// Launches `cmd` (the daemon's binary, or a launcher that runs it with the arguments that
    /// follow) as the daemon and waits for health.
    fn launch_via(&mut self, mut cmd: Command, env: &[(&str, &str)]) {
        cmd.envs(env.iter().copied());
        cmd.arg("daemon").arg("--state").arg(&self.state);
        if let Some(config) = &self.config {
            cmd.arg("--config").arg(config);
        }
        if let Some(store) = &self.store {
            cmd.arg("--store").arg(store);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.path().join("daemon.log"))
            .unwrap();
        cmd.stdout(log.try_clone().unwrap()).stderr(log).stdin(Stdio::null());
        cmd.env_remove("OPEN_CONDUIT_ENDPOINT")
            .env_remove("OPEN_CONDUIT_TOKEN_FILE")
            .env("OPEN_CONDUIT_LOG", "debug");
        self.child = Some(cmd.spawn().unwrap());
        wait_until("the daemon answers health", || self.cli(&["health"]).status.success());
    }

    /// Waits for the daemon to exit by itself (after a failpoint aborted it).
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        self.child.take().expect("daemon running").wait().unwrap()
    }

    pub fn config_file(&self) -> PathBuf {
        self.config.clone().unwrap_or_else(|| self.state.join("config.json"))
    }

    /// The daemon process's id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon running").id()
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then wait for a clean exit; returns the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        self.signal("-TERM")
    }

    /// Sends `signal` (`-HUP`, ...), then waits for the daemon to exit; returns the exit status.
    pub fn signal(&mut self, signal: &str) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .unwrap();
        child.wait().unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("daemon.log")).unwrap_or_default()
    }

    /// Runs `open-conduit` against this daemon.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(OPEN_CONDUIT)
            .args(args)
            .arg("--state")
            .arg(&self.state)
            .env_remove("OPEN_CONDUIT_ENDPOINT")
            .env_remove("OPEN_CONDUIT_TOKEN_FILE")
            .output()
            .unwrap()
    }

    /// Runs `open-conduit --json ...`, requires success, and parses stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.cli(&all);
        assert!(
            out.status.success(),
            "open-conduit {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// Runs `open-conduit --json ...` whatever its exit status: the code and the parsed stdout.
    pub fn json_unchecked(&self, args: &[&str]) -> (Option<i32>, Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.cli(&all);
        (
            out.status.code(),
            serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        )
    }

    pub fn management_socket(&self) -> PathBuf {
        self.state.join("management.sock")
    }

    pub fn operator_token(&self) -> String {
        std::fs::read_to_string(self.state.join("private/operator.token"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// Creates Work and returns its id.
    pub fn create_work(&self, scope: &str, binding: &str) -> String {
        self.json(&["work", "create", "--scope", scope, "--binding", binding])["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Waits until the Work reaches `state`, and returns it.
    /// Waits until the Work reaches `state`; past the wait, fails saying where it is and how its
    /// attempts ended.
    pub fn await_work(&self, id: &str, state: &str) -> Value {
        let start = Instant::now();
        loop {
            let last = self.json(&["work", "get", id]);
            if last["state"] == state {
                return last;
            }
            if start.elapsed() > Duration::from_secs(20) {
                let attempts: Vec<Value> = self
                    .attempts(id)
                    .iter()
                    .map(|x| serde_json::json!([x["state"], x["outcome"]]))
                    .collect();
                panic!("timed out waiting for work {id} to be {state}: it is {last}; its attempts {attempts:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The id of the Work's first execution.
    pub fn first_execution(&self, work: &str) -> String {
        self.json(&["executions", "list", "--work", work])["items"][0]["id"]
            .as_str()
            .expect("an execution")
            .to_owned()
    }

    /// The Work's attempts, oldest first.
    pub fn attempts(&self, work: &str) -> Vec<Value> {
        self.json(&["executions", "list", "--work", work])["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Applies `config` through the CLI (from a file in the scratch directory).
    pub fn apply(&self, config: &Value) -> Value {
        let file = self.scratch().join(format!("applied-{}.json", uuid::Uuid::now_v7()));
        std::fs::write(&file, writing_scratch(&config.to_string(), self.scratch())).unwrap();
        self.json(&["config", "apply", file.to_str().unwrap()])
    }

    /// An operator's event through the management API, answering its status.
    pub fn emit_event(&self, scope: &str, event_type: &str, key: &str) -> u16 {
        let auth = format!("Bearer {}", self.operator_token());
        let idempotency = uuid::Uuid::now_v7().to_string();
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Idempotency-Key", idempotency.as_str()),
        ];
        let body = serde_json::json!({"type": event_type, "scope": scope, "correlation_key": key}).to_string();
        http_raw(&self.management_socket(), "POST", "/v1/events", &headers, &body).0
    }

    pub fn events(&self, work: &str) -> Vec<Value> {
        self.json(&["events", "list", "--work", work])["items"]
            .as_array()
            .unwrap()
            .clone()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
        // A failing test's output then shows what the daemon logged (its temp dir goes with it).
        if std::thread::panicking() {
            eprintln!("--- daemon.log of the failed test ---\n{}", tail(&self.log(), 200));
        }
        // Attempts run in their own process groups; end any a test left holding.
        let _ = std::fs::write(self.scratch.join("release"), "");
    }
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `<tmp>/scratch`, created.
fn scratch_of(tmp: &Path) -> PathBuf {
    let scratch = tmp.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    scratch
}

/// A directory a test shares with its daemon's commands, outside every state directory: the
/// harness's configurations let commands write beneath [`meeting_base`].
pub fn meeting() -> tempfile::TempDir {
    tempfile::tempdir_in(meeting_base()).unwrap()
}

/// Where this test process's meeting directories are made.
fn meeting_base() -> PathBuf {
    let base = std::env::temp_dir().join(format!("oc-meet-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    base
}

/// The state directory of a daemon whose scratch directory is `scratch`.
pub fn state_beside(scratch: &Path) -> PathBuf {
    scratch.parent().unwrap().join("state")
}

/// Configuration text whose bindings without a `sandbox` of their own may also write `scratch` and
/// the meeting directories (where tests and their commands meet); text that is not a JSON object is left as it is.
pub fn writing_scratch(text: &str, scratch: &Path) -> String {
    let Ok(mut config) = serde_json::from_str::<Value>(text) else {
        return text.to_owned();
    };
    let bindings = config["scopes"]
        .as_object_mut()
        .into_iter()
        .flat_map(|scopes| scopes.values_mut())
        .filter_map(|scope| scope.get_mut("bindings").and_then(Value::as_object_mut))
        .flat_map(|bindings| bindings.values_mut())
        .filter_map(Value::as_object_mut);
    for binding in bindings.filter(|b| !b.contains_key("sandbox")) {
        binding.insert(
            "sandbox".into(),
            serde_json::json!({"write": [scratch, meeting_base()]}),
        );
    }
    config.to_string()
}

/// Polls `done` every 50 ms for up to 20 s.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    wait_within(Duration::from_secs(20), what, done);
}

/// `open-conduit` at `args` with `stdin` piped in.
pub fn open_conduit_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(OPEN_CONDUIT)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Polls `done` every 50 ms for up to `bound`.
pub fn wait_within(bound: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < bound, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A raw HTTP/1.1 request over a Unix socket: the status and the JSON body.
pub fn http(socket: &Path, method: &str, path: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    headers.extend(auth.as_deref().map(|a| ("Authorization", a)));
    http_raw(
        socket,
        method,
        path,
        &headers,
        &body.map(Value::to_string).unwrap_or_default(),
    )
}

/// A raw HTTP/1.1 request with exactly these headers and this body text: the status and JSON body.
pub fn http_raw(socket: &Path, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let response = http_response(socket, method, path, headers, body);
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The whole raw response text of a request (status line, headers and body).
pub fn http_response(socket: &Path, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut stream = UnixStream::connect(socket).unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    let headers: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// A management `GET` of `path` with `If-None-Match: etag` when given: its status and its ETag.
pub fn revalidate(daemon: &Daemon, path: &str, etag: Option<&str>) -> (u16, Option<String>) {
    let auth = format!("Bearer {}", daemon.operator_token());
    let mut headers = vec![("Authorization", auth.as_str())];
    headers.extend(etag.map(|tag| ("If-None-Match", tag)));
    let response = http_response(&daemon.management_socket(), "GET", path, &headers, "");
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let etag = response.lines().take_while(|l| !l.is_empty()).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("etag").then(|| v.trim().to_owned())
    });
    (status, etag)
}

/// `path`'s single read carries an ETag and answers `304` to it, until `change` changes the
/// resource: then `200` with a new ETag.
pub fn assert_revisions(daemon: &Daemon, path: &str, change: impl FnOnce()) {
    let (status, etag) = revalidate(daemon, path, None);
    let etag = etag.unwrap_or_else(|| panic!("{path} carries an ETag"));
    assert_eq!(status, 200, "{path}");
    assert_eq!(
        revalidate(daemon, path, Some(&etag)),
        (304, Some(etag.clone())),
        "{path}"
    );
    change();
    let (status, changed) = revalidate(daemon, path, Some(&etag));
    assert_eq!(status, 200, "{path} changed, so its revision did");
    assert_ne!(changed.as_deref(), Some(etag.as_str()), "{path}");
}

/// A daemon that also listens on a free loopback port (answered), may fetch from the test server
/// on `api_port` through the egress guard's test allowance, and has `env` besides.
pub fn daemon_beside(api_port: u16, env: &[(&str, &str)], config: impl FnOnce(&Path) -> String) -> (Daemon, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (allow, listen) = (format!("127.0.0.1:{api_port}"), format!("127.0.0.1:{port}"));
    let mut all = vec![
        ("OPEN_CONDUIT_TEST_FETCH_ALLOW", allow.as_str()),
        ("OPEN_CONDUIT_LISTEN", listen.as_str()),
    ];
    all.extend_from_slice(env);
    (Daemon::start_with_env(&all, config), port)
}

/// A raw HTTP/1.1 POST over loopback TCP (the listener's ingress routes): the status and the
/// JSON answer.
pub fn tcp_post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let headers: String = headers.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n\
         {headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let json = response
        .split("\r\n\r\n")
        .nth(1)
        .and_then(|b| serde_json::from_str(b).ok());
    (status, json.unwrap_or(Value::Null))
}

/// A toolbelt call through the raw client.
pub fn toolbelt_call(socket: &Path, token: &str, operation: &str, input: Value) -> (u16, Value) {
    let body = serde_json::json!({"operation": operation, "input": input});
    http(socket, "POST", "/v1/toolbelt/call", Some(token), Some(&body))
}

pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A one-scope configuration whose `shell` binding runs `script` with `/bin/sh -c`.
pub fn shell_config(script: &str) -> String {
    serde_json::json!({
        "version": 1,
        "scopes": {"demo": {
            "authorization": {"operations": ["emit", "read_context", "declare_outcome", "wait", "create_work"]},
            "bindings": {"shell": {
                "executor": "shell",
                "config": {"command": ["/bin/sh", "-c", script], "timeout": "5m"},
                "operations": ["emit", "read_context", "declare_outcome", "wait", "create_work"]
            }},
            "routes": [{"on": "demo.requested", "binding": "shell"}]
        }}
    })
    .to_string()
}

/// `shell_config(script)` with `operations` as both the demo scope's ceiling and its binding's grant.
pub fn granting(script: &str, operations: Value) -> Value {
    let mut config: Value = serde_json::from_str(&shell_config(script)).unwrap();
    config["scopes"]["demo"]["authorization"]["operations"] = operations.clone();
    config["scopes"]["demo"]["bindings"]["shell"]["operations"] = operations;
    config
}

/// Shell lines that publish this attempt's endpoint and token-file paths into a fresh `run.*`
/// directory under `dir`, then hold until `dir/release` exists, or `dir` is gone (so no attempt
/// outlives its test).
pub fn publish_and_hold(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "r=$(mktemp -d {d}/run.XXXXXX) && echo \"$OS_ENDPOINT\" > $r/endpoint && echo \"$OS_TOKEN_FILE\" > $r/token_file && \
         while [ -d {d} ] && [ ! -f {d}/release ]; do sleep 0.05; done"
    )
}

/// The `run.*` directories published by held attempts: (endpoint, token file) pairs.
pub fn published_runs(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut runs: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("run."))
        .filter_map(|e| {
            let read = |f: &str| {
                std::fs::read_to_string(e.path().join(f))
                    .ok()
                    .map(|s| PathBuf::from(s.trim()))
            };
            Some((read("endpoint")?, read("token_file")?))
        })
        .collect();
    runs.sort();
    runs
}

pub fn read_token(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_owned()
}

/// Every byte of the SQLite files (database, WAL, shared memory) in `dir`.
pub fn store_files(dir: &Path) -> Vec<u8> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("store.db"))
        .flat_map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect()
}

/// Whether `needle` occurs anywhere in `bytes`.
pub fn contains(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Whether a fenced attempt's token is refused: its socket answers 403, or it is already gone. A
/// socket being closed as the attempt ends may also take a connection and close it unanswered
/// (status 0): that is no way in either. Only an answer that served the call is not fenced.
pub fn fenced(socket: &Path, token: &str) -> bool {
    if UnixStream::connect(socket).is_err() {
        return true;
    }
    std::panic::catch_unwind(|| toolbelt_call(socket, token, "read_context", serde_json::json!({})).0)
        .map_or(true, |status| status == 403 || status == 0)
}

/// Creates Work in `demo`/`shell` (whose command is [`publish_and_hold`] into `scratch`) and waits
/// until its attempt holds: the Work's id, the attempt's socket and its token file.
pub fn hold_one(daemon: &Daemon, scratch: &Path) -> (String, PathBuf, PathBuf) {
    hold_created(scratch, || daemon.create_work("demo", "shell"))
}

/// Runs `create` (which creates Work whose attempt publishes and holds, answering its id) and waits
/// for that attempt: the Work, its socket and its token file.
pub fn hold_created(scratch: &Path, create: impl FnOnce() -> String) -> (String, PathBuf, PathBuf) {
    let before = published_runs(scratch);
    let work = create();
    let mut held = None;
    wait_until("a held attempt", || {
        held = published_runs(scratch)
            .into_iter()
            .find(|run| !before.contains(run) && run.1.exists());
        held.is_some()
    });
    let (socket, token_file) = held.expect("a held attempt");
    (work, socket, token_file)
}

/// Writes playbook `name` (`skills/<name>/SKILL.md`) where a daemon started in `scratch` finds it,
/// creating the state directory owner-only first.
pub fn plant_playbook(scratch: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let skill = state_beside(scratch).join("playbooks/skills").join(name);
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::set_permissions(state_beside(scratch), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(skill.join("SKILL.md"), text).unwrap();
}

/// Writes `secrets` as the `file:` secrets of the state directory a daemon started in `scratch` will
/// use, creating that directory (and `private/`) owner-only first.
pub fn plant_secrets(scratch: &Path, secrets: Value) {
    use std::os::unix::fs::PermissionsExt;
    let private = state_beside(scratch).join("private");
    std::fs::create_dir_all(&private).unwrap();
    for dir in [state_beside(scratch), private.clone()] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let file = private.join("secrets.json");
    std::fs::write(&file, secrets.to_string()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A local HTTP server that answers `hello` and keeps every request head it read.
pub fn test_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            seen.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello");
        }
    });
    (port, heads)
}

/// Runs the calling test inside a network namespace of its own with only loopback up (`unshare
/// -rn`), so a program it drives that contacts outside hosts (the agent CLIs do) reaches nothing:
/// answers `true` inside it, where the test's body runs; outside, it re-runs just this test
/// there, fails if that failed, and answers `false`.
pub fn inside_loopback_namespace(test: &str) -> bool {
    const MARK: &str = "OPEN_CONDUIT_TEST_IN_NETNS";
    if std::env::var_os(MARK).is_some() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let status = Command::new("unshare")
        .args(["-rn", "--", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(MARK, "1")
        .output()
        .expect("unshare (util-linux) and ip (iproute2) run the test in a loopback-only namespace");
    assert!(
        status.status.success(),
        "{test} failed inside its loopback-only namespace:\n{}\n{}",
        String::from_utf8_lossy(&status.stdout),
        String::from_utf8_lossy(&status.stderr)
    );
    false
}

/// Kills the process group led by `pid` (as an attempt's is), as if it died on its own, and
/// returns once its leader is gone (or a zombie nobody reaps), so a daemon started next cannot
/// still find it alive.
pub fn kill_group(pid: &str) {
    let pid = pid.trim();
    let killed = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL -{pid}");
    wait_until("the killed process to be gone", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
    });
}
