//! The toolbelt: how a running execution asks the host for outcomes.
//!
//! A call is authorized by [`checks`] in the seed's order, then served by a builtin operation
//! ([`builtins`]) inside the same transaction. Tokens ([`token`]) are issued at claim, adoption and
//! resume; only their digests are stored.
//!
//! Architecture invariant: no sockets and no clock reads here. The server hands in the bearer, the
//! socket's execution and the time; the toolbelt answers a value or a [`Refusal`].
#![forbid(unsafe_code)]

pub mod builtins;
pub mod checks;
pub mod token;

use std::sync::Arc;

use conduit_config::CurrentConfig;
use conduit_core::{Refusal, Timestamp};
use conduit_scheduler::HostError;
use conduit_store::Store;
use serde::Deserialize;
use serde_json::{json, Value};

pub use builtins::{describe_builtins, OperationDescriptor};
pub use checks::Authority;

/// A toolbelt call as it arrives on an execution's socket.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    pub operation: String,
    #[serde(default)]
    pub input: Value,
    pub request_id: Option<String>,
    pub scope_id: Option<String>,
    pub work_id: Option<String>,
    pub execution_id: Option<String>,
}

/// The toolbelt of one daemon: the store, the active configuration and the daemon's owner identity.
#[derive(Clone)]
pub struct Toolbelt {
    store: Arc<dyn Store>,
    config: CurrentConfig,
}

impl Toolbelt {
    pub fn new(store: Arc<dyn Store>, config: CurrentConfig) -> Toolbelt {
        Toolbelt { store, config }
    }

    /// Runs one call for the execution whose socket it arrived on. Every check and the operation
    /// itself run in one transaction, so the lease guard and the effect are atomic.
    pub fn call(
        &self,
        socket_execution: &str,
        bearer: &str,
        request: &CallRequest,
        now: Timestamp,
    ) -> Result<Value, Refusal> {
        let config = self.config.get();
        let result = self.store.write(|tx| {
            let authority = checks::authorize(tx, &config, socket_execution, bearer, request, now)?;
            builtins::run(tx, &config, &authority, &request.operation, &request.input, now)
        });
        result
            .map(|output| json!({"operation": request.operation, "output": output}))
            .map_err(|e: HostError| e.refusal())
    }

    /// The agent guidance of the token's granted operations.
    pub fn guidance(&self, socket_execution: &str, bearer: &str, now: Timestamp) -> Result<Value, Refusal> {
        let token = self.identify(socket_execution, bearer, now)?;
        let operations: Vec<OperationDescriptor> = describe_builtins()
            .into_iter()
            .filter(|d| token.operations.iter().any(|o| o == d.name))
            .collect();
        Ok(json!({
            "guidance": builtins::GUIDANCE,
            "operations": operations,
        }))
    }

    /// Which of the token's granted operations serve `capability`. No builtin serves one; extension
    /// operations that declare capabilities (such as `git.credential`) answer here.
    pub fn serving(
        &self,
        socket_execution: &str,
        bearer: &str,
        capability: &str,
        now: Timestamp,
    ) -> Result<Value, Refusal> {
        self.identify(socket_execution, bearer, now)?;
        Ok(json!({"capability": capability, "operations": []}))
    }

    /// The read-only routes' checks: a live token of this socket's execution.
    fn identify(
        &self,
        socket_execution: &str,
        bearer: &str,
        now: Timestamp,
    ) -> Result<conduit_core::TokenRecord, Refusal> {
        self.store
            .read(|tx| checks::live_token(tx, socket_execution, bearer, now))
            .map_err(|e: HostError| e.refusal())
    }
}
