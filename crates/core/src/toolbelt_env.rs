//! The environment an execution finds its toolbelt by: set by the executor, read by `os`, and
//! reserved so no secret or binding value can shadow it.

/// The toolbelt socket's path.
pub const OS_ENDPOINT: &str = "OS_ENDPOINT";
/// The file holding the execution's current bearer token.
pub const OS_TOKEN_FILE: &str = "OS_TOKEN_FILE";
/// Where the binding's playbooks are.
pub const OS_PLAYBOOK_DIR: &str = "OS_PLAYBOOK_DIR";
/// The environment variable a secret reaches its executions as: its name in upper case.
pub fn secret_env_name(name: &str) -> String {
    name.to_ascii_uppercase()
}

/// The prefix of the toolbelt's variables: a package's inherited environment drops every one.
pub const OS_PREFIX: &str = "OS_";
