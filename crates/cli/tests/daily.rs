//! The operator's daily use of the daemon: a `--config` that names no file is refused, the log is
//! plain text when it is not a terminal, SIGHUP stops the daemon as cleanly as SIGTERM, and doctor
//! prints its version plainly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::tmux::Tmux;
use common::*;
use serde_json::{json, Value};

#[test]
fn a_config_flag_naming_no_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.json");
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["daemon", "--state"])
        .arg(tmp.path().join("state"))
        .arg("--config")
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a missing file does not start the default");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("does not exist") && stderr.contains(missing.to_str().unwrap()),
        "{stderr}"
    );
    assert!(!tmp.path().join("state/management.sock").exists(), "nothing was served");
}

#[test]
fn sighup_stops_the_daemon_cleanly_and_its_log_is_plain_text() {
    let mut daemon = Daemon::start(Some(&shell_config("true")));
    let doctor = daemon.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains(&format!("up (version {},", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    let status = daemon.signal("-HUP");
    assert!(status.success(), "a clean shutdown: {status:?}");
    assert!(!daemon.management_socket().exists(), "its socket is removed");
    let log = daemon.log();
    assert!(log.contains("open-conduit daemon is up"), "{log}");
    assert!(!log.contains('\u{1b}'), "no colour codes in a log file: {log}");
}

/// `open-conduit` at `args` with `stdin` piped in, against `daemon`'s state directory.
fn piped(daemon: &Daemon, args: &[&str], stdin: &str) -> std::process::Output {
    let state = daemon.state.display().to_string();
    open_conduit_with_stdin(&[args, &["--state", &state]].concat(), stdin)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn completions_and_manual_pages_are_generated_from_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = std::process::Command::new(OPEN_CONDUIT)
            .args(["completion", shell])
            .output()
            .unwrap();
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && script.contains("approvals"),
            "{shell}: {script}"
        );
    }
    let page = std::process::Command::new(OPEN_CONDUIT).arg("man").output().unwrap();
    assert!(String::from_utf8_lossy(&page.stdout).contains(".TH open-conduit 1"));
    let dir = tmp.path().join("man1");
    let written = std::process::Command::new(OPEN_CONDUIT)
        .args(["man", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(written.status.success(), "{}", stderr(&written));
    for page in [
        "open-conduit.1",
        "open-conduit-work-create.1",
        "open-conduit-secrets-set.1",
    ] {
        assert!(dir.join(page).is_file(), "{page}");
    }
}

#[test]
fn the_catalog_is_listed_and_one_tool_shown() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let tools = daemon.json(&["tools"]);
    let ids: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["toolId"].as_str())
        .collect();
    assert!(ids.contains(&"emit") && ids.contains(&"http.fetch"), "{ids:?}");
    let in_scope = daemon.json(&["tools", "--scope", "demo"]);
    assert!(
        in_scope.as_array().unwrap().len() < ids.len(),
        "a scope's ceiling narrows it"
    );
    assert_eq!(daemon.json(&["tools", "emit"])["toolId"], "emit");
    let (code, refused) = daemon.json_unchecked(&["tools", "no.such.tool"]);
    assert_eq!((code, refused["error"].as_str()), (Some(1), Some("not_found")));
    let text = String::from_utf8_lossy(&daemon.cli(&["tools"]).stdout).into_owned();
    assert!(text.starts_with("TOOL") && text.contains("read_context"), "{text}");
}

/// Secrets are written owner-only, listed by name only and removed; a secrets file another user
/// could read fails the attempt with a log line that names the file and the `chmod` that mends it.
#[test]
fn secrets_are_set_listed_and_removed_owner_only() {
    let value = "s3cret-value-from-stdin-77";
    let daemon = Daemon::start_with(|_| {
        let mut config: Value =
            serde_json::from_str(&shell_config("test \"$API\" = s3cret-value-from-stdin-77")).unwrap();
        config["secrets"] = json!({"api": "file:api"});
        config["scopes"]["demo"]["bindings"]["shell"]["secrets"] = json!(["api"]);
        config.to_string()
    });
    let set = piped(&daemon, &["secrets", "set", "api"], &format!("{value}\n"));
    assert!(set.status.success(), "{}", stderr(&set));
    let said = String::from_utf8_lossy(&set.stdout);
    assert!(said.contains("\"file:api\"") && !said.contains(value), "{said}");
    let file = daemon.state.join("private/secrets.json");
    assert_eq!(mode(&file), 0o600);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(kept["api"], value, "one trailing newline is not part of the value");
    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");

    assert!(piped(&daemon, &["secrets", "set", "other"], "x").status.success());
    let listed = daemon.cli(&["secrets", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("api") && listed.contains("file:other") && !listed.contains(value),
        "{listed}"
    );
    assert!(daemon.cli(&["secrets", "rm", "other"]).status.success());
    let gone = daemon.cli(&["secrets", "rm", "other"]);
    assert_eq!(gone.status.code(), Some(2));
    assert!(stderr(&gone).contains("secrets list"), "{}", stderr(&gone));
    let empty = piped(&daemon, &["secrets", "set", "blank"], "");
    assert!(!empty.status.success(), "an empty value is refused");

    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let unsafe_work = daemon.create_work("demo", "shell");
    daemon.await_work(&unsafe_work, "failed");
    let execution = daemon.first_execution(&unsafe_work);
    let log = std::fs::read_to_string(daemon.state.join(format!("logs/{execution}.log"))).unwrap();
    let named = format!("chmod 600 {}", file.display());
    assert!(log.contains("(file_unsafe)") && log.contains(&named), "{log}");
    let refused = daemon.cli(&["secrets", "list"]);
    assert!(stderr(&refused).contains(&named), "{}", stderr(&refused));
}

/// Each message names what is wrong and what to do, not something else.
#[test]
fn messages_say_what_is_wrong_and_what_to_do() {
    let daemon = Daemon::start(Some(&shell_config("os outcome succeeded")));
    let tmp = tempfile::tempdir().unwrap();

    let token = tmp.path().join("token");
    std::fs::write(&token, "not a token\n").unwrap();
    let out = daemon.cli(&["health", "--token-file", token.to_str().unwrap()]);
    let said = stderr(&out);
    assert!(
        said.contains("does not hold a token") && !said.contains("not running"),
        "{said}"
    );

    let empty = tmp.path().join("not-a-package");
    std::fs::create_dir(&empty).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", empty.join("link")).unwrap();
    let out = daemon.cli(&["packages", "install", empty.to_str().unwrap()]);
    let said = stderr(&out);
    assert!(
        said.contains("no readable open-conduit.json") && !said.contains("symbolic"),
        "{said}"
    );

    let work = daemon.create_work("demo", "shell");
    daemon.await_work(&work, "succeeded");
    let (code, refused) = daemon.json_unchecked(&["work", "retry", &work]);
    assert_eq!(code, Some(1));
    assert!(
        refused["remedy"].as_str().unwrap().contains("create new Work"),
        "{refused}"
    );

    let remedies = |change: &dyn Fn(&mut Value)| {
        let mut config: Value = serde_json::from_str(&shell_config("true")).unwrap();
        change(&mut config);
        let file = tmp.path().join("config.json");
        std::fs::write(&file, config.to_string()).unwrap();
        let checked = daemon.json_unchecked(&["config", "check", file.to_str().unwrap()]).1;
        let all: Vec<String> = checked["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["remedy"].as_str().map(str::to_owned))
            .collect();
        all.join("\n")
    };
    let typed = remedies(&|c| c["limits"] = json!({"causal_max_depth": "deep"}));
    assert!(
        typed.contains("give a whole number (0 or more) here") && !typed.contains("deep"),
        "{typed}"
    );
    let unknown = remedies(&|c| c["limits"] = json!({"causal_max_dept": 3}));
    assert!(
        unknown.contains("this object takes one of `causal_max_depth`"),
        "{unknown}"
    );
    let operation = remedies(&|c| c["scopes"]["demo"]["bindings"]["shell"]["operations"] = json!(["emti"]));
    assert!(operation.contains("`open-conduit tools` lists"), "{operation}");
}

/// `doctor` fails where executions would find no `os`, rather than reporting healthy.
#[test]
fn doctor_fails_without_the_toolbelt_cli_beside_it() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let healthy = daemon.json(&["doctor"]);
    let check = |report: &Value| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "toolbelt CLI")
            .cloned()
            .unwrap()
    };
    assert_eq!(check(&healthy)["status"], "ok", "the control: `os` is beside it");

    // A hard link runs the same program from a directory without `os` (the same filesystem as
    // the build, so the link is possible).
    let alone = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let program = alone.path().join("open-conduit");
    std::fs::hard_link(OPEN_CONDUIT, &program).unwrap();
    let out = std::process::Command::new(&program)
        .args(["--json", "doctor", "--state"])
        .arg(&daemon.state)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["healthy"], false);
    let found = check(&report);
    assert_eq!(found["status"], "fail");
    assert!(found["detail"].as_str().unwrap().contains("os: not found"), "{found}");
}

/// `open-conduit ...` against `daemon`, started with stdout piped (to be read while it runs).
fn spawned(daemon: &Daemon, args: &[&str]) -> std::process::Child {
    std::process::Command::new(OPEN_CONDUIT)
        .args(args)
        .arg("--state")
        .arg(&daemon.state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Lines of `child`'s stdout, read on a thread, until one satisfies `done` (bounded by the
/// caller's wait).
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().unwrap();
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if sent.send(line).is_err() {
                break;
            }
        }
    });
    received
}

fn next_matching(lines: &std::sync::mpsc::Receiver<String>, wanted: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = lines.recv_timeout(left).expect("the line arrives in time");
        if wanted(&line) {
            return line;
        }
    }
}

#[test]
fn work_create_wait_exits_with_the_works_outcome() {
    let mut config: Value = serde_json::from_str(&shell_config("os outcome succeeded")).unwrap();
    let mut failing = config["scopes"]["demo"]["bindings"]["shell"].clone();
    failing["config"]["command"] = json!(["/bin/sh", "-c", "exit 3"]);
    config["scopes"]["demo"]["bindings"]["failing"] = failing;
    let daemon = Daemon::start(Some(&config.to_string()));
    let create = |binding: &str| {
        daemon.cli(&[
            "--json",
            "work",
            "create",
            "--scope",
            "demo",
            "--binding",
            binding,
            "--wait",
        ])
    };
    let ok = create("shell");
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let work: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(work["state"], "succeeded", "it answers the finished Work");
    let failed = create("failing");
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let work: Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(work["state"], "failed");
    let again = daemon.cli(&["work", "wait", work["id"].as_str().unwrap()]);
    assert_eq!(
        again.status.code(),
        Some(1),
        "`work wait` on finished Work answers at once"
    );
    let unknown = daemon.cli(&["work", "wait", "no-such-work"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("not_found"), "{}", stderr(&unknown));
}

#[test]
fn events_are_filtered_and_followed() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    daemon.json(&["emit", "demo.first", "--scope", "demo"]);
    let typed = daemon.json(&["events", "list", "--type", "demo.first"]);
    let types: Vec<&str> = typed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["demo.first"]);
    let future = daemon.json(&["events", "list", "--since", "2999-01-01T00:00:00Z"]);
    assert_eq!(future["items"], json!([]));
    let (code, bad) = daemon.json_unchecked(&["events", "list", "--since", "yesterday"]);
    assert_eq!((code, bad["error"].as_str()), (Some(1), Some("invalid_request")));

    let mut follower = spawned(
        &daemon,
        &["--json", "events", "list", "--follow", "--type", "demo.later"],
    );
    let lines = lines_of(&mut follower);
    let mut runs = spawned(&daemon, &["runs", "watch"]);
    let run_lines = lines_of(&mut runs);
    // The follower is polling before the event exists: give it a poll first.
    std::thread::sleep(std::time::Duration::from_millis(600));
    let id = daemon.json(&["emit", "demo.later", "--scope", "demo"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    daemon.json(&["emit", "demo.other", "--scope", "demo"]);
    let seen = next_matching(&lines, |_| true);
    let event: Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(
        (event["id"].as_str(), event["type"].as_str()),
        (Some(id.as_str()), Some("demo.later"))
    );

    let work = daemon.create_work("demo", "shell");
    let line = next_matching(&run_lines, |l| l.starts_with(&work) && l.contains("succeeded"));
    assert!(line.contains("demo/shell"), "{line}");
    for mut child in [follower, runs] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// The `items` of the list `args` answers, once it has at least `n` of them.
fn wait_for_items(daemon: &Daemon, args: &[&str], n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let items = daemon.json(args)["items"].as_array().unwrap().clone();
        if items.len() >= n || std::time::Instant::now() > deadline {
            return items;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The longest prefix `a` and `b` share.
fn shared_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    &a[..n]
}

#[test]
fn ids_are_taken_by_any_unique_prefix() {
    let daemon = Daemon::start(Some(&shell_config("sleep 30")));
    let create = || daemon.json(&["work", "create", "--scope", "demo", "--binding", "shell"])["id"].clone();
    let (first, _second) = (create(), create());
    let first = first.as_str().unwrap();
    let unique = &first[..first.len() - 4];
    assert_eq!(daemon.json(&["work", "get", unique])["id"], first, "a unique prefix");
    assert_eq!(daemon.json(&["work", "get", first])["id"], first, "the full id itself");
    // Attempts' ids are time-ordered, so two started at once share their leading characters.
    let attempts = wait_for_items(&daemon, &["executions", "list"], 2);
    let ids: Vec<&str> = attempts.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let shared = shared_prefix(ids[0], ids[1]);
    assert!(shared.len() >= 4, "{ids:?}");
    let (code, ambiguous) = daemon.json_unchecked(&["artifacts", "list", "--execution", shared]);
    assert_eq!(
        (code, ambiguous["error"].as_str()),
        (Some(1), Some("ambiguous_id")),
        "{ambiguous}"
    );
    let matches = ambiguous["matches"].as_array().unwrap();
    assert!(
        matches.contains(&json!(ids[0])) && matches.contains(&json!(ids[1])),
        "{ambiguous}"
    );
    let log = format!("log:{}", &ids[0][..shared.len() + 1]);
    let (code, _) = daemon.json_unchecked(&["artifacts", "cat", &log]);
    assert_eq!(code, Some(0), "an artifact's execution part is abbreviated too");
    let (code, unknown) = daemon.json_unchecked(&["work", "get", "ffff0000"]);
    assert_eq!(
        (code, unknown["error"].as_str()),
        (Some(1), Some("not_found")),
        "{unknown}"
    );
    let (_, other_kind) = daemon.json_unchecked(&["approvals", "show", unique]);
    assert_eq!(other_kind["error"], "not_found", "a Work's id is no approval's");
    let runs = daemon.json(&["executions", "list", "--work", unique]);
    assert!(
        runs["items"].as_array().unwrap().iter().all(|e| e["work_id"] == first),
        "{runs}"
    );
    let table = String::from_utf8_lossy(&daemon.cli(&["work", "list"]).stdout).into_owned();
    let cells = table.lines().skip(1).filter_map(|l| l.split_whitespace().next());
    let short = cells
        .into_iter()
        .find(|cell| first.starts_with(cell))
        .expect("the Work is listed");
    assert!(short.len() < first.len(), "{table}");
    assert_eq!(
        daemon.json(&["work", "get", short])["id"],
        first,
        "what the table shows can be typed back"
    );
}

#[test]
fn a_config_file_that_differs_from_the_active_generation_is_reported_with_how_to_apply_it() {
    const WARNING: &str = "differs from the active generation";
    let mut daemon = Daemon::start(Some(&shell_config("true")));
    assert!(daemon.stop().success());
    daemon.launch();
    assert!(
        !daemon.log().contains(WARNING),
        "the same file says nothing: {}",
        daemon.log()
    );
    assert!(daemon.stop().success());
    let file = daemon.config.clone().unwrap();
    std::fs::write(&file, shell_config("echo edited")).unwrap();
    daemon.launch();
    let log = daemon.log();
    assert!(log.contains(WARNING), "{log}");
    assert!(
        log.contains(&format!("open-conduit config apply {}", file.display())),
        "{log}"
    );
    let generation = daemon.json(&["health"])["generation"].clone();
    assert_eq!(generation, 1, "the committed generation keeps running");
}

#[test]
fn tables_fit_the_terminal_and_are_coloured_only_there() {
    if !common::tmux::available() {
        return;
    }
    let daemon = Daemon::start(Some(&shell_config("true")));
    let long_type = format!("demo.{}", "x".repeat(60));
    daemon.json(&["emit", &long_type, "--scope", "demo"]);
    let on_terminal = |name: &str, env: &str| {
        let socket = daemon.scratch().join(format!("tmux-{name}"));
        let command = format!(
            "{env} {OPEN_CONDUIT} events list --type {long_type} --state {}; sleep 60",
            daemon.state.display()
        );
        let tmux = Tmux::run(socket, (50, 10), &command);
        tmux.shows("SEQ");
        tmux
    };
    let coloured = on_terminal("colour", "env");
    let screen = coloured.screen_with(false);
    assert!(
        screen.contains('…') && !screen.contains(&long_type),
        "cut to fit: {screen}"
    );
    assert!(
        screen.lines().all(|line| line.trim_end().chars().count() <= 50),
        "{screen}"
    );
    assert!(
        coloured.screen_with(true).contains("\u{1b}[1mSEQ"),
        "a bold header on a terminal"
    );
    let plain = on_terminal("plain", "env NO_COLOR=1");
    assert!(
        !plain.screen_with(true).contains("\u{1b}[1m"),
        "NO_COLOR: {}",
        plain.screen_with(true)
    );
    let piped = String::from_utf8(daemon.cli(&["events", "list", "--type", &long_type]).stdout).unwrap();
    assert!(
        piped.contains(&long_type) && !piped.contains('\u{1b}'),
        "a pipe gets it whole and plain: {piped}"
    );
}

#[test]
fn service_install_writes_a_user_unit_that_runs_this_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let install = |extra: &[&str]| {
        std::process::Command::new(OPEN_CONDUIT)
            .args(["service", "install"])
            .args(extra)
            .arg("--state")
            .arg(&state)
            .env("XDG_CONFIG_HOME", tmp.path())
            .output()
            .unwrap()
    };
    let first = install(&["--user"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let unit_file = tmp.path().join("systemd/user/open-conduit.service");
    let unit = std::fs::read_to_string(&unit_file).unwrap();
    let exec = format!("ExecStart=\"{OPEN_CONDUIT}\" daemon --state \"{}\"", state.display());
    assert!(unit.contains(&exec), "{unit}");
    let printed = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(
        printed.contains(&unit) && printed.contains("systemctl --user enable --now open-conduit"),
        "{printed}"
    );
    let again = install(&["--user"]);
    assert!(
        String::from_utf8_lossy(&again.stdout).starts_with("unchanged"),
        "the same unit is left alone"
    );
    let other = install(&["--user", "--config", "/etc/oc.json"]);
    assert_eq!(
        other.status.code(),
        Some(2),
        "another unit is not overwritten: {}",
        stderr(&other)
    );
    assert!(stderr(&other).contains("--force"), "{}", stderr(&other));
    assert!(install(&["--user", "--config", "/etc/oc.json", "--force"])
        .status
        .success());
    assert!(std::fs::read_to_string(&unit_file)
        .unwrap()
        .contains("--config \"/etc/oc.json\""));
    assert_eq!(install(&[]).status.code(), Some(2), "--user is required");
    if let Ok(verify) = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_file)
        .output()
    {
        assert!(verify.status.success(), "systemd accepts it: {}", stderr(&verify));
    }
}
