//! The transactional rules that move Work through its life: accepting events (causal bounds,
//! waking waits, routing), creating Work, claiming attempts, renewing leases, completing segments,
//! firing wait timers, adopting attempts after a restart, and taking over attempts another daemon
//! abandoned.
//!
//! Architecture invariant: every function here runs inside one store transaction handed in by the
//! caller and takes the time as an argument. Nothing here spawns a process, opens a socket or reads
//! a clock; the daemon's loop and the shell executor do that around these rules.
#![forbid(unsafe_code)]

mod accept;
mod actions;
mod attempt;
mod causal;
mod control;
mod error;
mod fence;
mod interrupt;
mod reconcile;
mod sessions;
mod steering;
mod trace;
mod waits;
mod work;

pub use accept::accept;
pub use actions::{act, Action, ActionTarget};
pub use attempt::{
    adopt, adopts_on_start, claim_next, complete, first_to_start, record_pid, renew_lease, settle_unstarted, take_over,
    Claim, Lessee, DEFAULT_LEASE,
};
pub use causal::record;
pub use control::{
    cancel_execution, cancel_work, check_operator_type, confirm_stopped, emit_event, retry_work, wake_work, Operator,
    OperatorEvent, OPERATOR_CANCELLED,
};
pub use error::HostError;
pub use reconcile::{reconcile_scope, Finding};
pub use sessions::{
    append_host_record, append_host_text, close_open_sessions, close_session, close_unpaired_calls, open_session,
    HostRecord,
};
pub use steering::{attach_key, hold_work, rebind_work, release_work, OPERATOR_HELD};
pub use trace::{samples, trace, Effect, Probe, RouteVerdict, Trace, Verdict};
pub use waits::fire_due_timers;
pub use work::{create_work, NewWork};
