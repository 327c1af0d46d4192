//! The extension protocol's transport: a package's entry runs as a long-lived child process
//! speaking JSON-RPC 2.0 on stdin and stdout, one JSON object per line. Both sides make requests:
//! the host calls `initialize`, `operation.call` and `shutdown`; the package may call back
//! `http.safeFetch`. See `docs/extension-protocol.md`.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};

/// The protocol version `initialize` announces.
pub const PROTOCOL: &str = "open-conduit.extension/1";

/// A JSON-RPC error. `data.code`, when the package gives a snake_case one, is the refusal code the
/// caller sees.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// An error carrying the host's (or a package's) stable refusal code in `data.code`.
    pub fn refusal(code: &str, message: impl Into<String>) -> RpcError {
        RpcError {
            data: Some(json!({ "code": code })),
            ..RpcError::new(-32000, message)
        }
    }

    /// The refusal code in `data.code`, if there is one.
    pub fn refusal_code(&self) -> Option<&str> {
        self.data.as_ref()?.get("code")?.as_str()
    }

    fn gone() -> RpcError {
        RpcError::new(-32099, "the package exited or stopped answering")
    }
}

pub type HostFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + 'a>>;

/// What the host answers when the package asks it for something.
pub trait HostMethods: Send + Sync {
    fn call<'a>(&'a self, method: &'a str, params: Value) -> HostFuture<'a>;
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;

/// One running package process and the requests in flight to it.
pub struct Peer {
    lines: mpsc::UnboundedSender<String>,
    pending: Pending,
    next_id: AtomicU64,
    child: Mutex<Option<Child>>,
}

/// How to start a package's process.
pub struct Launch<'a> {
    pub program: &'a Path,
    /// The confinement the process starts under (its package's `runtime.requires`).
    pub confinement: conduit_sandbox::Confinement,
    pub dir: &'a Path,
    /// The whole environment the process gets (the caller decides what is scrubbed).
    pub env: Vec<(String, String)>,
    pub stderr: Stdio,
}

impl Peer {
    /// Starts the process in its own process group, with exactly `launch.env`.
    pub fn spawn(launch: Launch<'_>, host: Arc<dyn HostMethods>) -> std::io::Result<Arc<Peer>> {
        let mut command = Command::new(launch.program);
        command
            .current_dir(launch.dir)
            .env_clear()
            .envs(launch.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(launch.stderr)
            .process_group(0)
            .kill_on_drop(true);
        let mut child = launch.confinement.spawn(&mut command)?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        let (lines, outgoing) = mpsc::unbounded_channel();
        let peer = Arc::new(Peer {
            lines,
            pending: Pending::default(),
            next_id: AtomicU64::new(1),
            child: Mutex::new(Some(child)),
        });
        tokio::spawn(write_lines(stdin, outgoing));
        tokio::spawn(read_lines(stdout, peer.clone(), host));
        Ok(peer)
    }

    /// Sends a request and waits (at most `timeout`) for its answer.
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.lock().insert(id, answer);
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.lines.send(line.to_string()).is_err() {
            self.lock().remove(&id);
            return Err(RpcError::gone());
        }
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(RpcError::gone()),
            Err(_) => {
                self.lock().remove(&id);
                Err(RpcError::new(-32098, "the package did not answer in time"))
            }
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        matches!(child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Asks the process to stop (`shutdown`), then ends it.
    pub async fn shutdown(&self) {
        let _ = self.request("shutdown", json!({}), Duration::from_secs(2)).await;
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut child) = child {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every request still waiting fails: the process is gone.
    fn fail_pending(&self) {
        for (_, answer) in self.lock().drain() {
            let _ = answer.send(Err(RpcError::gone()));
        }
    }
}

async fn write_lines(mut stdin: ChildStdin, mut lines: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = lines.recv().await {
        let written = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        };
        if written.await.is_err() {
            break;
        }
    }
}

/// Answers to the host's requests resolve them; the package's own requests go to `host`, each on
/// its own task, so a slow callback never holds up an answer.
async fn read_lines(stdout: ChildStdout, peer: Arc<Peer>, host: Arc<dyn HostMethods>) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match (message.get("method").and_then(Value::as_str), message.get("id")) {
            (Some(method), Some(id)) => {
                let (host, peer, method, id) = (host.clone(), peer.clone(), method.to_owned(), id.clone());
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                tokio::spawn(async move {
                    let answer = host.call(&method, params).await;
                    let _ = peer.lines.send(response(id, answer).to_string());
                });
            }
            (None, Some(id)) => {
                let answer = match message.get("error") {
                    Some(error) => Err(rpc_error(error)),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                if let Some(waiting) = id.as_u64().and_then(|id| peer.lock().remove(&id)) {
                    let _ = waiting.send(answer);
                }
            }
            _ => {}
        }
    }
    peer.fail_pending();
}

fn response(id: Value, answer: Result<Value, RpcError>) -> Value {
    match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => {
            let mut error = json!({"code": e.code, "message": e.message});
            if let Some(data) = e.data {
                error["data"] = data;
            }
            json!({"jsonrpc": "2.0", "id": id, "error": error})
        }
    }
}

fn rpc_error(error: &Value) -> RpcError {
    RpcError {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
        message: error.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
        data: error.get("data").cloned(),
    }
}
