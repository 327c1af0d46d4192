//! Executors: how an attempt's process runs (the shell executor now), the run directory it is
//! given, and the declared files kept when its segment ends.

pub mod artifacts;
pub mod rundir;
pub mod shell;
