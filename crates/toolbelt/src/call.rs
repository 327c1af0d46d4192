//! The call path: checks, replay, the operation, and the records every call leaves.
//!
//! A builtin runs entirely inside the call's transaction. An extension operation runs in three steps
//! so its handler runs outside storage: [`Toolbelt::begin`] authorizes, looks up the replay record,
//! validates the input and commits `agent.toolCalled`; the caller awaits [`Pending::run`]; then
//! [`Toolbelt::finish`] passes the lease guard again and commits the result, its translated
//! emissions, the replay record and the audit record together.

use std::sync::Arc;

use conduit_config::Snapshot;
use conduit_core::tool_call::Transport;
use conduit_core::{AuditKind, ErrorCode, Refusal, Timestamp, TokenRecord};
use conduit_scheduler::HostError;
use conduit_store::{Mode, StoreError, Tx};
use serde_json::{json, Value};

use crate::audit::{self, Call, Called, Marks};
use crate::authority::Authority;
use crate::checks;
use crate::gate::{self, Gate, GateCall, Stopped, Verdict, WaitPlan};
use crate::registry::{validate_input, Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationError};
use crate::token::Presented;
use crate::{builtins, replay, session, Answer, CallRequest, CheckedCall, Registry, Toolbelt};

/// What [`Toolbelt::begin`] leaves the caller to do.
pub enum Begun {
    /// The call is answered: a builtin ran, or a committed result was replayed.
    Answered(Answer),
    /// An extension operation passed its checks; run its handler, then [`Toolbelt::finish`].
    Extension(Box<Pending>),
}

/// An authorized extension call whose handler has not run yet.
pub struct Pending {
    socket_execution: String,
    request: CallRequest,
    input_hash: String,
    started: Timestamp,
    transport: Transport,
    authority: Authority,
    called: Called,
    handler: Arc<dyn Handler>,
    /// The operation's registration, which owns a wait it asks for.
    registration: String,
    /// The gates asked before the handler runs, in order.
    gates: Vec<(String, Arc<dyn Gate>)>,
    /// Its request id's place among the calls running now, held until it ends.
    _running: Option<replay::Running>,
}

/// What became of an authorized extension call: its handler ran, or a gate stopped it.
pub enum Ran {
    Handled(Result<HandlerOutput, OperationError>),
    Stopped(Stopped),
}

impl Pending {
    /// Asks the gates, then, when every one lets the call through, runs the handler on its own
    /// task (a panicking handler is a refusal, not a dead caller).
    pub async fn ran(&self) -> Ran {
        match self.decide().await {
            Verdict::Run => Ran::Handled(tokio::spawn(self.run()).await.unwrap_or_else(|_| {
                Err(OperationError::new(
                    "operation_failed",
                    "the operation's handler failed",
                ))
            })),
            Verdict::Stop(stopped) => Ran::Stopped(stopped),
        }
    }

    /// Asks the call's gates, in registration-name order.
    pub async fn decide(&self) -> Verdict {
        let a = &self.authority;
        let call = GateCall {
            operation: self.request.operation.clone(),
            scope: a.work.scope.clone(),
            work_id: a.work.id.clone(),
            execution_id: a.execution.id.clone(),
            binding: a.work.binding.clone(),
            input: self.request.input.clone(),
            input_hash: self.input_hash.clone(),
            request_id: self.request.request_id.clone(),
        };
        gate::decide(&self.gates, &call).await
    }

    /// Starts the handler with the validated authority (never the token).
    pub fn run(&self) -> HandlerFuture {
        let a = &self.authority;
        self.handler.call(HandlerCall {
            operation: self.request.operation.clone(),
            scope: a.work.scope.clone(),
            work_id: a.work.id.clone(),
            execution_id: a.execution.id.clone(),
            epoch: a.execution.epoch,
            binding: a.work.binding.clone(),
            input: self.request.input.clone(),
            request_id: self.request.request_id.clone(),
        })
    }

    fn call(&self) -> Call<'_> {
        Call {
            socket_execution: &self.socket_execution,
            request: &self.request,
            input_hash: self.input_hash.clone(),
            started: self.started,
            transport: self.transport,
        }
    }
}

/// Why a call failed: the refusal, and the authority when the call got past the checks (so the
/// failure is recorded on the Work's log as a call that reached its operation).
struct Failed {
    error: Box<HostError>,
    reached: Option<Box<Authority>>,
    /// The `agent.toolCalled` already committed for it, if any.
    called: Option<Box<Called>>,
    /// The genuine token a later check refused, for classifying the refusal (outside any
    /// transaction: the classifier may read the store).
    refused_token: Option<Arc<TokenRecord>>,
}

impl Failed {
    fn reached(error: impl Into<HostError>, authority: &Authority) -> Failed {
        Failed {
            error: Box::new(error.into()),
            reached: Some(Box::new(authority.clone())),
            called: None,
            refused_token: None,
        }
    }
}

impl From<HostError> for Failed {
    fn from(error: HostError) -> Self {
        Failed {
            error: Box::new(error),
            reached: None,
            called: None,
            refused_token: None,
        }
    }
}

impl From<StoreError> for Failed {
    fn from(error: StoreError) -> Self {
        HostError::from(error).into()
    }
}

impl From<Refusal> for Failed {
    fn from(error: Refusal) -> Self {
        HostError::from(error).into()
    }
}

impl Toolbelt {
    /// Whether a call of `operation` only reads: it changes no state, so nothing waits on it (the
    /// scheduler need not look again after it).
    pub fn only_reads(&self, operation: &str) -> bool {
        only_reads(&self.registry(), operation)
    }

    /// Runs a call to completion, awaiting an extension's handler in between. The store work runs on
    /// the calling thread; async servers call [`Toolbelt::begin`] and [`Toolbelt::finish`] off the
    /// runtime instead (the server's store thread, or a blocking thread).
    pub async fn call(&self, socket_execution: &str, bearer: &str, request: &CallRequest) -> Result<Value, Refusal> {
        let presented = Presented::new(bearer);
        match self.begin(socket_execution, &presented, &request.clone().checked()?)? {
            Begun::Answered(answer) => answer.into_value().map_err(|_| Refusal::internal()),
            Begun::Extension(pending) => {
                let ran = pending.ran().await;
                self.finish(*pending, ran)
            }
        }
    }

    /// Authorizes a call, replays a committed result, and runs a builtin in the same transaction; an
    /// extension operation comes back as [`Begun::Extension`].
    pub fn begin(
        &self,
        socket_execution: &str,
        presented: &Presented,
        checked: &CheckedCall,
    ) -> Result<Begun, Refusal> {
        let request = checked.request();
        let registry = self.registry();
        let call = Call {
            socket_execution,
            request,
            input_hash: checked.input_hash.clone(),
            started: self.clock.now(),
            transport: registry.transport(&request.operation),
        };
        let config = self.caught_up_config()?;
        let mode = if only_reads(&registry, &request.operation) {
            Mode::Record
        } else {
            Mode::Write
        };
        let begun = self.store.run(mode, |tx| -> Result<Begun, Failed> {
            let lease = checks::live_lease(tx, socket_execution, presented, call.started)?;
            let authority = checks::authorize(&config, &registry, lease, request, call.started)
                .map_err(|refused| self.classified(refused))?;
            session::check_call_session(tx, &authority, request)?;
            if let Some(replayed) = replay::lookup(tx, &authority, request, &call.input_hash)? {
                audit::record(
                    tx,
                    &call,
                    Some(&authority),
                    AuditKind::Called,
                    "replayed",
                    Marks::default(),
                    self.clock.now(),
                )?;
                return replayed
                    .map(|value| Begun::Answered(Answer::Tree(value)))
                    .map_err(Failed::from);
            }
            checks::within_quota(tx, &config, &authority, &request.operation)?;
            match registry.operation(&request.operation) {
                None => self
                    .run_builtin(tx, &config, &registry, &call, &authority)
                    .map(Begun::Answered),
                Some(registered) => {
                    registry
                        .requirement_met(&request.operation, &config.package_grant(), config.package_gating())
                        .map_err(HostError::from)?;
                    validate_input(registered, &request.input)
                        .map_err(|at| Failed::reached(invalid_at(&at), &authority))?;
                    let running = self.in_flight.claim(&authority, request).map_err(HostError::from)?;
                    let called = audit::tool_called(tx, &call, &authority)?;
                    Ok(Begun::Extension(Box::new(Pending {
                        socket_execution: socket_execution.to_owned(),
                        request: request.clone(),
                        input_hash: call.input_hash.clone(),
                        started: call.started,
                        transport: call.transport,
                        authority,
                        called,
                        handler: registered.spec.handler.clone(),
                        registration: registered.registration.clone(),
                        gates: registry.gates_for(&request.operation),
                        _running: running,
                    })))
                }
            }
        });
        begun.map_err(|failed| self.reject(&call, failed))
    }

    fn run_builtin(
        &self,
        tx: &mut dyn Tx,
        config: &Snapshot,
        registry: &Registry,
        call: &Call<'_>,
        a: &Authority,
    ) -> Result<Answer, Failed> {
        let called = audit::tool_called(tx, call, a)?;
        let keys = builtins::KeyRule { registry, own: None };
        let output =
            builtins::run(tx, config, a, call.request, &keys, call.started).map_err(|e| Failed::reached(e, a))?;
        let answer = Answer::of_call(&call.request.operation, output).map_err(StoreError::from)?;
        self.commit_result(tx, call, a, &called, Ok(&answer), true)?;
        Ok(answer)
    }

    /// Commits an extension handler's result after passing the lease guard again: its translated
    /// emissions, `agent.toolReturned`, the replay record and the audit record. A handler's refusal is
    /// committed too (and replayed to a retry), then answered `422` with its code and message.
    pub fn finish(&self, pending: Pending, ran: Ran) -> Result<Value, Refusal> {
        let result = match ran {
            Ran::Handled(Ok(out)) if out.wait.as_ref().is_some_and(|w| !w.is_valid()) => Err(OperationError::new(
                "operation_failed",
                "the operation asked for no valid wait; nothing was declared",
            )),
            Ran::Handled(result) => result,
            Ran::Stopped(Stopped::Park { gate, plan }) => return self.park(pending, &gate, plan),
            Ran::Stopped(Stopped::Refuse { gate, error }) => return self.refuse_gated(pending, &gate, error),
        };
        let call = pending.call();
        let config = self.config.get();
        let registry = self.registry();
        let finished = self.store.write(|tx| -> Result<Result<Value, Refusal>, Failed> {
            let now = self.clock.now();
            let fenced = |e: HostError| Failed {
                called: Some(Box::new(pending.called.clone())),
                ..Failed::reached(e, &pending.authority)
            };
            let a = checks::lease_guard(tx, pending.authority.token.clone(), now).map_err(fenced)?;
            // A concurrent call with the same request id may have committed first: its result stands.
            if let Some(replayed) = replay::lookup(tx, &a, call.request, &call.input_hash)? {
                let status = if replayed.is_ok() { "ok" } else { "error" };
                audit::tool_returned(tx, &call, &a, &pending.called, status, now)?;
                let marks = Marks::default();
                audit::record(tx, &call, Some(&a), AuditKind::Called, "replayed", marks, now)?;
                return Ok(replayed);
            }
            let (answer, wait, kept) = match result {
                Ok(out) => {
                    for (i, emission) in out.emit.into_iter().enumerate() {
                        let delivery = call
                            .request
                            .request_id
                            .as_ref()
                            .map(|r| format!("{}/{r}/emit/{i}", a.execution.id));
                        let keys = builtins::KeyRule {
                            registry: &registry,
                            own: Some(&pending.registration),
                        };
                        builtins::emit(tx, &config, &a, emission, delivery, &keys, now).map_err(fenced)?;
                    }
                    let mut answer = Answer::of_call(&call.request.operation, out.output.into())
                        .and_then(Answer::into_value)
                        .map_err(StoreError::from)?;
                    if let Some(wait) = &out.wait {
                        answer["wait"] = wait.to_json();
                    }
                    (Ok(Answer::Tree(answer)), out.wait, !out.secret)
                }
                // A refusal that says when to try again is not the call's answer for good.
                Err(e) => {
                    let kept = e.retry_after.is_none();
                    (Err(e.refusal()), None, kept)
                }
            };
            self.commit_result(tx, &call, &a, &pending.called, answer.as_ref(), kept)?;
            if let Some(wait) = wait {
                // After the records: declaring closes the call's session.
                builtins::declare_registration_wait(tx, &a, &pending.registration, &wait, now).map_err(fenced)?;
            }
            Ok(match answer {
                Ok(answer) => Ok(answer.into_value().map_err(StoreError::from)?),
                Err(refusal) => Err(refusal),
            })
        });
        finished.map_err(|failed| self.reject(&call, failed))?
    }

    /// A gate parked the call: under the lease guard, the plan's wait is declared (releasing
    /// authority, as `wait` does) and the caller gets the plan's output and the wait. Nothing is
    /// kept for replay: once resumed, the caller makes the call again and the gates decide again.
    fn park(&self, pending: Pending, gate: &str, plan: WaitPlan) -> Result<Value, Refusal> {
        let call = pending.call();
        if !plan.wait.is_valid() {
            let error = OperationError::new(
                "gate_failed",
                format!("the gate `{gate}` parked the call on no valid wait; the call is refused"),
            );
            return self.refuse_gated(pending, gate, error);
        }
        let parked = self.store.write(|tx| -> Result<Value, Failed> {
            let now = self.clock.now();
            let fenced = |e: HostError| Failed {
                called: Some(Box::new(pending.called.clone())),
                ..Failed::reached(e, &pending.authority)
            };
            let a = checks::lease_guard(tx, pending.authority.token.clone(), now).map_err(fenced)?;
            // The parked call returns inside its session's bracket; the session then closes `parked`.
            audit::tool_returned(tx, &call, &a, &pending.called, "parked", now)?;
            builtins::declare_registration_wait(tx, &a, gate, &plan.wait, now).map_err(fenced)?;
            let marks = Marks {
                refusal: None,
                gate: Some(gate),
            };
            audit::record(tx, &call, Some(&a), AuditKind::Called, "parked", marks, now)?;
            Ok(json!({
                "operation": call.request.operation,
                "output": plan.output,
                "parked": {"gate": gate, "wait": plan.wait.to_json()},
            }))
        });
        parked.map_err(|failed| self.reject(&call, failed))
    }

    /// A gate refused the call: its error, naming the gate, answered `422`. Authority is kept; the
    /// refusal is not kept for replay, so the same request may be decided again.
    fn refuse_gated(&self, pending: Pending, gate: &str, error: OperationError) -> Result<Value, Refusal> {
        let call = pending.call();
        let refusal = error.refusal().with_field("gate", gate.into());
        let written = self.store.record(|tx| -> Result<(), HostError> {
            let now = self.clock.now();
            audit::tool_returned(tx, &call, &pending.authority, &pending.called, "error", now)?;
            let marks = Marks {
                refusal: None,
                gate: Some(gate),
            };
            let a = Some(&pending.authority);
            audit::record(tx, &call, a, AuditKind::Rejected, "gate_refused", marks, now)?;
            Ok(())
        });
        Err(written.map(|()| refusal).unwrap_or_else(|_| Refusal::internal()))
    }

    /// The records of a call that reached its operation, in the transaction of its effect; its
    /// answer is `kept` for replay unless it carries a credential.
    fn commit_result(
        &self,
        tx: &mut dyn Tx,
        call: &Call<'_>,
        a: &Authority,
        called: &Called,
        answer: Result<&Answer, &Refusal>,
        kept: bool,
    ) -> Result<(), Failed> {
        let now = self.clock.now();
        let (status, kind, result) = match answer {
            Ok(_) => ("ok", AuditKind::Called, "ok"),
            Err(refusal) => ("error", AuditKind::Rejected, refusal.wire_code()),
        };
        audit::tool_returned(tx, call, a, called, status, now)?;
        if kept {
            replay::store(tx, a, call.request, &call.input_hash, answer, now)?;
        }
        audit::record(tx, call, Some(a), kind, result, Marks::default(), now)?;
        Ok(())
    }

    /// A refusal of a genuine token at a later check, kept for classification.
    fn classified(&self, refused: checks::Refused) -> Failed {
        let forbidden = matches!(&refused.error, HostError::Refused(r) if r.code == ErrorCode::Forbidden);
        Failed {
            refused_token: forbidden.then_some(refused.token),
            ..Failed::from(refused.error)
        }
    }

    /// `toolbelt.refusal`: `config_drift` when the configuration lags what the attempt's pinned
    /// playbook uses. Runs outside any transaction.
    fn classify(&self, failed: &Failed, operation: &str) -> Option<&'static str> {
        let token = failed.refused_token.as_deref()?;
        self.classifier.as_ref()?.classify(token, operation)
    }

    /// Records a refused call (and, when it reached its operation, its call and return on the Work's
    /// log) in a transaction of its own, and answers the refusal.
    fn reject(&self, call: &Call<'_>, failed: Failed) -> Refusal {
        let refusal = failed.error.refusal();
        if matches!(*failed.error, HostError::Store(_)) {
            // Storage trouble: a record would likely fail too; the caller gets `internal`.
            return refusal;
        }
        let class = self.classify(&failed, &call.request.operation);
        // A refused call changed nothing: its records are those of a read.
        let written = self.store.record(|tx| -> Result<(), HostError> {
            let now = self.clock.now();
            if let Some(authority) = &failed.reached {
                let called = match &failed.called {
                    Some(called) => (**called).clone(),
                    None => audit::tool_called(tx, call, authority)?,
                };
                audit::tool_returned(tx, call, authority, &called, "error", now)?;
            }
            let reached = failed.reached.as_deref();
            let marks = Marks {
                refusal: class,
                gate: None,
            };
            audit::record(tx, call, reached, AuditKind::Rejected, refusal.wire_code(), marks, now)?;
            Ok(())
        });
        match written {
            Ok(()) => refusal,
            Err(_) => Refusal::internal(),
        }
    }
}

/// A builtin that only reads: its transaction writes nothing but the call's own records.
fn only_reads(registry: &Registry, operation: &str) -> bool {
    registry.operation(operation).is_none() && builtins::only_reads(operation)
}

fn invalid_at(pointer: &str) -> Refusal {
    let at = if pointer.is_empty() { "/" } else { pointer };
    Refusal::invalid_input(format!("the operation's input does not match its schema at `{at}`"))
        .with_remedy("see `os guidance` for each operation's input schema")
}
