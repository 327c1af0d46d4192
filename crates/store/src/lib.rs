//! Coordination storage: a synchronous transaction API that the host's rules are written against once.
//!
//! [`Tx`] is the whole vocabulary of storage; [`SqliteStore`] implements it on an embedded SQLite file
//! (WAL, `synchronous=FULL`, one writer), and a PostgreSQL implementation can slot in beside it so
//! several daemons share one store. Every invariant lives inside one transaction; nothing relies on a
//! process-local lock for correctness.
//!
//! Architecture invariant: the store never sees a plaintext token; it keeps SHA-256 digests only.
#![forbid(unsafe_code)]

mod error;
mod ids;
mod sqlite;
mod tx;

pub use error::StoreError;
pub use ids::{derived_id, new_id};
pub use sqlite::SqliteStore;
pub use tx::{IdempotentRecord, PackageRecord, Page, ScopeRecord, Store, Tx, WorkFilter};
