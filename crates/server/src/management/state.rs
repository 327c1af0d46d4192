//! What the management handlers share, and the shape of a route.

use std::sync::Arc;

use axum::routing::MethodRouter;
use conduit_config::CurrentConfig;
use conduit_store::Store;
use conduit_toolbelt::LiveRegistry;
use tokio::sync::Notify;

use super::kept_events::KeptEvents;
use crate::cursor::Cursors;
use crate::ports::{ArtifactFiles, SharedConfigControl, SharedPackageControl};

/// What the management handlers share.
#[derive(Clone)]
pub struct Management {
    pub store: Arc<dyn Store>,
    pub config: CurrentConfig,
    /// This daemon's instance id (the owner of the leases it holds).
    pub instance: String,
    /// Wakes the scheduler loop when new Work may be ready.
    pub kick: Arc<Notify>,
    /// The configuration service.
    pub control: SharedConfigControl,
    /// Seals and opens list cursors.
    pub cursors: Cursors,
    /// Where execution logs and kept declared files are.
    pub files: ArtifactFiles,
    /// The operations served now (the release's and installed packages'), for the tool catalog.
    pub registry: Arc<LiveRegistry>,
    /// Installed packages.
    pub packages: SharedPackageControl,
    /// Events already served, kept as their JSON.
    pub kept_events: KeptEvents,
}

/// A route: its path, the methods it answers, and its handlers.
pub(crate) type Route = (&'static str, &'static [&'static str], MethodRouter<Management>);
