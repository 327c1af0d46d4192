//! What a call that passed the checks acts with: the token's record, the execution holding the
//! lease, its Work, and the event the segment continues from.

use conduit_core::{Event, Execution, TokenRecord, Work};

/// What a call that passed every check may act as. It never holds the token itself.
#[derive(Debug, Clone)]
pub struct Authority {
    pub token: TokenRecord,
    pub execution: Execution,
    pub work: Work,
    /// The event the execution's segment continues from (its emissions' causal parent), read once.
    pub cause: Option<Event>,
}
