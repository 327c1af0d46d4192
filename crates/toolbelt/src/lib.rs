//! The toolbelt: how a running execution asks the host for outcomes.
//!
//! A call passes the ordered [`checks`], is replayed if its request id already committed
//! ([`replay`]), and is served by a builtin ([`builtins`]) inside the same transaction; every call
//! leaves a durable record ([`audit`]). Tokens ([`token`]) are issued at claim, adoption and resume;
//! only their digests are stored. [`sweep`] retires old token and replay records.
//!
//! Architecture invariant: no sockets and no system clock here. The server hands in the bearer and
//! the socket's execution; time comes from the injected [`Clock`]; the answer is a value or a
//! [`Refusal`].
#![forbid(unsafe_code)]

mod answer;
pub mod audit;
mod authority;
pub mod builtins;
mod call;
pub mod checks;
pub mod gate;
mod operation;
pub mod registry;
pub mod replay;
pub mod session;
pub mod sweep;
pub mod token;

use std::sync::Arc;

use conduit_config::{CurrentConfig, Snapshot};
use conduit_core::canonical::{canonical_hash, integers_are_exact};
use conduit_core::names::{is_key, is_operation_text};
use conduit_core::tool::{SourceFilter, ToolDescriptor};
use conduit_core::{Clock, Refusal, TokenRecord};
use conduit_scheduler::HostError;
use conduit_store::Store;
use serde::Deserialize;
use serde_json::{json, Value};

pub use answer::Answer;
pub use authority::Authority;
pub use builtins::{describe_builtins, OperationDescriptor};
pub use call::{Begun, Pending, Ran};
pub use registry::catalog::{self, Catalog};
pub use registry::{LiveRegistry, Registry};
pub use session::{CloseSession, OpenSession};
pub use token::Presented;

/// A request id, when there is one, is a bounded key: it is stored with the call's replay record.
pub fn check_request_id(request_id: Option<&str>) -> Result<(), Refusal> {
    match request_id {
        Some(id) if !is_key(id) => Err(Refusal::invalid_input(
            "`request_id` (or the Idempotency-Key) is 1 to 200 bytes with no control character",
        )),
        _ => Ok(()),
    }
}

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
    /// The open tool session this call belongs to (RFC 0078 §D).
    pub session_id: Option<String>,
}

impl CallRequest {
    /// What a call's own fields must keep before anything is looked up or audited: a request id
    /// (from the body or the Idempotency-Key header) and the asserted ids are 1 to 200 bytes with
    /// no control character, the operation name 1 to 128, and the input's integers are ones its
    /// hash tells apart (approvals, gates and replays are keyed by it).
    pub fn check_bounds(&self) -> Result<(), Refusal> {
        check_request_id(self.request_id.as_deref())?;
        if !is_operation_text(&self.operation) {
            return Err(Refusal::invalid_input(
                "`operation` is 1 to 128 bytes with no control character",
            ));
        }
        let ids = [&self.scope_id, &self.work_id, &self.execution_id, &self.session_id];
        if ids.iter().any(|id| id.as_deref().is_some_and(|id| !is_key(id))) {
            return Err(Refusal::invalid_input(
                "`scope_id`, `work_id`, `execution_id` and `session_id` are 1 to 200 bytes each",
            ));
        }
        if !integers_are_exact(&self.input) {
            return Err(Refusal::invalid_input(
                "an integer in `input` is at most 2^53 (9007199254740992) in magnitude: past it, two integers hash alike",
            )
            .with_remedy("send a larger integer as a string"));
        }
        Ok(())
    }

    /// Checks the call's own fields ([`CallRequest::check_bounds`]) and hashes its input: the part
    /// of a call that needs no store, done before it crosses to one.
    pub fn checked(self) -> Result<CheckedCall, Refusal> {
        // Before anything is recorded: the request id goes into the audit and replay records.
        self.check_bounds()?;
        let input_hash = canonical_hash(&self.input);
        Ok(CheckedCall {
            request: self,
            input_hash,
        })
    }

    /// A call of `operation` with no input and no assertions: what opening a session of it checks.
    pub fn of(operation: &str) -> CallRequest {
        CallRequest {
            operation: operation.to_owned(),
            input: Value::Null,
            request_id: None,
            scope_id: None,
            work_id: None,
            execution_id: None,
            session_id: None,
        }
    }
}

/// A call whose own fields are within their bounds, with its input's hash ([`CallRequest::checked`]).
pub struct CheckedCall {
    request: CallRequest,
    /// SHA-256 of the input's RFC 8785 form: records carry this, never the input.
    input_hash: String,
}

impl CheckedCall {
    pub fn request(&self) -> &CallRequest {
        &self.request
    }
}

/// The toolbelt of one daemon: the store, the active configuration and the time source.
#[derive(Clone)]
pub struct Toolbelt {
    store: Arc<dyn Store>,
    config: CurrentConfig,
    clock: Arc<dyn Clock>,
    registry: Arc<LiveRegistry>,
    classifier: Option<Arc<dyn RefusalClassifier>>,
    /// On a shared store: where the generations other daemons commit are caught up with.
    generations: Option<Arc<dyn Generations>>,
    /// Extension calls running now, by request id.
    in_flight: replay::InFlight,
}

/// Where a daemon on a shared store learns of the configuration generations other daemons commit.
pub trait Generations: Send + Sync {
    /// Whether other daemons may commit generations (a shared store).
    fn shared(&self) -> bool;
    /// Runs the store's latest generation, if another daemon committed a newer one; refuses with
    /// `generation_unavailable` while this daemon cannot run it (nothing is served under an older
    /// one). Blocks on a store read.
    fn catch_up(&self) -> Result<(), Refusal>;
}

/// Classifies a refusal of a genuine token for its audit record (`toolbelt.refusal`).
pub trait RefusalClassifier: Send + Sync {
    fn classify(&self, token: &TokenRecord, operation: &str) -> Option<&'static str>;
}

impl Toolbelt {
    pub fn new(
        store: Arc<dyn Store>,
        config: CurrentConfig,
        clock: Arc<dyn Clock>,
        registry: Arc<Registry>,
    ) -> Toolbelt {
        Toolbelt {
            store,
            config,
            clock,
            registry: LiveRegistry::new(registry),
            classifier: None,
            generations: None,
            in_flight: replay::InFlight::default(),
        }
    }

    /// The same toolbelt serving `live` (shared with whatever replaces it).
    pub fn with_live_registry(mut self, live: Arc<LiveRegistry>) -> Toolbelt {
        self.registry = live;
        self
    }

    /// Classifies refusals with `classifier` (the daemon's: `config_drift`).
    pub fn with_classifier(mut self, classifier: Arc<dyn RefusalClassifier>) -> Toolbelt {
        self.classifier = Some(classifier);
        self
    }

    /// Catches up with the generations other daemons commit, before every call and catalog read,
    /// so an apply on any daemon governs the next call on this one.
    pub fn with_generations(mut self, generations: Arc<dyn Generations>) -> Toolbelt {
        self.generations = Some(generations).filter(|g| g.shared());
        self
    }

    /// Whether the store writes one at a time in this process, so its calls are best queued on
    /// one thread ([`Store::writes_one_at_a_time`]).
    pub fn store_writes_one_at_a_time(&self) -> bool {
        self.store.writes_one_at_a_time()
    }

    /// The active configuration.
    pub fn config(&self) -> Arc<Snapshot> {
        self.config.get()
    }

    /// The active configuration, once caught up with the store's latest generation.
    fn caught_up_config(&self) -> Result<Arc<Snapshot>, Refusal> {
        if let Some(generations) = &self.generations {
            generations.catch_up()?;
        }
        Ok(self.config.get())
    }

    /// The registry served now.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.get()
    }

    /// The agent guidance of the operations the token could call now (as [`Toolbelt::tools`] judges
    /// it), so an operation the live ceiling removed is neither listed nor described.
    pub fn guidance(&self, socket_execution: &str, bearer: &str) -> Result<Value, Refusal> {
        let token = self.identify(socket_execution, bearer)?;
        let (sees, _) = self.visibility(socket_execution, bearer)?;
        let registry = self.registry.get();
        let extensions = registry.operations().map(|r| OperationDescriptor {
            name: r.spec.name.clone(),
            summary: r.spec.summary.clone(),
            input_schema: r.spec.input_schema.clone(),
        });
        let operations: Vec<OperationDescriptor> = describe_builtins()
            .into_iter()
            .chain(extensions)
            .filter(|d| sees(&d.name))
            .collect();
        let playbook = self
            .caught_up_config()?
            .binding(&token.scope, &token.binding)
            .and_then(|b| b.playbook.clone());
        Ok(json!({
            "guidance": builtins::GUIDANCE,
            "playbook": playbook,
            "operations": operations,
        }))
    }

    /// The catalog an execution sees, as a bare JSON array: what it could call now. Its token's
    /// granted operations that the active configuration's ceiling still allows (so narrowing the
    /// config hides tools at once), less a package's whose requirement the grant set no longer
    /// covers, and nothing once its segment has declared. `source` narrows it to one RFC 0078 source.
    pub fn tools(&self, socket_execution: &str, bearer: &str, source: Option<&str>) -> Result<String, Refusal> {
        // The credential is judged before the query is.
        let (sees, gated) = self.visibility(socket_execution, bearer)?;
        let source = source.map(SourceFilter::from_query).transpose()?;
        let keep = |t: &ToolDescriptor| source.is_none_or(|s| s.admits(t.source)) && sees(&t.tool_id);
        Ok(self.registry.get().catalog().select_gated(keep, gated))
    }

    /// One tool of [`Toolbelt::tools`], as JSON. An unknown id and one the token may not see are the
    /// same `404`, so the answer discloses nothing about tools outside the grant.
    pub fn tool(&self, socket_execution: &str, bearer: &str, tool_id: &str) -> Result<String, Refusal> {
        let (sees, gated) = self.visibility(socket_execution, bearer)?;
        self.registry
            .get()
            .catalog()
            .find_gated(tool_id, gated(tool_id))
            .filter(|_| sees(tool_id))
            .map(str::to_owned)
            .ok_or_else(|| Refusal::not_found("tool"))
    }

    /// Whether the caller may see a tool (it could call it now: see [`Toolbelt::tools`]), and
    /// whether an approval rule of its scope covers it.
    #[allow(clippy::type_complexity)]
    fn visibility(
        &self,
        socket_execution: &str,
        bearer: &str,
    ) -> Result<(impl Fn(&str) -> bool, impl Fn(&str) -> bool), Refusal> {
        let (token, released) = self.identify_with_authority(socket_execution, bearer)?;
        let (config, registry) = (self.caught_up_config()?, self.registry.get());
        let scope = token.scope.clone();
        let gating = config.clone();
        let packages = registry.clone();
        // Read once per catalog read, not once per tool.
        let (grant, gates_packages) = (config.package_grant(), config.package_gating());
        let sees = move |tool_id: &str| {
            !released
                && token.operations.iter().any(|op| op == tool_id)
                && config.authorize_operation(&token.scope, tool_id)
                && packages.requirement_met(tool_id, &grant, gates_packages).is_ok()
        };
        let gated = move |tool_id: &str| {
            gating
                .approval_rule(&scope, tool_id, |t, o| registry.toolset_holds(t, o))
                .is_some()
        };
        Ok((sees, gated))
    }

    /// Which operations serve `capability` that the token could call now (as [`Toolbelt::tools`]
    /// judges it: granted, within the live ceiling, the package's requirement covered), by name.
    /// No builtin serves one; extension operations that declare capabilities (such as
    /// `git.credential`) answer here.
    pub fn serving(&self, socket_execution: &str, bearer: &str, capability: &str) -> Result<Value, Refusal> {
        let (sees, _) = self.visibility(socket_execution, bearer)?;
        let registry = self.registry.get();
        let operations: Vec<&str> = registry.serving(capability).filter(|op| sees(op)).collect();
        Ok(json!({"capability": capability, "operations": operations}))
    }

    /// [`Toolbelt::identify`], and whether the execution's segment has declared (released its
    /// authority: every call would be `authority_released`).
    fn identify_with_authority(&self, socket_execution: &str, bearer: &str) -> Result<(TokenRecord, bool), Refusal> {
        let (now, presented) = (self.clock.now(), Presented::new(bearer));
        self.store
            .read(|tx| {
                let token = checks::live_token(tx, socket_execution, &presented, now)?;
                let declared = tx
                    .get_execution(&token.execution_id)?
                    .is_some_and(|x| x.declaration.is_some());
                Ok((token, declared))
            })
            .map_err(|e: HostError| e.refusal())
    }

    /// The read-only routes' checks: a live token of this socket's execution.
    fn identify(&self, socket_execution: &str, bearer: &str) -> Result<TokenRecord, Refusal> {
        let (now, presented) = (self.clock.now(), Presented::new(bearer));
        self.store
            .read(|tx| checks::live_token(tx, socket_execution, &presented, now))
            .map_err(|e: HostError| e.refusal())
    }
}
