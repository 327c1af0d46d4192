//! Executors: how an attempt's process runs (a shell command, or an agent CLI driven through the
//! same launch), the run directory it is given, and the files kept when its segment ends.

pub mod agent;
pub mod artifacts;
pub mod rundir;
pub mod shell;
