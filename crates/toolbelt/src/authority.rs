//! What a call that passed the checks acts with: the token's record, the execution holding the
//! lease, its Work, and the event the segment continues from.

use std::sync::Arc;

use conduit_core::{Event, Execution, TokenRecord, Work};

/// What a call that passed every check may act as. It never holds the token itself. Its rows are
/// the lease's, shared: a call clones its authority into its records and answers without copying them.
#[derive(Debug, Clone)]
pub struct Authority {
    pub token: Arc<TokenRecord>,
    pub execution: Arc<Execution>,
    pub work: Arc<Work>,
    /// The event the execution's segment continues from (its emissions' causal parent), read once.
    pub cause: Option<Arc<Event>>,
}
