//! Gates: a registration's say over other registrations' operations. Before an extension operation
//! runs, the toolbelt asks every other registration's gate, in registration-name order: a gate lets
//! the call through (the next gate is asked), parks the caller on a wait plan (the operation does
//! not run; authority is released and the caller is resumed by what the plan waits on), or refuses
//! (its error reaches the caller, naming the gate). Builtins pass no gate, and a gate is never
//! asked about its own registration's operations. A gate that panics fails closed (`gate_failed`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use conduit_core::Duration;
use serde_json::Value;

use crate::registry::OperationError;

/// What a gate is asked about: the call, after the checks, the replay lookup and input validation.
#[derive(Debug, Clone)]
pub struct GateCall {
    pub operation: String,
    pub scope: String,
    pub work_id: String,
    pub execution_id: String,
    pub binding: String,
    pub input: Value,
    /// SHA-256 of the input's RFC 8785 form: what a decision about this exact call is bound to.
    pub input_hash: String,
    pub request_id: Option<String>,
}

/// Park the caller: declare this wait (as the `wait` builtin would) and answer `output`.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitPlan {
    pub output: Value,
    pub types: Vec<String>,
    pub keys: Vec<String>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GateAnswer {
    Pass,
    Park(WaitPlan),
    Refuse(OperationError),
}

pub type GateFuture = Pin<Box<dyn Future<Output = GateAnswer> + Send>>;

/// A registration's gate.
pub trait Gate: Send + Sync {
    fn ask(&self, call: GateCall) -> GateFuture;
}

/// How the gates decided a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every gate let it through.
    Run,
    Stop(Stopped),
}

/// A gate that stopped a call, and how.
#[derive(Debug, Clone, PartialEq)]
pub enum Stopped {
    Park { gate: String, plan: WaitPlan },
    Refuse { gate: String, error: OperationError },
}

/// Asks `gates` in order until one parks or refuses. Each gate runs on its own task, so a panic
/// is a refusal (`gate_failed`), not a dead server.
pub async fn decide(gates: &[(String, Arc<dyn Gate>)], call: &GateCall) -> Verdict {
    for (name, gate) in gates {
        let answer = tokio::spawn(gate.ask(call.clone())).await.unwrap_or_else(|_| {
            GateAnswer::Refuse(OperationError {
                code: "gate_failed".into(),
                message: format!("the gate `{name}` failed; the call is refused"),
            })
        });
        match answer {
            GateAnswer::Pass => continue,
            GateAnswer::Park(plan) => {
                return Verdict::Stop(Stopped::Park {
                    gate: name.clone(),
                    plan,
                })
            }
            GateAnswer::Refuse(error) => {
                return Verdict::Stop(Stopped::Refuse {
                    gate: name.clone(),
                    error,
                })
            }
        }
    }
    Verdict::Run
}
