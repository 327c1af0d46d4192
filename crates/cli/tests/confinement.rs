//! The toolbelt is the only way out: a real execution under the default sandbox, through the real
//! daemon, tries what an agent with a shell could (read the operator's token, the secrets, another
//! execution's token, the store, the configuration file and the one it replaced, and the daemon's
//! memory, or the kernel keyring `keyring:` secrets live in; write the state directory; signal the
//! daemon; hand out the operator's token as a hard-linked artifact) and is refused each time, while
//! it still emits, reads its context, writes its working directory and declares its outcome. The
//! same script with `"sandbox": "off"` is the negative control: there the attacks succeed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use serde_json::{json, Value};

use common::*;

/// Asks the kernel keyring for the session keyring's id, through python3's ctypes (no keyutils
/// program is installed here; no single quote, as the attacker quotes each command in them): status
/// 0 when the kernel answers.
const KEYCTL_SESSION: &str =
    "python3 -c \"import ctypes, os, sys; n = dict(x86_64=250, aarch64=219)[os.uname().machine]; \
     sys.exit(0 if ctypes.CDLL(None, use_errno=True).syscall(n, 0, -3, 0) >= 0 else 1)\"";

/// The same keyctl through the x32 ABI on x86_64 (the call number with bit 30 set): status 0 unless
/// a filter refused it with EPERM (a kernel without x32 answers ENOSYS, so the call got past any
/// filter). Elsewhere the native call.
const KEYCTL_SESSION_X32: &str =
    "python3 -c \"import ctypes, os, sys; n = dict(x86_64=0x40000000 + 250, aarch64=219)[os.uname().machine]; \
     libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(n, 0, -3, 0); \
     sys.exit(1 if r < 0 and ctypes.get_errno() == 1 else 0)\"";

/// Each attack as a shell command run by the attacker's own shell (`$PPID` is the daemon).
fn attacks(state: &Path, victim_token: &Path, config: &Path) -> Vec<(&'static str, String)> {
    let (s, c) = (state.display(), config.display());
    vec![
        ("config_file", format!("cat {c}")),
        ("last_good_config", format!("cat {c}.last-good")),
        ("operator_token", format!("cat {s}/private/operator.token")),
        ("secrets_file", format!("cat {s}/private/secrets.json")),
        ("other_token", format!("cat {}", victim_token.display())),
        ("store", format!("head -c 16 {s}/store.db")),
        // What the store holds before its commits, statement by statement.
        ("redo_log", format!("head -c 16 {s}/store.db-redo")),
        ("daemon_environ", "head -c 1 /proc/$PPID/environ".into()),
        (
            "daemon_mem",
            "a=$(head -1 /proc/$PPID/maps | cut -d- -f1) && dd if=/proc/$PPID/mem bs=1 count=1 skip=$((0x$a))".into(),
        ),
        ("write_state", format!("echo x > {s}/planted")),
        ("signal_daemon", "kill -0 $PPID".into()),
        ("hard_link", format!("ln {s}/private/operator.token linked")),
        // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0): where `keyring:` secrets live.
        ("kernel_keyring", KEYCTL_SESSION.into()),
        ("kernel_keyring_x32", KEYCTL_SESSION_X32.into()),
    ]
}

/// The attacker's script: every attack, then what it may still do, reported as one event.
fn attacker(state: &Path, victim_token: &Path, config: &Path) -> String {
    let mut script = String::from(
        "r=''; try() { n=$1; shift; if (eval \"$*\") >/dev/null 2>&1; then v=reached; else v=refused; fi; \
         r=\"$r\\\"$n\\\":\\\"$v\\\",\"; }; ",
    );
    for (name, command) in attacks(state, victim_token, config) {
        script.push_str(&format!("try {name} '{command}'; "));
    }
    script.push_str(
        "try context 'os context > context.json && grep -q execution context.json'; \
         try workdir 'echo mine > mine && cat mine'; \
         os emit attack.report --data \"{${r}\\\"done\\\":true}\" > /dev/null && \
         os outcome succeeded --artifact linked --artifact mine > /dev/null",
    );
    script
}

/// Runs the attacker under `sandbox` beside a held victim; its report and its declared artifacts.
fn attack(sandbox: Value) -> (Value, Vec<Value>) {
    let meeting = meeting();
    let daemon = Daemon::start_with(|scratch| {
        plant_secrets(scratch, json!({"api": "planted-secret"}));
        shell_config(&publish_and_hold(meeting.path()))
    });
    let (_, _, victim_token) = hold_one(&daemon, meeting.path());
    let mut config: Value = serde_json::from_str(&shell_config("true")).unwrap();
    config["scopes"]["demo"]["bindings"]["attacker"] = json!({
        "executor": "shell",
        "config": {"command": ["/bin/sh", "-c", attacker(&daemon.state, &victim_token, &daemon.config_file())]},
        "operations": ["emit", "read_context", "declare_outcome"],
        "sandbox": sandbox,
    });
    daemon.apply(&config);
    let work = daemon.create_work("demo", "attacker");
    daemon.await_work(&work, "succeeded");
    let report = daemon
        .events(&work)
        .into_iter()
        .find(|e| e["type"] == "attack.report")
        .expect("the attacker reported")["data"]
        .clone();
    let execution = daemon.first_execution(&work);
    let listed = daemon.json(&["artifacts", "list", "--execution", &execution])["items"].clone();
    let declared = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "declared")
        .cloned()
        .collect();
    assert_eq!(
        daemon.state.join("planted").exists(),
        report["write_state"] == "reached"
    );
    (report, declared)
}

fn attack_names() -> Vec<&'static str> {
    attacks(Path::new("/s"), Path::new("/t"), Path::new("/c"))
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn under_the_default_sandbox_every_attack_is_refused_and_the_toolbelt_still_works() {
    let (report, declared) = attack(json!({}));
    for name in attack_names() {
        assert_eq!(report[name], "refused", "{name}: {report}");
    }
    assert_eq!(
        (report["context"].as_str(), report["workdir"].as_str()),
        (Some("reached"), Some("reached"))
    );
    assert_eq!(declared[0]["refused"], "artifact_missing", "the link was never made");
    assert_eq!(
        (declared[1]["name"].as_str(), declared[1]["size"].as_u64()),
        (Some("mine"), Some(5))
    );
}

#[test]
fn negative_control_with_the_sandbox_off_the_same_attacks_succeed() {
    let (report, declared) = attack(json!("off"));
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    for name in attack_names() {
        // A non-root daemon is non-dumpable, so even unconfined its /proc files stay closed to it.
        let expected = if name.starts_with("daemon_") && !root {
            "refused"
        } else {
            "reached"
        };
        assert_eq!(report[name], expected, "{name}: {report}");
    }
    assert_eq!(
        declared[0]["refused"], "artifact_refused",
        "a hard link is refused as an artifact even unconfined"
    );
    assert_eq!(declared[1]["size"], 5);
}

#[test]
fn with_no_network_a_loopback_listener_sees_no_connection_while_the_toolbelt_answers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "if bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null; then v=reached; else v=refused; fi; \
         os emit net.report --data \"{{\\\"tcp\\\":\\\"$v\\\"}}\" > /dev/null && os outcome succeeded > /dev/null"
    );
    let run = |network: &str| {
        let mut config: Value = serde_json::from_str(&shell_config(&script)).unwrap();
        config["scopes"]["demo"]["bindings"]["shell"]["sandbox"] = json!({"network": network});
        let daemon = Daemon::start(Some(&config.to_string()));
        let work = daemon.create_work("demo", "shell");
        daemon.await_work(&work, "succeeded");
        let report = daemon.events(&work).into_iter().find(|e| e["type"] == "net.report");
        report.expect("the toolbelt answered the report")["data"]["tcp"].clone()
    };
    assert_eq!(run("none"), "refused");
    assert!(listener.accept().is_err(), "the listener saw no connection");
    assert_eq!(run("host"), "reached", "control: the host network connects");
    assert!(listener.accept().is_ok());
}

#[test]
fn a_kernel_that_cannot_enforce_the_sandbox_fails_the_attempt_and_says_what_is_missing() {
    let mut config: Value = serde_json::from_str(&shell_config("os outcome succeeded")).unwrap();
    config["scopes"]["demo"]["bindings"]["unconfined"] = config["scopes"]["demo"]["bindings"]["shell"].clone();
    config["scopes"]["demo"]["bindings"]["unconfined"]["sandbox"] = json!("off");
    let daemon = Daemon::start_with_env(&[("OPEN_CONDUIT_TEST_LANDLOCK_ABI", "5")], |_| config.to_string());
    let work = daemon.create_work("demo", "shell");
    let failed = daemon.await_work(&work, "failed");
    let summary = failed["outcome"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("sandbox_unavailable"), "{summary}");
    let execution = daemon.first_execution(&work);
    let log = daemon.cli(&["artifacts", "cat", &format!("log:{execution}")]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("Landlock ABI 6") && log.contains("offers Landlock ABI 5"),
        "{log}"
    );
    let control = daemon.create_work("demo", "unconfined");
    daemon.await_work(&control, "succeeded");
}

#[test]
fn doctor_reports_what_the_kernel_enforces_unconfined_bindings_and_unenforceable_ones() {
    let mut config: Value = serde_json::from_str(&shell_config("true")).unwrap();
    let bindings = &mut config["scopes"]["demo"]["bindings"];
    bindings["loose"] = bindings["shell"].clone();
    bindings["loose"]["sandbox"] = json!("off");
    bindings["sealed"] = bindings["shell"].clone();
    bindings["sealed"]["sandbox"] = json!({"network": "none"});
    let daemon = Daemon::start(Some(&config.to_string()));
    let doctor = |env: &[(&str, &str)]| {
        let out = std::process::Command::new(OPEN_CONDUIT)
            .args(["--json", "--state"])
            .arg(&daemon.state)
            .arg("doctor")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let found = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "sandbox");
        found.expect("a sandbox check").clone()
    };
    let here = doctor(&[]);
    assert_eq!(here["status"], "warn", "{here}");
    let detail = here["detail"].as_str().unwrap();
    assert!(
        detail.contains("Landlock ABI") && detail.contains("demo/loose"),
        "{detail}"
    );
    assert!(!detail.contains("demo/sealed"), "enforceable here: {detail}");

    let old = doctor(&[("OPEN_CONDUIT_TEST_NETNS", "0")]);
    assert_eq!(old["status"], "fail", "{old}");
    let detail = old["detail"].as_str().unwrap();
    assert!(detail.contains("demo/sealed (needs network namespaces"), "{detail}");
}

#[test]
fn sandbox_off_is_a_warning_in_check_validate_and_apply() {
    let daemon = Daemon::start(Some(&shell_config("true")));
    let mut config: Value = serde_json::from_str(&shell_config("true")).unwrap();
    config["scopes"]["demo"]["bindings"]["shell"]["sandbox"] = json!("off");
    let file = daemon.scratch().join("off.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let file = file.to_str().unwrap();
    for command in ["check", "validate", "apply"] {
        let answer = daemon.json(&["config", command, file]);
        let codes: Vec<&str> = answer["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["code"].as_str())
            .collect();
        assert_eq!(codes, ["sandbox_disabled"], "config {command}: {answer}");
    }
}
