//! The call path: checks, replay, the operation, and the records every call leaves.

use conduit_core::canonical::canonical_hash;
use conduit_core::{AuditKind, Refusal, Timestamp};
use conduit_scheduler::HostError;
use serde_json::{json, Value};

use crate::audit::{self, Call};
use crate::checks::{self, Authority};
use crate::{builtins, replay, CallRequest, Toolbelt};

/// Why a call failed: the refusal, and the authority when the call got past the checks (so the
/// failure is recorded on the Work's log as a call that reached its operation).
struct Failed {
    error: HostError,
    reached: Option<Box<Authority>>,
}

impl From<HostError> for Failed {
    fn from(error: HostError) -> Self {
        Failed { error, reached: None }
    }
}

impl From<conduit_store::StoreError> for Failed {
    fn from(error: conduit_store::StoreError) -> Self {
        HostError::from(error).into()
    }
}

impl Toolbelt {
    /// Runs one call for the execution whose socket it arrived on. The checks, the replay lookup, the
    /// operation and its records run in one transaction, so the lease guard and the effect are atomic;
    /// a refused call is recorded in a transaction of its own after the rollback.
    pub fn call(&self, socket_execution: &str, bearer: &str, request: &CallRequest) -> Result<Value, Refusal> {
        let call = Call {
            socket_execution,
            request,
            input_hash: canonical_hash(&request.input),
            started: self.clock.now(),
        };
        let config = self.config.get();
        let served = self.store.write(|tx| -> Result<Value, Failed> {
            let authority = checks::authorize(tx, &config, socket_execution, bearer, request, call.started)?;
            if let Some(answer) = replay::lookup(tx, &authority, request, &call.input_hash)? {
                audit::record(
                    tx,
                    &call,
                    Some(&authority),
                    AuditKind::Called,
                    "replayed",
                    self.clock.now(),
                )?;
                return Ok(answer);
            }
            let called = audit::tool_called(tx, &call, &authority).map_err(Failed::from)?;
            let output = builtins::run(tx, &config, &authority, request, call.started).map_err(|error| Failed {
                error,
                reached: Some(Box::new(authority.clone())),
            })?;
            let answer = json!({"operation": request.operation, "output": output});
            let now = self.clock.now();
            audit::tool_returned(tx, &call, &authority, &called, "ok", now)?;
            replay::store(tx, &authority, request, &call.input_hash, &answer, now)?;
            audit::record(tx, &call, Some(&authority), AuditKind::Called, "ok", now)?;
            Ok(answer)
        });
        served.map_err(|failed| self.reject(&call, failed))
    }

    /// Records a refused call (and, when it reached its operation, its call and return on the Work's
    /// log) and answers the refusal.
    fn reject(&self, call: &Call<'_>, failed: Failed) -> Refusal {
        let refusal = failed.error.refusal();
        if matches!(failed.error, HostError::Store(_)) {
            // Storage trouble: a record would likely fail too; the caller gets `internal`.
            return refusal;
        }
        let result = refusal.code.as_str();
        let written = self.store.write(|tx| -> Result<(), HostError> {
            let now: Timestamp = self.clock.now();
            if let Some(authority) = &failed.reached {
                let called = audit::tool_called(tx, call, authority)?;
                audit::tool_returned(tx, call, authority, &called, "error", now)?;
            }
            audit::record(tx, call, failed.reached.as_deref(), AuditKind::Rejected, result, now)?;
            Ok(())
        });
        if written.is_err() {
            return Refusal::internal();
        }
        refusal
    }
}
