//! Coordination storage: a synchronous transaction API that the host's rules are written against once.
//!
//! [`Tx`] is the whole vocabulary of storage, written against once by the host's rules. This crate is
//! the port: the vocabulary, its records, ids and a backend-neutral [`StoreError`]. Adapters live in
//! their own crates (`conduit-store-sqlite`, the embedded default), and only the daemon and tests
//! depend on them. Every invariant lives inside one transaction; nothing relies on a process-local
//! lock for correctness.
//!
//! Architecture invariants: no storage backend is linked here; the store never sees a plaintext
//! token, it keeps SHA-256 digests only.
#![forbid(unsafe_code)]

mod error;
pub mod flush;
mod ids;
mod reentry;
#[cfg(feature = "testing")]
pub mod testing;
mod tx;

pub use error::StoreError;
pub use ids::{derived_id, new_id};
pub use reentry::InTransaction;
pub use tx::{
    ApprovalRows, ArtifactRows, EventRows, ExecutionRows, GenerationRows, IdRows, IdempotencyRows, OperatorRows,
    PackageRows, RequestRows, TokenRows, ToolSessionRows, WaitRows, WorkRows,
};
pub use tx::{
    ArtifactEntry, ArtifactKey, AuditFilter, EventFilter, IdempotentRecord, Mode, PackageRecord, Page, ScopeRecord,
    Store, TokenLease, Tx, WorkFilter,
};
