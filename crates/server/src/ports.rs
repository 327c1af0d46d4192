//! The ports the daemon plugs into the server: the configuration service, the package service, and
//! where artifact content lives. The server speaks HTTP over these; the daemon implements them.

use std::path::PathBuf;
use std::sync::Arc;

use conduit_config::Diagnostic;
use conduit_core::{ArtifactRecord, Refusal};
use conduit_store::PackageRecord;
use serde::Serialize;
use serde_json::Value;

/// The active generation as an operator sees it: secret references redacted.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigView {
    pub generation: i64,
    pub hash: String,
    pub config: Value,
    /// What validation found that does not fail the configuration.
    pub warnings: Vec<Diagnostic>,
}

/// A candidate's diagnostics; `valid` when none is an error.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub valid: bool,
    pub hash: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// What an apply did: the generation now active, and whether it is new.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub generation: i64,
    pub hash: String,
    pub changed: bool,
    /// Warnings that do not fail the configuration.
    pub diagnostics: Vec<Diagnostic>,
}

/// The configuration service the daemon runs; on a shared store it also catches up with the generations other
/// daemons commit ([`conduit_toolbelt::Generations`]), before every management request.
pub trait ConfigControl: conduit_toolbelt::Generations + Send + Sync {
    fn view(&self) -> ConfigView;
    /// Validates configuration text against the running release, changing nothing.
    fn check(&self, text: &str) -> Checked;
    /// Validates, saves and publishes configuration text as the next generation.
    fn apply(&self, text: &str, expected_generation: Option<i64>) -> Result<Applied, Refusal>;
    /// Sets the value at a JSON pointer of the active configuration, through the same path as apply.
    fn set(&self, pointer: &str, value: Value, expected_generation: Option<i64>) -> Result<Applied, Refusal>;
}

pub type SharedConfigControl = Arc<dyn ConfigControl>;

/// What the daemon does for the package routes. Each answer is a package's listing (name,
/// version, requirements, permissions, operations, what its install was approved against, and
/// its status under the current grant).
pub trait PackageControl: Send + Sync {
    /// A package as operators see it, judged against the current grant set.
    fn listing(&self, record: &PackageRecord) -> Value;
    fn show(&self, name: &str) -> Result<Value, Refusal>;
    /// Installs the package in `dir` (an absolute path on this machine), or refuses it:
    /// `invalid_manifest`, the RFC 0076 `pack_runtime_requirement_unmet`, or a name `conflict`.
    fn install(&self, dir: &str) -> Result<Value, Refusal>;
    fn remove(&self, name: &str) -> Result<Value, Refusal>;
    /// The install gate on a manifest's text under `grant`, exactly as `install` judges it (the
    /// production parser, then RFC 0076's gate), installing nothing: its `name@version` and what
    /// it requires.
    fn judge(&self, manifest: &[u8], grant: &[String], gating: bool) -> Result<(String, Vec<String>), Refusal>;
}

pub type SharedPackageControl = Arc<dyn PackageControl>;

/// Where artifact content lives: execution logs, and the declared files the daemon kept.
#[derive(Clone, Debug)]
pub struct ArtifactFiles {
    pub logs: PathBuf,
    pub declared: PathBuf,
}

/// The one place the layout is written down: the daemon writes where these say, and reads serve
/// from the same paths.
impl ArtifactFiles {
    /// An execution's log.
    pub fn log(&self, execution: &str) -> PathBuf {
        self.logs.join(format!("{execution}.log"))
    }

    /// A declared file an execution's outcome named, kept at its index.
    pub fn declared_file(&self, execution: &str, index: u32) -> PathBuf {
        self.declared.join(execution).join(index.to_string())
    }

    pub(crate) fn declared(&self, artifact: &ArtifactRecord) -> PathBuf {
        self.declared_file(&artifact.execution_id, artifact.index)
    }
}

/// A request an ingress is handed: its headers (lower-case names) and body, exactly as sent.
pub struct Delivery {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Delivery {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

pub type IngressFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, Refusal>> + Send>>;

/// What the daemon does with a delivery to `POST /v1/ingress/{source}` on the loopback listener:
/// verify it as its source signs them, and accept what it says as events.
pub trait Ingress: Send + Sync {
    fn deliver(&self, source: String, delivery: Delivery) -> IngressFuture;
}
