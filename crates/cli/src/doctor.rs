//! `open-conduit doctor`: what is wrong, and what to do about it. It works offline where the daemon
//! is down: the state directory's modes and the configuration file are checked without it.

use std::path::Path;

use conduit_config::GRANT_WARNINGS;
use serde_json::{json, Value};

use crate::management::{self, Locations};
use crate::report::Failure;

/// The doctor's report, with `valid` set so an unhealthy one exits 1.
pub fn report(locations: &Locations) -> Value {
    let mut report = run(locations);
    report["valid"] = report["healthy"].clone();
    report
}

/// Every check, in order.
pub fn run(locations: &Locations) -> Value {
    let mut checks = Vec::new();
    match locations.state_dir() {
        Ok(state) => {
            checks.push(state_modes(&state));
            let daemon = daemon_health(locations);
            let up = daemon["status"] == "ok";
            checks.push(daemon);
            let (config_checks, config) = if up {
                live_config(locations)
            } else {
                offline_config(&state)
            };
            checks.extend(config_checks);
            checks.push(sandbox(&config, &conduit_sandbox::kernel::probe()));
            checks.push(agent_clis(&config));
            checks.push(toolbelt_cli(std::env::current_exe().ok().as_deref()));
            if up {
                checks.push(packages(locations));
            }
        }
        Err(_) => checks.push(check(
            "state",
            "fail",
            "no state directory: set --state, OPEN_CONDUIT_STATE or HOME",
        )),
    }
    let healthy = checks.iter().all(|c| c["status"] != "fail");
    json!({"healthy": healthy, "checks": checks})
}

fn state_modes(state: &Path) -> Value {
    let private = state.join("private");
    let token = private.join("operator.token");
    for dir in [state, private.as_path()] {
        if dir.exists() {
            if let Err(e) = conduit_daemon::check_private_dir(dir) {
                return check("state", "fail", e.to_string());
            }
        }
    }
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(&token) {
        Ok(meta) if meta.permissions().mode() & 0o077 != 0 => check(
            "state",
            "fail",
            format!("{} is readable by others; run `chmod 600` on it", token.display()),
        ),
        Ok(_) => check(
            "state",
            "ok",
            format!("{} and its private files are owner-only", state.display()),
        ),
        Err(_) if state.exists() => check(
            "state",
            "warn",
            "no operator token yet: the daemon writes it when it starts",
        ),
        Err(_) => check(
            "state",
            "warn",
            format!(
                "{} does not exist yet: `open-conduit daemon` creates it",
                state.display()
            ),
        ),
    }
}

fn daemon_health(locations: &Locations) -> Value {
    match locations.send(&management::health()) {
        Ok(h) => check(
            "daemon",
            "ok",
            format!(
                "up (version {}, generation {})",
                h["version"].as_str().unwrap_or("unknown"),
                h["generation"]
            ),
        ),
        Err(Failure::Local(why) | Failure::Transport(why)) => check("daemon", "fail", why),
        Err(Failure::Refused { code, message, .. }) => check("daemon", "fail", format!("{code}: {message}")),
    }
}

/// The configuration and grants checks, and the configuration the daemon runs (redacted).
fn live_config(locations: &Locations) -> (Vec<Value>, Value) {
    match locations.send(&management::config_show()) {
        Ok(view) => (
            validated("the active configuration", &view["warnings"]),
            view["config"].clone(),
        ),
        Err(_) => (
            vec![check(
                "configuration",
                "warn",
                "the daemon did not show its configuration",
            )],
            Value::Null,
        ),
    }
}

fn offline_config(state: &Path) -> (Vec<Value>, Value) {
    let file = state.join("config.json");
    let Ok(bytes) = std::fs::read(&file) else {
        let default = conduit_daemon::check_config(conduit_config::default_config_json().as_bytes(), None)
            .map(|s| serde_json::from_str(&s.redacted_json()).unwrap_or_default())
            .unwrap_or_default();
        return (
            vec![check(
                "configuration",
                "ok",
                "no config file: the daemon runs the default configuration",
            )],
            default,
        );
    };
    match conduit_daemon::check_config(&bytes, Some(state)) {
        Ok(snapshot) => (
            validated(&file.display().to_string(), &json!(snapshot.warnings())),
            serde_json::from_str(&snapshot.redacted_json()).unwrap_or_default(),
        ),
        Err(found) => (
            vec![check(
                "configuration",
                "fail",
                format!(
                    "{} has {} diagnostics; run `open-conduit config check {}`",
                    file.display(),
                    found.len(),
                    file.display()
                ),
            )],
            Value::Null,
        ),
    }
}

/// What this kernel can enforce, the bindings that run unconfined (`"sandbox": "off"`), and the
/// bindings whose sandbox this kernel cannot enforce (their attempts fail `sandbox_unavailable`).
fn sandbox(config: &Value, kernel: &conduit_sandbox::Kernel) -> Value {
    let can = format!(
        "this kernel offers Landlock ABI {} and {}network namespaces",
        kernel.landlock_abi,
        if kernel.network_namespaces { "" } else { "no " }
    );
    let (mut off, mut unenforceable) = (Vec::new(), Vec::new());
    for (scope, binding, value) in bindings(config) {
        let setting = conduit_config::sandbox_setting("", value.get("sandbox"), None).0;
        match conduit_sandbox::Policy::unmet_for(&setting, kernel) {
            None => off.push(format!("{scope}/{binding}")),
            Some(unmet) if !unmet.is_empty() => {
                unenforceable.push(format!("{scope}/{binding} (needs {})", unmet.join("; ")))
            }
            Some(_) => {}
        }
    }
    let mut findings = vec![can];
    if !off.is_empty() {
        findings.push(format!("unconfined (\"sandbox\": \"off\"): {}", off.join(", ")));
    }
    if !unenforceable.is_empty() {
        findings.push(format!(
            "cannot be enforced here, so their attempts fail sandbox_unavailable: {}",
            unenforceable.join(", ")
        ));
    }
    let status = match (unenforceable.is_empty(), off.is_empty()) {
        (false, _) => "fail",
        (true, false) => "warn",
        (true, true) => "ok",
    };
    check("sandbox", status, findings.join("; "))
}

/// Whether each agent binding's CLI is found, as the daemon looks for it (its `command`, its
/// `path`, then `PATH`: this shell's, which should be the daemon's). A missing one fails its
/// attempts `executor_unavailable`.
fn agent_clis(config: &Value) -> Value {
    let path = std::env::var("PATH").unwrap_or_default();
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    for (scope, name, binding) in bindings(config) {
        let agent = binding["executor"].as_str().and_then(conduit_config::Agent::named);
        let Some(agent) = agent else { continue };
        let Ok(settings) = serde_json::from_value::<conduit_config::AgentConfig>(binding["config"].clone()) else {
            continue;
        };
        match conduit_daemon::find_program(agent, &settings, &path) {
            Ok(program) => found.push(format!("{scope}/{name}: {}", program.display())),
            Err(why) => missing.push(format!("{scope}/{name}: {why}")),
        }
    }
    match (found.is_empty(), missing.is_empty()) {
        (true, true) => check("agent CLIs", "ok", "no binding runs claude-code or codex"),
        (_, true) => check("agent CLIs", "ok", format!("found {}", found.join("; "))),
        _ => check(
            "agent CLIs",
            "fail",
            format!(
                "executor_unavailable, so their attempts fail to start: {}",
                missing.join("; ")
            ),
        ),
    }
}

/// Whether `os` sits beside this `open-conduit`, where a daemon started from it puts it first on
/// every execution's PATH: without it, every run that calls the toolbelt fails `os: not found`.
fn toolbelt_cli(exe: Option<&Path>) -> Value {
    let Some(dir) = exe.and_then(Path::parent) else {
        return check("toolbelt CLI", "warn", "cannot tell where this program is installed");
    };
    let os = dir.join("os");
    if os.is_file() {
        return check("toolbelt CLI", "ok", format!("{}", os.display()));
    }
    check(
        "toolbelt CLI",
        "fail",
        format!(
            "no `os` beside open-conduit in {}, so executions fail `os: not found`; install both programs: `cargo install --locked --path crates/cli` (or `cargo build --release`)",
            dir.display()
        ),
    )
}

/// Every binding of a configuration's JSON: scope, name, and the binding.
fn bindings(config: &Value) -> impl Iterator<Item = (&str, &str, &Value)> {
    config["scopes"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(scope, s)| {
            s["bindings"]
                .as_object()
                .into_iter()
                .flatten()
                .map(move |(name, b)| (scope.as_str(), name.as_str(), b))
        })
}

/// A valid configuration's two checks: `configuration` (its warnings other than grants'), and
/// `grants` (what a playbook uses that its binding is not granted, toolsets enumerated by hand),
/// each warning listed with its pointer.
fn validated(what: &str, warnings: &Value) -> Vec<Value> {
    let warnings = warnings.as_array().cloned().unwrap_or_default();
    let (grant, other): (Vec<Value>, Vec<Value>) = warnings
        .into_iter()
        .partition(|w| GRANT_WARNINGS.iter().any(|code| w["code"] == *code));
    let configuration = match other.as_slice() {
        [] => check("configuration", "ok", format!("{what} validates")),
        found => check(
            "configuration",
            "warn",
            format!("{what} validates, with warnings: {}", findings(found)),
        ),
    };
    let mut grants = match grant.as_slice() {
        [] => check("grants", "ok", "every binding is granted what its playbook uses"),
        found => check("grants", "warn", findings(found)),
    };
    grants["warnings"] = Value::Array(grant);
    vec![configuration, grants]
}

/// `pointer: message` for each warning.
fn findings(warnings: &[Value]) -> String {
    let each = warnings.iter().map(|w| {
        format!(
            "{}: {}",
            w["pointer"].as_str().unwrap_or_default(),
            w["message"].as_str().unwrap_or_default()
        )
    });
    each.collect::<Vec<_>>().join("; ")
}

/// Installed packages whose requirements the current grant set no longer covers: their operations
/// are refused until the grant covers them again.
fn packages(locations: &Locations) -> Value {
    let Ok(listed) = locations.send(&management::list_packages()) else {
        return check("packages", "warn", "the daemon did not list its packages");
    };
    let flagged: Vec<String> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"] != "ok")
        .map(|p| {
            format!(
                "{} (lacks {})",
                p["manifest"].as_str().unwrap_or("?"),
                joined(&p["unmet"])
            )
        })
        .collect();
    match flagged.as_slice() {
        [] => check("packages", "ok", "every installed package's requirements are granted"),
        _ => check(
            "packages",
            "fail",
            format!(
                "the package grant set no longer covers {}: grant it in /packages/grant or remove the package",
                flagged.join(", ")
            ),
        ),
    }
}

fn joined(list: &Value) -> String {
    let items: Vec<&str> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    items.join(", ")
}

/// One check's result: `ok`, `warn` or `fail`, with what was found.
fn check(name: &str, status: &str, detail: impl Into<String>) -> Value {
    json!({"check": name, "status": status, "detail": detail.into()})
}
