//! Gates: a registration's say over other registrations' operations. Before an extension operation
//! runs, the toolbelt asks every other registration's gate, in registration-name order: a gate lets
//! the call through (the next gate is asked), parks the caller on a wait plan (the operation does
//! not run; authority is released and the caller is resumed by what the plan waits on), or refuses
//! (its error reaches the caller, naming the gate). Builtins pass no gate, and a gate is never
//! asked about its own registration's operations. A gate that panics fails closed (`gate_failed`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use conduit_core::{Declaration, OutcomeStatus};
use serde_json::Value;

use crate::operation::{OperationError, WaitRequest};

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
    pub wait: WaitRequest,
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

    /// Told that every gate let `call` through and its operation runs now: what a gate grants
    /// once (an approval) is used up here, not when it answers, so a later gate that parks or
    /// refuses leaves it unused.
    fn passed(&self, _call: GateCall) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async {})
    }
}

/// What a start gate is asked about: Work whose first attempt is about to start.
#[derive(Debug, Clone)]
pub struct StartCall {
    pub scope: String,
    pub work_id: String,
    pub binding: String,
    pub input: Value,
}

/// A registration's start gate, asked by the scheduler before a Work's first attempt starts. A
/// park holds the Work waiting on the plan; a refusal fails it with the gate's code.
pub trait StartGate: Send + Sync {
    fn ask(&self, call: StartCall) -> GateFuture;
}

/// Asks `gates` about starting `call`'s Work, in order, until one parks or refuses.
pub async fn decide_start(gates: &[(String, Arc<dyn StartGate>)], call: &StartCall) -> Verdict {
    first_stop(gates.iter().map(|(name, gate)| (name, gate.ask(call.clone())))).await
}

/// A gate's answer, on its own task: a panic is `gate_failed`.
async fn asked(name: &str, answer: GateFuture) -> GateAnswer {
    tokio::spawn(answer).await.unwrap_or_else(|_| {
        GateAnswer::Refuse(OperationError::new(
            "gate_failed",
            format!("the gate `{name}` failed; the call is refused"),
        ))
    })
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

impl Stopped {
    /// What a start gate's answer makes of the unstarted attempt: the plan's wait, or a failed
    /// outcome whose summary carries the gate's code and message.
    pub fn into_declaration(self) -> Declaration {
        match self {
            Stopped::Park { plan, .. } => plan.wait.declaration(),
            Stopped::Refuse { gate, error } => Declaration::Outcome {
                status: OutcomeStatus::Failed,
                summary: Some(format!("{}: {} (start gate `{gate}`)", error.code, error.message)),
                artifacts: Vec::new(),
            },
        }
    }
}

/// Asks `gates` in order until one parks or refuses. Each gate runs on its own task, so a panic
/// is a refusal (`gate_failed`), not a dead server.
pub async fn decide(gates: &[(String, Arc<dyn Gate>)], call: &GateCall) -> Verdict {
    let verdict = first_stop(gates.iter().map(|(name, gate)| (name, gate.ask(call.clone())))).await;
    if verdict == Verdict::Run {
        for (_, gate) in gates {
            gate.passed(call.clone()).await;
        }
    }
    verdict
}

/// Awaits each gate's answer in turn (each asked only when its turn comes) until one stops.
async fn first_stop<'a>(answers: impl Iterator<Item = (&'a String, GateFuture)>) -> Verdict {
    for (name, answer) in answers {
        match asked(name, answer).await {
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
