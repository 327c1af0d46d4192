//! The typed shape of configuration version 1. Objects are keyed by id so that every diagnostic is a
//! stable JSON pointer such as `/scopes/setup/bindings/shell/operations/2`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::retry::RetryConfig;

/// A configuration file: its scopes (where Work runs and what it may do), limits, secrets, the
/// package install gate and the first-party extensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The configuration language version: `1`.
    pub version: u32,
    #[serde(default)]
    /// Scopes by id: each holds bindings, routes and approval rules, and may inherit a parent's ceiling.
    pub scopes: BTreeMap<String, ScopeConfig>,
    #[serde(default)]
    /// Limits on causality, connections and bytes.
    pub limits: Limits,
    /// Secret names and their references (`keyring:`, `file:`, `env:`, `cmd:`). A reference's text
    /// never leaves the configuration file: diagnostics, responses and the store see it redacted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
    /// The install gate for packages (RFC 0076 §A).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<PackagesConfig>,
    /// The first-party extensions' settings (GitHub, Slack).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<ExtensionsConfig>,
}

/// The platform primitives the host grants installed packages, and whether it gates on them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackagesConfig {
    /// Tokens of the runtime-requirement vocabulary; absent: `conduit_core::requires::DEFAULT_GRANT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Vec<String>>,
    /// Whether installs are refused for requirements outside the grant (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gating: Option<bool>,
    /// The scopes each installed package's gate is asked about (none: the gate is never asked).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gates: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The scope this one sits under: its ceiling bounds this one's.
    pub parent: Option<String>,
    #[serde(default = "enabled_by_default")]
    /// Whether events start Work in it (default `true`).
    pub enabled: bool,
    #[serde(default)]
    /// The scope's ceiling.
    pub authorization: Authorization,
    #[serde(default)]
    /// Bindings by id: an executor, its settings and the operations its executions may call.
    pub bindings: BTreeMap<String, BindingConfig>,
    #[serde(default)]
    /// Which events start Work on which binding, tried in order.
    pub routes: Vec<RouteConfig>,
    /// Calls that wait for a person's decision (the human extension's gate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalRule>,
}

/// A rule of the human extension: calls of these operations (names or `@toolset`s; builtins pass
/// no gate) wait for an approval, decided by one of `approvers` (anyone with `operate` if none),
/// and expire after `timeout`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// Operation names or `@toolset`s whose calls wait for an approval.
    pub operations: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// Operator names who may decide; none: anyone with the `operate` role.
    pub approvers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// How long a call waits for a decision before it expires (`10m`); absent, it waits until decided.
    pub timeout: Option<String>,
}

fn enabled_by_default() -> bool {
    true
}

/// A scope's ceiling: the operations any binding in it may be granted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Authorization {
    #[serde(default)]
    /// Operation names, `@toolset`s and `!` denials any binding in the scope may be granted.
    pub operations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BindingConfig {
    /// What runs the binding's executions: `shell`, `claude-code`, `codex`, `github-hold`, or an
    /// installed package's executor.
    pub executor: String,
    /// Executor-specific; validated by the executor's own strict shape (see [`ShellConfig`]).
    #[serde(default)]
    #[schemars(schema_with = "crate::field_schemas::executor_config")]
    pub config: Value,
    /// Operations the binding's executions are granted; within the scope's ceiling.
    #[serde(default)]
    pub operations: Vec<String>,
    /// Binding grants, by name: operations a Work created with the grant adds to its executions'
    /// tokens, within the scope's ceiling (`work create --grant NAME`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grants: BTreeMap<String, BindingGrant>,
    /// Event type patterns the binding's executions may emit; absent means any non-reserved family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emits: Option<Vec<String>>,
    /// The playbook the binding starts its turns on, shown to the agent in its context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub playbook: Option<String>,
    /// Names of secrets (from the top-level `secrets`) its executions receive as environment variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// How its executions are confined: `"off"` or `{network, read, write}`; absent, the default
    /// confinement (see `conduit_core::sandbox`). Checked by [`crate::sandbox::setting`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::field_schemas::sandbox_setting")]
    pub sandbox: Option<Value>,
    /// How failed attempts are tried again (see [`crate::retry`]); absent, a failure is final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryConfig>,
}

/// A binding grant: operation names, `@toolset`s and `!` denials, resolved like a binding's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BindingGrant {
    /// Operation names, `@toolset`s and `!` denials the grant adds.
    pub operations: Vec<String>,
}

/// The `shell` executor's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellConfig {
    /// The argv to run; the first element is the program.
    pub command: Vec<String>,
    /// The attempt deadline, as a human duration (`30s`, `10m`, `1h`). Default one hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Plain environment variables for the process (never secrets: a binding's `secrets` reach it
    /// as variables of their own). The host's own variables cannot be set here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Absolute directories searched for programs after the toolbelt's own (where `os` is) and
    /// before the system's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// The absolute directory the process starts in, kept across the Work's attempts; absent, a
    /// fresh directory of the attempt's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// The `claude-code` and `codex` executors' configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// What the agent is asked: a template of `conduit_core::prompt::VARIABLES`.
    pub prompt: String,
    /// The CLI: a program name looked up on the daemon's PATH, or an absolute path. Default
    /// `claude` or `codex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The model the CLI is asked to use (its `--model`); absent, the CLI's own default.
    pub model: Option<String>,
    /// Further arguments for the CLI, after the host's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The attempt deadline, as for the shell executor (default one hour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Plain environment variables for the CLI, as for the shell executor.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Directories searched for programs after the toolbelt's own, as for the shell executor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// The directory the CLI starts in, as for the shell executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// A `github-hold` binding's `config`: the condition, and the pull request (else the Work's
/// input names it as `{"repo", "number"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HoldConfig {
    /// `approved` or `checks`.
    pub until: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The pull request's repository, `owner/name`.
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The pull request's number.
    pub number: Option<u64>,
    /// How long each wait may last before the hold fails (none: as long as it takes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// Each attempt's deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// An event type or a family pattern (`demo.*`).
    pub on: String,
    /// The binding (in the same scope) whose Work the event starts.
    pub binding: String,
    /// A final route that matches is the last the event reaches: later routes are not reached.
    #[serde(default, rename = "final", skip_serializing_if = "std::ops::Not::not")]
    pub last: bool,
    /// An event it matches on a key that running Work of its binding owns interrupts that Work's
    /// attempt: the attempt is fenced and stopped, and the Work's next attempt starts from the event.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupt: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default = "default_causal_max_depth")]
    /// How deep a chain of Work caused by Work may go before creating more is refused.
    pub causal_max_depth: u32,
    #[serde(default = "default_causal_per_minute")]
    /// How many Work items one causal chain may create per minute.
    pub causal_per_minute: u32,
    /// How long a connection may take to send a request's headers, and how long it may sit idle
    /// between requests, before it is closed.
    #[serde(default = "default_header_timeout_seconds")]
    pub header_timeout_seconds: u32,
    /// How long a request's body may take to arrive once its headers have.
    #[serde(default = "default_body_timeout_seconds")]
    pub body_timeout_seconds: u32,
    /// Connections one execution's toolbelt socket serves at once; more are closed on arrival.
    #[serde(default = "default_toolbelt_connections")]
    pub toolbelt_connections: u32,
    /// Connections the management socket (and the loopback listener) serves at once.
    #[serde(default = "default_management_connections")]
    pub management_connections: u32,
    /// The largest `data` an event may carry, in bytes of JSON: every event is stored whole.
    #[serde(default = "default_event_data_bytes")]
    pub event_data_bytes: u32,
    /// The bytes of events and replay records one Work may write; past them its calls are refused
    /// (`quota_exceeded`) but it can still declare an outcome or a wait.
    #[serde(default = "default_work_store_bytes")]
    pub work_store_bytes: u64,
    /// The bytes one attempt may write to its log and transcript; past them its process group is
    /// killed (a looping agent must not fill the disk the store is on).
    #[serde(default = "default_attempt_output_bytes")]
    pub attempt_output_bytes: u64,
}

fn default_causal_max_depth() -> u32 {
    32
}

fn default_causal_per_minute() -> u32 {
    600
}

fn default_header_timeout_seconds() -> u32 {
    10
}

fn default_body_timeout_seconds() -> u32 {
    30
}

fn default_toolbelt_connections() -> u32 {
    32
}

fn default_management_connections() -> u32 {
    256
}

fn default_event_data_bytes() -> u32 {
    64 * 1024
}

fn default_work_store_bytes() -> u64 {
    256 * 1024 * 1024
}

fn default_attempt_output_bytes() -> u64 {
    256 * 1024 * 1024
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            causal_max_depth: default_causal_max_depth(),
            causal_per_minute: default_causal_per_minute(),
            header_timeout_seconds: default_header_timeout_seconds(),
            body_timeout_seconds: default_body_timeout_seconds(),
            toolbelt_connections: default_toolbelt_connections(),
            management_connections: default_management_connections(),
            event_data_bytes: default_event_data_bytes(),
            work_store_bytes: default_work_store_bytes(),
            attempt_output_bytes: default_attempt_output_bytes(),
        }
    }
}

pub const GITHUB_API: &str = "https://api.github.com";
pub const SLACK_API: &str = "https://slack.com/api";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtensionsConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The GitHub extension (`github.*` operations, webhook ingress).
    pub github: Option<GithubConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The Slack extension (`slack.*` operations, Events ingress).
    pub slack: Option<SlackConfig>,
    /// Present: executions may read their own scope's Work and events (`introspection.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection: Option<IntrospectionConfig>,
}

/// The introspection extension: nothing to set yet; its presence enables it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {}

/// GitHub (REST v3): where its API is (GitHub Enterprise has its own), the secret holding the token
/// its operations use, and its webhook ingress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GithubConfig {
    #[serde(default = "github_api")]
    /// The REST API's base URL (GitHub Enterprise has its own).
    pub api_url: String,
    /// The secret holding the API token.
    pub token: String,
    /// The secret webhook deliveries are signed with; without one the ingress refuses every delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
    /// The scope webhook events are accepted in (needed with `webhook_secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The secret `github.git.credential` hands git (a token that may only read and push
    /// contents, say); by default `token`. An execution sees this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_token: Option<String>,
    /// The git host (`host` or `host:port`) `github.git.credential` answers for; by default the
    /// API's host, `github.com` for `api.github.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_host: Option<String>,
}

/// Slack (Web API): where its API is, the secret holding the bot token, and its Events ingress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    #[serde(default = "slack_api")]
    /// The Web API's base URL.
    pub api_url: String,
    /// The secret holding the bot token.
    pub token: String,
    /// The secret Slack signs its Events requests with; without one the ingress refuses them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// The scope Slack events are accepted in (needed with `signing_secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

fn github_api() -> String {
    GITHUB_API.into()
}

fn slack_api() -> String {
    SLACK_API.into()
}
