//! `/v1/packages`: installed packages. Installing runs code from a directory on this machine, so it
//! takes the `admin` role, like applying configuration; reads take `view`. The work itself (reading
//! the manifest, the install gate, copying the package) is the daemon's, behind [`PackageControl`].

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_core::{Refusal, Role};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::envelope::{blocking, check_mutation, ok, parse_body, read_body, Answer};
use crate::idempotency::{once_outside, Keyed};
use crate::management::{operator, Management};

/// What the daemon does for the package routes. Each answer is a package's listing (name,
/// version, requirements, permissions, operations, what its install was approved against, and
/// its status under the current grant).
pub trait PackageControl: Send + Sync {
    fn list(&self) -> Result<Vec<Value>, Refusal>;
    fn show(&self, name: &str) -> Result<Value, Refusal>;
    /// Installs the package in `dir` (an absolute path on this machine), or refuses it:
    /// `invalid_manifest`, the RFC 0076 `pack_runtime_requirement_unmet`, or a name `conflict`.
    fn install(&self, dir: &str) -> Result<Value, Refusal>;
    fn remove(&self, name: &str) -> Result<Value, Refusal>;
}

pub type SharedPackageControl = Arc<dyn PackageControl>;

pub async fn list(State(s): State<Management>, headers: HeaderMap) -> Answer {
    operator(&s, &headers, Role::View).await?;
    let packages = s.packages.clone();
    let items = blocking(move || Ok(packages.list()?)).await?;
    ok(StatusCode::OK, &json!({ "items": items }))
}

pub async fn show(State(s): State<Management>, headers: HeaderMap, Path(name): Path<String>) -> Answer {
    operator(&s, &headers, Role::View).await?;
    let packages = s.packages.clone();
    ok(StatusCode::OK, &blocking(move || Ok(packages.show(&name)?)).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Install {
    /// The package directory, holding `open-conduit.json`.
    dir: String,
}

pub async fn install(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let op = operator(&s, &headers, Role::Admin).await?;
    check_mutation(&headers, &uri)?;
    let body = read_body(body).await?;
    let request: Install = parse_body(&body)?;
    let keyed = Keyed::new(&op, &headers, "POST", uri.path(), &body)?;
    let packages = s.packages.clone();
    once_outside(s.store.clone(), keyed, move || {
        Ok((StatusCode::CREATED, packages.install(&request.dir)?))
    })
    .await
}

pub async fn remove(State(s): State<Management>, headers: HeaderMap, Path(name): Path<String>) -> Answer {
    operator(&s, &headers, Role::Admin).await?;
    let packages = s.packages.clone();
    ok(StatusCode::OK, &blocking(move || Ok(packages.remove(&name)?)).await?)
}
