//! Open Conduit's domain types and pure rules.
//!
//! Architecture invariant: this crate does no I/O, spawns nothing and never reads a clock. Time enters
//! as a [`Timestamp`] argument, so every rule here is a plain function of its inputs.
#![forbid(unsafe_code)]

pub mod approval;
pub mod artifact;
pub mod audit;
pub mod canonical;
pub mod credential;
pub mod error;
pub mod event;
pub mod execution;
pub mod id_prefix;
pub mod names;
pub mod prompt;
pub mod quota;
pub mod requires;
pub mod retry;
pub mod sandbox;
pub mod session;
pub mod time;
pub mod tool;
pub mod tool_call;
pub mod toolbelt_env;
pub mod wait;
pub mod work;

pub use artifact::{ArtifactRecord, ArtifactRefusal};
pub use audit::{AuditKind, AuditRecord, CausalPin, OperatorAction, RequestRecord};
pub use credential::{OperatorRecord, Role, TokenRecord};
pub use error::{ErrorCode, Refusal};
pub use event::{Causation, Event, EventSample, NewEvent, NewRecord, Parent, Source};
pub use execution::{Declaration, Execution, ExecutionState, Outcome, OutcomeSource, OutcomeStatus};
pub use session::{SessionOutcome, ToolSession};
pub use time::{Clock, Duration, Timestamp};
pub use wait::{Wait, WaitState};
pub use work::{Work, WorkState};
