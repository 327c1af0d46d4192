//! Running installed packages: a package's operations are answered by its process (started on the
//! first call, started again if it died) over the extension protocol, and the host answers the
//! package's `http.safeFetch` callbacks through the egress guard, audited on the calling Work's log.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use conduit_config::CurrentConfig;
use conduit_core::canonical::canonical_hash;
use conduit_core::tool_call::{CallRecord, ToolCalled, ToolReturned, Transport, TOOL_CALLED, TOOL_RETURNED};
use conduit_core::toolbelt_env::OS_PREFIX;
use conduit_core::Event;
use conduit_egress::{FetchRequest, SafeFetch};
use conduit_packages::protocol::{HostFuture, HostMethods, Launch, Peer, RpcError, PROTOCOL};
use conduit_packages::Manifest;
use conduit_scheduler::{append_host_record, HostError, HostRecord};
use conduit_server::now;
use conduit_store::{new_id, Store};
use conduit_toolbelt::gate::{Gate, GateAnswer, GateCall, GateFuture, WaitPlan};
use conduit_toolbelt::registry::{
    Emission, Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationError, WaitRequest,
};
use serde_json::{json, Value};

use crate::confine::Hidden;
use crate::executor::shell::SYSTEM_PATH;
use crate::store_thread::on_store_thread;

/// The host callback (and the permission a package asks for it by) that fetches through the guard.
const SAFE_FETCH: &str = "http.safeFetch";
/// How long one operation call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// One installed package as this daemon runs it.
pub struct PackageRuntime {
    pub manifest: Manifest,
    /// `<state>/packages/<name>`: the installed copy, the process's working directory.
    pub dir: PathBuf,
    /// Where the process's stderr goes.
    pub log: PathBuf,
    pub config: CurrentConfig,
    pub store: Arc<dyn Store>,
    pub fetch: SafeFetch,
    peer: tokio::sync::Mutex<Option<Arc<Peer>>>,
    /// What the package's sandbox hides: the state directory (but its own directory) and the
    /// configuration file.
    hidden: Hidden,
    /// Set when the package is removed or replaced: no process starts for it again.
    stopped: std::sync::atomic::AtomicBool,
    /// The operation calls in flight, by the `call_id` the package's callbacks name.
    calls: Mutex<HashMap<String, HandlerCall>>,
}

impl PackageRuntime {
    pub fn new(
        manifest: Manifest,
        hidden: Hidden,
        dir: PathBuf,
        log: PathBuf,
        config: CurrentConfig,
        store: Arc<dyn Store>,
    ) -> Arc<Self> {
        Arc::new(PackageRuntime {
            manifest,
            dir,
            log,
            config,
            store,
            fetch: SafeFetch::new(conduit_egress::Limits::default()),
            peer: tokio::sync::Mutex::new(None),
            hidden,
            stopped: std::sync::atomic::AtomicBool::new(false),
            calls: Mutex::default(),
        })
    }

    /// Stops the package's process, if it runs.
    pub(super) async fn stop(&self) {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        let peer = self.peer.lock().await.take();
        if let Some(peer) = peer {
            peer.shutdown().await;
        }
    }

    /// The handler the toolbelt registers for every operation the package provides.
    pub fn handler(self: &Arc<Self>) -> Arc<dyn Handler> {
        Arc::new(Operations(self.clone()))
    }

    async fn call(self: Arc<Self>, call: HandlerCall) -> Result<HandlerOutput, OperationError> {
        let peer = self.running().await?;
        let call_id = new_id();
        let params = json!({
            "call_id": call_id,
            "operation": call.operation,
            "input": call.input,
            "authority": {"scope": call.scope, "work_id": call.work_id, "execution_id": call.execution_id,
                          "epoch": call.epoch, "binding": call.binding},
            "request_id": call.request_id,
        });
        self.in_flight().insert(call_id.clone(), call);
        let answer = peer.request("operation.call", params, CALL_TIMEOUT).await;
        self.in_flight().remove(&call_id);
        let result = answer.map_err(|e| {
            let code = e.refusal_code().unwrap_or("operation_failed").to_owned();
            OperationError::new(&code, e.message)
        })?;
        handler_output(&result)
    }

    /// The host's package grant set must still cover what the package requires before its code
    /// runs (the toolbelt refuses such calls first, with RFC 0076's payload; a gate fails closed).
    fn check_requirements(&self) -> Result<(), OperationError> {
        let config = self.config.get();
        let requirement = self.manifest.requirement();
        requirement
            .check(&config.package_grant(), config.package_gating())
            .map_err(|refused| OperationError::new(refused.code.as_str(), refused.message))
    }

    /// The package's process, started (and initialized) if it is not running.
    async fn running(self: &Arc<Self>) -> Result<Arc<Peer>, OperationError> {
        self.check_requirements()?;
        let mut slot = self.peer.lock().await;
        if self.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(OperationError::new(
                "operation_failed",
                format!("the package {} was removed or replaced", self.manifest.id()),
            ));
        }
        if let Some(peer) = slot.as_ref().filter(|p| p.is_running()) {
            return Ok(peer.clone());
        }
        let peer = self.start().await?;
        self.initialize(&peer).await?;
        *slot = Some(peer.clone());
        Ok(peer)
    }

    /// Starts the package's process, confined by what its manifest requires.
    async fn start(self: &Arc<Self>) -> Result<Arc<Peer>, OperationError> {
        let failed = |_| {
            OperationError::new(
                "operation_failed",
                format!("the package {} could not start", self.manifest.id()),
            )
        };
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null());
        let entry = self.dir.join(&self.manifest.runtime.entry);
        let env = self.environment();
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or(SYSTEM_PATH, |(_, v)| v.as_str());
        let confinement = crate::confine::for_package(crate::confine::PackageLaunch {
            requires: &self.manifest.runtime.requires,
            hidden: &self.hidden,
            package_dir: &self.dir,
            entry: &entry,
            path,
            tmpdir: &self.tmpdir(),
        })
        .await
        .map_err(|unavailable| {
            tracing::warn!(package = %self.manifest.id(), %unavailable, "the package's sandbox cannot be enforced");
            OperationError::new(
                "sandbox_unavailable",
                format!("the package {} cannot be confined on this kernel", self.manifest.id()),
            )
        })?;
        let launch = Launch {
            program: &entry,
            confinement,
            dir: &self.dir,
            env,
            stderr,
        };
        Peer::spawn(launch, Arc::new(Callbacks(self.clone()))).map_err(failed)
    }

    /// The protocol's `initialize` handshake; a package that fails it is stopped.
    async fn initialize(&self, peer: &Peer) -> Result<(), OperationError> {
        let hello = json!({"protocol": PROTOCOL, "package": self.manifest.name, "version": self.manifest.version,
                           "permissions": self.manifest.permissions});
        if peer
            .request("initialize", hello, Duration::from_secs(10))
            .await
            .is_err()
        {
            peer.shutdown().await;
            let message = format!("the package {} did not initialize", self.manifest.id());
            return Err(OperationError::new("operation_failed", message));
        }
        Ok(())
    }

    /// `<state>/tmp/package-<name>`: the one place a package without `fs.write` may write.
    fn tmpdir(&self) -> PathBuf {
        self.hidden
            .state_dir
            .join("tmp")
            .join(format!("package-{}", self.manifest.name))
    }

    /// A scrubbed environment (a system PATH, a UTF-8 locale, HOME at the package), or, for a
    /// package that declared `env.read`, the daemon's own without its and executions' variables.
    fn environment(&self) -> Vec<(String, String)> {
        let tmpdir = ("TMPDIR".into(), self.tmpdir().display().to_string());
        if self.manifest.runtime.requires.iter().any(|r| r == "env.read") {
            return std::env::vars()
                .filter(|(k, _)| !k.starts_with("OPEN_CONDUIT_") && !k.starts_with(OS_PREFIX) && k != "TMPDIR")
                .chain([tmpdir])
                .collect();
        }
        vec![
            ("PATH".into(), SYSTEM_PATH.into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("HOME".into(), self.dir.display().to_string()),
            tmpdir,
        ]
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<String, HandlerCall>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `http.safeFetch`: one guarded fetch on behalf of an operation call in flight, with the
    /// audit pair on that call's Work log whatever the fetch's fate.
    async fn safe_fetch(self: &Arc<Self>, params: Value) -> Result<Value, RpcError> {
        if !self.manifest.permissions.iter().any(|p| p == SAFE_FETCH) {
            return Err(RpcError::refusal(
                "permission_denied",
                "the package did not ask for the http.safeFetch permission",
            ));
        }
        let call = params["call_id"]
            .as_str()
            .and_then(|id| self.in_flight().get(id).cloned())
            .ok_or_else(|| RpcError::refusal("invalid_params", "`call_id` names no operation call in flight"))?;
        let request = fetch_request(&params)?;
        let started = Instant::now();
        let called = self.audit_called(&call, &params).await?;
        let fetched = self.fetch.fetch(request).await;
        let status = if fetched.is_ok() { "ok" } else { "error" };
        self.audit_returned(&call, &called, status, started.elapsed()).await?;
        fetched
            .map(crate::extensions::http_fetch::output)
            .map_err(|e| RpcError::refusal(e.code(), e.message()))
    }

    async fn audit_called(&self, call: &HandlerCall, params: &Value) -> Result<Event, RpcError> {
        let id = new_id();
        let data = ToolCalled {
            agent_id: &call.execution_id,
            tool_name: SAFE_FETCH,
            call_id: &id,
            args_hash: &canonical_hash(params),
            principal: &format!("package:{}", self.manifest.name),
            transport: Transport::Http,
            session_id: None,
        }
        .data();
        self.append(
            call,
            None,
            HostRecord {
                id,
                event_type: TOOL_CALLED,
                data,
                at: now(),
            },
        )
        .await
    }

    async fn audit_returned(
        &self,
        call: &HandlerCall,
        called: &Event,
        status: &str,
        took: Duration,
    ) -> Result<Event, RpcError> {
        let data = ToolReturned {
            agent_id: &call.execution_id,
            tool_name: SAFE_FETCH,
            call_id: called.data["callId"].as_str().unwrap_or_default(),
            status,
            duration_ms: took.as_millis() as i64,
        }
        .data();
        let record = HostRecord {
            id: new_id(),
            event_type: TOOL_RETURNED,
            data,
            at: now(),
        };
        self.append(call, Some(called.clone()), record).await
    }

    /// Appends a record to the calling Work's log; without a parent it continues from the event the
    /// execution's segment continues from.
    async fn append(
        &self,
        call: &HandlerCall,
        parent: Option<Event>,
        record: HostRecord<'static>,
    ) -> Result<Event, RpcError> {
        let (store, execution_id, scope) = (self.store.clone(), call.execution_id.clone(), call.scope.clone());
        let written = on_store_thread(store, move |store| {
            store.write(|tx| -> Result<Event, HostError> {
                let execution = tx
                    .get_execution(&execution_id)?
                    .ok_or_else(|| conduit_core::Refusal::not_found("execution"))?;
                let parent = match parent {
                    Some(parent) => Some(parent),
                    None => tx.get_event(&execution.cause_event)?,
                };
                append_host_record(tx, &execution, &scope, parent.as_ref(), record)
            })
        })
        .await;
        written.map_err(|_| RpcError::refusal("internal", "the call could not be recorded"))
    }
}

/// An operation's result as the package sends it: `{output, emit?: [event...], wait?: {types,
/// keys?, timeout?}}` (a translated wait).
fn handler_output(result: &Value) -> Result<HandlerOutput, OperationError> {
    let emit: Vec<Emission> = serde_json::from_value(result.get("emit").cloned().unwrap_or(json!([])))
        .map_err(|_| OperationError::new("operation_failed", "the package's `emit` is not a list of events"))?;
    let wait = match result.get("wait") {
        None | Some(Value::Null) => None,
        Some(wait) => Some(wait_request(wait).ok_or_else(|| {
            OperationError::new(
                "operation_failed",
                "the package's `wait` is not {types, keys?, timeout?}",
            )
        })?),
    };
    Ok(HandlerOutput {
        output: result.get("output").cloned().unwrap_or(Value::Null),
        emit,
        wait,
        secret: false,
    })
}

/// A wait as a package sends it, for a translated wait or a parked call: `{types, keys?, timeout?}`.
fn wait_request(wait: &Value) -> Option<WaitRequest> {
    let strings = |v: Option<&Value>| serde_json::from_value::<Vec<String>>(v.cloned().unwrap_or(json!([]))).ok();
    let timeout = match wait.get("timeout") {
        None | Some(Value::Null) => None,
        Some(text) => Some(conduit_core::Duration::parse(text.as_str()?)?),
    };
    Some(WaitRequest {
        types: strings(wait.get("types"))?,
        keys: strings(wait.get("keys"))?,
        timeout,
    })
}

/// `init` as the package sends it: `{method?, headers?: {name: value}, body?: text}`.
fn fetch_request(params: &Value) -> Result<FetchRequest, RpcError> {
    let invalid = || {
        RpcError::refusal(
            "invalid_input",
            "params are {call_id, url, init?: {method?, headers?, body?}}",
        )
    };
    let url = params["url"].as_str().ok_or_else(invalid)?.to_owned();
    let init = &params["init"];
    let headers = match init.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect::<Option<_>>()
            .ok_or_else(invalid)?,
        Some(_) => return Err(invalid()),
    };
    Ok(FetchRequest {
        url,
        method: init.get("method").and_then(Value::as_str).map(str::to_owned),
        headers,
        body: init.get("body").and_then(Value::as_str).map(|b| b.as_bytes().to_vec()),
        authorization: None,
    })
}

/// How long a package's gate may take to answer before the call is refused `gate_failed`.
const GATE_TIMEOUT: Duration = Duration::from_secs(10);

/// A package's gate (`provides.operation_gate`, installed only with the `operation.gate`
/// permission): asked over `operation.gate` about calls in the scopes `packages.gates.<name>`
/// lists. A hang, a crash or any answer but a decision or an operation error fails closed.
pub(super) struct PackageGate(pub(super) Arc<PackageRuntime>);

impl Gate for PackageGate {
    fn ask(&self, call: GateCall) -> GateFuture {
        Box::pin(self.0.clone().gate(call))
    }
}

impl PackageRuntime {
    async fn gate(self: Arc<Self>, call: GateCall) -> GateAnswer {
        if !self.config.get().package_gates_scope(&self.manifest.name, &call.scope) {
            return GateAnswer::Pass;
        }
        let name = self.manifest.name.clone();
        let failed = || {
            GateAnswer::Refuse(OperationError::new(
                "gate_failed",
                format!("the gate `{name}` failed; the call is refused"),
            ))
        };
        let Ok(peer) = self.running().await else {
            return failed();
        };
        let params = json!({
            "operation": call.operation,
            "input": call.input,
            "input_hash": call.input_hash,
            "authority": {"scope": call.scope, "work_id": call.work_id, "execution_id": call.execution_id,
                          "binding": call.binding},
            "request_id": call.request_id,
        });
        match peer.request("operation.gate", params, GATE_TIMEOUT).await {
            Ok(answer) => gate_answer(&answer).unwrap_or_else(failed),
            Err(e) => match e.refusal_code().filter(|c| conduit_core::error::is_snake_case(c)) {
                Some(code) => GateAnswer::Refuse(OperationError::new(code, e.message.clone())),
                None => failed(),
            },
        }
    }
}

/// A gate's result: `{"decision": "pass"}` or `{"decision": "park", "output"?, "wait": {"types",
/// "keys"?, "timeout"?}}`; anything else is `None`.
fn gate_answer(answer: &Value) -> Option<GateAnswer> {
    match answer.get("decision")?.as_str()? {
        "pass" => Some(GateAnswer::Pass),
        "park" => Some(GateAnswer::Park(WaitPlan {
            output: answer.get("output").cloned().unwrap_or(Value::Null),
            wait: wait_request(answer.get("wait")?)?,
        })),
        _ => None,
    }
}

/// The toolbelt's side: each operation call becomes an `operation.call`.
struct Operations(Arc<PackageRuntime>);

impl Handler for Operations {
    fn call(&self, call: HandlerCall) -> HandlerFuture {
        Box::pin(self.0.clone().call(call))
    }
}

/// The package's side: the host methods it may call back.
struct Callbacks(Arc<PackageRuntime>);

impl HostMethods for Callbacks {
    fn call<'a>(&'a self, method: &'a str, params: Value) -> HostFuture<'a> {
        Box::pin(async move {
            match method {
                SAFE_FETCH => self.0.safe_fetch(params).await,
                _ => Err(RpcError::new(-32601, "the host has no such method")),
            }
        })
    }
}
