//! Confinement of every process the daemon starts for an agent or a package: the policy as data
//! ([`policy`], pure), what the kernel can enforce ([`kernel`]), the Landlock rulesets built from
//! policies ([`rulesets`]), and the one place that applies a policy to a child between fork and
//! exec ([`confine`]).
//!
//! Architecture invariant: a policy the kernel cannot enforce whole is refused
//! ([`confine::Unavailable`]); nothing here ever starts a child with less than its policy.
#![deny(unsafe_code)]

pub mod confine;
pub mod kernel;
pub mod policy;
pub mod programs;
pub mod rulesets;

pub use confine::{Confinement, Unavailable};
pub use policy::{ExecutionPaths, Kernel, Net, PackagePaths, Policy};
pub use rulesets::Rulesets;
