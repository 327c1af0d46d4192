//! Human-readable text for answers, printed when `--json` is not given, one submodule per thing
//! rendered. Every function reads the API's JSON leniently: a missing field shows as `-` rather than
//! failing the command.

mod approvals;
mod auth;
mod config;
mod events;
mod executions;
mod health;
mod layout;
mod packages;
mod runs;
mod scopes;
mod secrets;
mod service;
mod terminal;
mod toolbelt;
mod work;

pub use approvals::{approval_detail, approval_table, decided};
pub use auth::{issued, operator_table, recovered, revoked, rotated};
pub use config::{applied, checked, config_view};
pub use events::{event_chain, event_line, event_table};
pub use executions::{
    artifact_table, audit_table, content, execution_cancelled, execution_table, operator_action_table, stop_confirmed,
};
pub use health::{doctor, health};
pub use layout::short_ids;
pub use packages::{package_detail, package_installed, package_removed, package_table};
pub use runs::{run_detail, run_table, run_tally};
pub use scopes::{reconciled, route_trace, sample_table, scope_table};
pub use secrets::{secret_removed, secret_stored, secret_table};
pub use service::service_installed;
pub use terminal::{set_style, Style};
pub use toolbelt::{
    declared, event_id, guidance, output, session_closed, session_id, tool_detail, tool_table, work_id, work_input,
};
pub use work::{cancelled, id, retried, steered, wait_table, woke, work_detail, work_table};
