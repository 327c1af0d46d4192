//! `/v1/packages`: installed packages. Installing runs code from a directory on this machine, so it
//! takes the `admin` role, like applying configuration; reads take `view`. The work itself (reading
//! the manifest, the install gate, copying the package) is the daemon's, behind [`PackageControl`].

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_core::Role;
use serde::Deserialize;
use serde_json::json;

use super::access::{admit, operator};
use super::state::Management;
use crate::envelope::{blocking, ok, Answer};

pub async fn list(State(s): State<Management>) -> Answer {
    operator(Role::View)?;
    let packages = s.packages.clone();
    let items = blocking(move || Ok(packages.list()?)).await?;
    ok(StatusCode::OK, &json!({ "items": items }))
}

pub async fn show(State(s): State<Management>, Path(name): Path<String>) -> Answer {
    operator(Role::View)?;
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
    let admitted = admit(&headers, &uri, body, Role::Admin, |_: &Install| Ok(())).await?;
    let packages = s.packages.clone();
    admitted
        .once_outside(&s, move |request| {
            Ok((StatusCode::CREATED, packages.install(&request.dir)?))
        })
        .await
}

pub async fn remove(State(s): State<Management>, Path(name): Path<String>) -> Answer {
    operator(Role::Admin)?;
    let packages = s.packages.clone();
    ok(StatusCode::OK, &blocking(move || Ok(packages.remove(&name)?)).await?)
}
