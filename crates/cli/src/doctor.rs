//! `open-conduit doctor`: what is wrong, and what to do about it. It works offline where the daemon
//! is down: the state directory's modes and the configuration file are checked without it.

use std::path::Path;

use serde_json::{json, Value};

use crate::management::{self, Locations};
use crate::report::Failure;

/// One check's result: `ok`, `warn` or `fail`, with what was found.
fn check(name: &str, status: &str, detail: impl Into<String>) -> Value {
    json!({"check": name, "status": status, "detail": detail.into()})
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
            checks.push(if up {
                live_config(locations)
            } else {
                offline_config(&state)
            });
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
    let health = locations
        .connection()
        .and_then(|c| management::send(&c, &management::health()));
    match health {
        Ok(h) => check(
            "daemon",
            "ok",
            format!("up (version {}, generation {})", h["version"], h["generation"]),
        ),
        Err(Failure::Local(why) | Failure::Transport(why)) => check("daemon", "fail", why),
        Err(Failure::Refused { code, message, .. }) => check("daemon", "fail", format!("{code}: {message}")),
    }
}

fn live_config(locations: &Locations) -> Value {
    let shown = locations
        .connection()
        .and_then(|c| management::send(&c, &management::config_show()));
    match shown {
        Ok(view) => grants(
            "the active configuration",
            view["warnings"].as_array().map_or(0, Vec::len),
        ),
        Err(_) => check("configuration", "warn", "the daemon did not show its configuration"),
    }
}

fn offline_config(state: &Path) -> Value {
    let file = state.join("config.json");
    let Ok(bytes) = std::fs::read(&file) else {
        return check(
            "configuration",
            "ok",
            "no config file: the daemon runs the default configuration",
        );
    };
    match conduit_daemon::check_config(&bytes, Some(state)) {
        Ok(snapshot) => grants(&format!("{}", file.display()), snapshot.warnings().len()),
        Err(found) => check(
            "configuration",
            "fail",
            format!(
                "{} has {} diagnostics; run `open-conduit config check {}`",
                file.display(),
                found.len(),
                file.display()
            ),
        ),
    }
}

fn grants(what: &str, warnings: usize) -> Value {
    match warnings {
        0 => check("configuration", "ok", format!("{what} validates with no warning")),
        n => check(
            "configuration",
            "warn",
            format!("{what} has {n} warnings; `open-conduit config show --json` lists them"),
        ),
    }
}

/// Installed packages whose requirements the current grant set no longer covers: their operations
/// are refused until the grant covers them again.
fn packages(locations: &Locations) -> Value {
    let listed = locations
        .connection()
        .and_then(|c| management::send(&c, &management::list_packages()));
    let Ok(listed) = listed else {
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
