//! `/v1/packages`: installed packages. Installing runs code from a directory on this machine, so it
//! takes the `admin` role, like applying configuration; reads take `view`. The work itself (reading
//! the manifest, the install gate, copying the package) is the daemon's, behind [`PackageControl`].

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_core::Role;
use serde::Deserialize;
use serde_json::Value;

use super::access::{admit, operator, revision};
use super::paging::{page, List};
use super::state::Management;
use crate::cursor::Paging;
use crate::envelope::{blocking, ok, Answer};

/// Installed packages by name, a page at a time.
pub async fn list(State(s): State<Management>, uri: Uri, Query(paging): Query<Paging>) -> Answer {
    let packages = s.packages.clone();
    let list = List::at(&uri, String::new(), paging.cursor, paging.limit);
    page(
        &s,
        list,
        |_| Ok(0),
        move |tx, page| Ok(tx.page_packages(page)?.iter().map(|r| packages.listing(r)).collect()),
        |package: &Value| package["name"].as_str().unwrap_or_default().to_owned(),
    )
    .await
}

pub async fn show(State(s): State<Management>, headers: HeaderMap, Path(name): Path<String>) -> Answer {
    operator(Role::View).await?;
    let packages = s.packages.clone();
    let package = blocking(move || Ok(packages.show(&name)?)).await?;
    Ok(revision(&headers, package.to_string()))
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
    operator(Role::Admin).await?;
    let packages = s.packages.clone();
    ok(StatusCode::OK, &blocking(move || Ok(packages.remove(&name)?)).await?)
}
