//! A `shell` binding's `config`: the argv, the attempt deadline, and the plain variables and
//! program directories it adds, each checked with its JSON pointer.

use conduit_core::sandbox::path_problem;
use conduit_core::toolbelt_env::{secret_env_name, OS_ENDPOINT, OS_PLAYBOOK_DIR, OS_TOKEN_FILE};
use conduit_core::Duration;

use crate::diagnostic::{push_pointer, shape_diagnostic, Diagnostic};
use crate::model::{BindingConfig, ShellConfig};

/// The binding's shell configuration, checked: a non-empty argv, a parseable timeout, its
/// variables and directories, and a working directory outside `state_dir` (when known).
pub(crate) fn shell_config(
    pointer: &str,
    binding: &BindingConfig,
    state_dir: Option<&str>,
) -> Result<ShellConfig, Diagnostic> {
    let base = format!("{pointer}/config");
    let shell: ShellConfig =
        serde_path_to_error::deserialize(binding.config.clone()).map_err(|e| shape_diagnostic(&base, &e))?;
    if shell.command.first().is_none_or(|program| program.is_empty()) {
        return Err(Diagnostic::error(
            format!("{base}/command"),
            "invalid_executor_config",
            "the shell executor needs a non-empty command argv",
            "give `command` as an array such as [\"/bin/sh\", \"-c\", \"...\"]",
        ));
    }
    if shell
        .timeout
        .as_deref()
        .is_some_and(|t| Duration::parse(t).is_none_or(|d| d.0 <= 0))
    {
        return Err(Diagnostic::error(
            format!("{base}/timeout"),
            "invalid_executor_config",
            "the timeout is not a positive duration",
            "write it like `30s`, `10m` or `1h`",
        ));
    }
    check_shell_env(&base, &shell, binding)?;
    if let Some(why) = shell.cwd.as_deref().and_then(|cwd| path_problem(cwd, state_dir)) {
        return Err(Diagnostic::error(
            format!("{base}/cwd"),
            "invalid_executor_config",
            why,
            "give an absolute directory outside the daemon's state directory, such as \"/home/me/project\"",
        ));
    }
    Ok(shell)
}

/// Variables the host sets for every execution, which a binding's `env` may not replace.
const HOST_ENV: [&str; 5] = [OS_ENDPOINT, OS_TOKEN_FILE, OS_PLAYBOOK_DIR, "PATH", "TMPDIR"];

/// A binding's `env` names are variable names the host does not set and no granted secret
/// becomes; its `path` entries are absolute directories (`:` would split one in two).
fn check_shell_env(base: &str, shell: &ShellConfig, binding: &BindingConfig) -> Result<(), Diagnostic> {
    let is_name = |n: &str| {
        let mut chars = n.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for name in shell.env.keys() {
        let secret = binding.secrets.iter().any(|s| secret_env_name(s) == *name);
        if !is_name(name) || HOST_ENV.contains(&name.as_str()) || secret {
            return Err(Diagnostic::error(
                push_pointer(&format!("{base}/env"), name),
                "invalid_executor_config",
                "an env name is a variable name the host does not set (OS_*, PATH, TMPDIR) and no granted secret becomes",
                "rename it; give extra program directories as `path`",
            ));
        }
    }
    for (i, dir) in shell.path.iter().enumerate() {
        if !dir.starts_with('/') || dir.contains(':') {
            return Err(Diagnostic::error(
                format!("{base}/path/{i}"),
                "invalid_executor_config",
                "a path entry is an absolute directory without `:`",
                "write it like \"/home/me/.local/bin\"",
            ));
        }
    }
    Ok(())
}
