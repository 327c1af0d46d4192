//! `POST /v1/ingress/{source}`: deliveries from outside services (GitHub's webhooks), served on
//! the loopback listener only, beside the management API but outside its bearer authentication:
//! a delivery proves itself by its source's signature, which the daemon's [`Ingress`] verifies.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{middleware, Router};

use crate::envelope::{enveloped, ok, Answer, Failure};
use crate::ports::{Delivery, Ingress};

/// The largest delivery accepted (GitHub caps its payloads at 25 MB; those the host keys on are
/// far smaller).
const MAX_DELIVERY: usize = 4 * 1024 * 1024;

pub const INGRESS_PATH: &str = "/v1/ingress/{source}";

pub fn ingress_router(ingress: Arc<dyn Ingress>) -> Router {
    Router::new()
        .route(INGRESS_PATH, post(deliver))
        .layer(DefaultBodyLimit::max(MAX_DELIVERY))
        .layer(middleware::from_fn(enveloped))
        .with_state(ingress)
}

async fn deliver(
    State(ingress): State<Arc<dyn Ingress>>,
    Path(source): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let headers = headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let delivery = Delivery {
        headers,
        body: body.to_vec(),
    };
    let accepted = ingress.deliver(source, delivery).await.map_err(Failure)?;
    ok(StatusCode::OK, &accepted)
}
