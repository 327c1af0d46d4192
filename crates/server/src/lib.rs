//! The HTTP surfaces over Unix sockets: the operator's management API and each execution's toolbelt
//! socket. Handlers validate requests, authenticate the bearer, and hand the rule to `scheduler` or
//! `toolbelt` on a blocking thread; the answer is JSON or the flat error envelope.
#![forbid(unsafe_code)]

mod clock;
mod cursor;
mod discovery;
mod envelope;
mod execution;
mod idempotency;
mod ingress;
mod listen;
mod management;
mod ports;
mod recording;
mod store_queue;

pub use clock::{now, SystemClock};
pub use cursor::{Cursors, Position, CURSOR_KEY};
pub use execution::{execution_router, ExecutionSocket};
pub use idempotency::KEPT as IDEMPOTENCY_KEPT;
pub use ingress::{ingress_router, INGRESS_PATH};
pub use listen::{bind_owner_only, serve, ConnectionLimits, SharedConnections};
pub use management::{loopback_router, management_router, management_routes, KeptEvents, Management, OPENAPI};
pub use ports::{
    Applied, ArtifactFiles, Checked, ConfigControl, ConfigView, Delivery, Ingress, IngressFuture, PackageControl,
    SharedConfigControl, SharedPackageControl,
};
