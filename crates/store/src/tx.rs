//! The transaction API.

use std::sync::Arc;

use conduit_core::approval::{Approval, ApprovalState};
use conduit_core::id_prefix::IdKind;
use conduit_core::{
    ArtifactRecord, AuditRecord, CausalPin, Event, Execution, ExecutionState, NewEvent, NewRecord, OperatorAction,
    OperatorRecord, RequestRecord, SessionOutcome, Timestamp, TokenRecord, ToolSession, Wait, Work, WorkState,
};

use crate::StoreError;

pub type Result<T> = std::result::Result<T, StoreError>;

/// A scope as the store records it across generations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRecord {
    pub id: String,
    /// The generation that last published it.
    pub generation: i64,
    pub parent: Option<String>,
    pub enabled: bool,
    /// The generation that removed it: a tombstone, kept so its history stays attributable.
    pub removed_in: Option<i64>,
}

/// The committed answer of an operator's mutation under an `Idempotency-Key`.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotentRecord {
    pub principal: String,
    pub key: String,
    pub method: String,
    pub path: String,
    /// SHA-256 of the request body's canonical form: the same key with another body is a conflict.
    pub body_hash: String,
    pub status: u16,
    pub response: serde_json::Value,
    pub created_at: Timestamp,
}

/// An installed package: its manifest as installed, and what the install was approved against.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageRecord {
    pub name: String,
    pub version: String,
    /// The manifest's JSON, as validated at install.
    pub manifest: String,
    /// The grant set and gating the install was approved against.
    pub approved_grant: Vec<String>,
    pub approved_gating: bool,
    pub installed_at: Timestamp,
}

/// A keyset page: rows strictly past `after` (in the list's order) and within `upper` (captured by
/// the first page), at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<K> {
    pub after: Option<K>,
    pub upper: i64,
    pub limit: usize,
}

/// Where an artifact sits in the artifact list: its execution's start, the execution, and its
/// index (-1 for the execution's log).
pub type ArtifactKey = (i64, String, i64);

/// One entry of the artifact list: an execution's log, or a file it declared.
#[derive(Debug, Clone)]
pub struct ArtifactEntry {
    pub started_at: i64,
    pub execution_id: String,
    /// `None` for the execution's log.
    pub declared: Option<ArtifactRecord>,
}

impl ArtifactEntry {
    pub fn key(&self) -> ArtifactKey {
        let index = self.declared.as_ref().map_or(-1, |a| i64::from(a.index));
        (self.started_at, self.execution_id.clone(), index)
    }
}

/// Filters for listing audit records; each that is set must match.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub execution: Option<String>,
    pub work: Option<String>,
    pub operation: Option<String>,
    /// Recorded at or after this time.
    pub since: Option<Timestamp>,
    /// `ok`, `replayed`, or a refusal's code.
    pub result: Option<String>,
}

/// Filters for listing events; every one given must hold.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub work: Option<String>,
    pub event_type: Option<String>,
    /// Accepted at or after this time.
    pub since: Option<Timestamp>,
}

impl EventFilter {
    /// One Work's events.
    pub fn of_work(work: &str) -> EventFilter {
        EventFilter {
            work: Some(work.to_owned()),
            ..EventFilter::default()
        }
    }
}

/// Filters for listing Work.
#[derive(Debug, Clone, Default)]
pub struct WorkFilter {
    pub scope: Option<String>,
    pub state: Option<WorkState>,
}

/// Configuration generations and the scopes each published.
pub trait GenerationRows {
    /// The latest committed generation: its number, canonical hash and the text kept of it.
    fn latest_generation(&mut self) -> Result<Option<(i64, String, String)>>;
    /// The latest committed generation's number: what a daemon on a shared store compares with the
    /// one it runs.
    fn latest_generation_number(&mut self) -> Result<Option<i64>>;
    /// A committed generation's canonical hash and the text kept of it.
    fn generation(&mut self, generation: i64) -> Result<Option<(String, String)>>;
    fn insert_generation(&mut self, generation: i64, hash: &str, config_json: &str, at: Timestamp) -> Result<()>;
    /// Records a scope as the generation has it (reviving it if it was removed).
    fn upsert_scope(&mut self, id: &str, generation: i64, parent: Option<&str>, enabled: bool) -> Result<()>;
    /// Marks every live scope not in `kept` as removed in `generation`: a tombstone, never deleted.
    fn tombstone_scopes(&mut self, kept: &[String], generation: i64) -> Result<()>;
    /// A page of every scope ever published, tombstones included, by id, past `page.after`
    /// (scopes are few and named: `page.upper` bounds nothing here).
    fn page_scopes(&mut self, page: &Page<String>) -> Result<Vec<ScopeRecord>>;
}

/// Work and its correlation keys.
pub trait WorkRows {
    /// Inserts a Work and claims its keys; a key another Work owns is [`StoreError::KeyTaken`].
    fn insert_work(&mut self, work: &Work) -> Result<()>;
    fn get_work(&mut self, id: &str) -> Result<Option<Work>>;
    /// Writes a Work's mutable fields (state, binding, epoch, outcome, wake event, hold, retry
    /// count and backoff, updated time); its keys change only through [`WorkRows::attach_work_key`].
    fn update_work(&mut self, work: &Work) -> Result<()>;
    /// Newest first.
    fn list_work(&mut self, filter: &WorkFilter) -> Result<Vec<Work>>;
    /// A page of Work, newest first by `(created_at, id)`, created at or before `page.upper`.
    fn page_work(&mut self, filter: &WorkFilter, page: &Page<(i64, String)>) -> Result<Vec<Work>>;
    /// Ready Work that may be claimed at `now` (not held, past any retry backoff), oldest first.
    fn ready_work(&mut self, limit: usize, now: Timestamp) -> Result<Vec<Work>>;
    fn work_owning_key(&mut self, key: &str) -> Result<Option<String>>;
    /// Claims one more key for a Work; a key another Work owns is [`StoreError::KeyTaken`].
    fn attach_work_key(&mut self, work_id: &str, key: &str) -> Result<()>;
    /// How many Works in `scope` are not finished (ready, running or waiting).
    fn count_unfinished_work(&mut self, scope: &str) -> Result<u64>;
    /// The bytes charged to a Work for the events and replay records it has written
    /// (`conduit_core::quota`); every event with its `work_id` and every replay record of one of
    /// its executions is charged as the store writes it.
    fn work_stored_bytes(&mut self, work_id: &str) -> Result<u64>;
}

/// Executions (attempts of a Work).
pub trait ExecutionRows {
    fn insert_execution(&mut self, execution: &Execution) -> Result<()>;
    fn get_execution(&mut self, id: &str) -> Result<Option<Execution>>;
    fn update_execution(&mut self, execution: &Execution) -> Result<()>;
    /// Oldest first; all executions when `work` is `None`.
    /// Every attempt of one Work, oldest first.
    fn executions_of_work(&mut self, work: &str) -> Result<Vec<Execution>>;
    /// The highest watermark among `work`'s attempts other than `execution` (0 when there is none):
    /// how far the Work's input was acknowledged before that attempt.
    fn watermark_before(&mut self, work: &str, execution: &str) -> Result<i64>;
    fn executions_in_state(&mut self, state: ExecutionState) -> Result<Vec<Execution>>;
    /// A page of executions, oldest first by `(started_at, id)`, started at or before `page.upper`.
    fn page_executions(&mut self, work: Option<&str>, page: &Page<(i64, String)>) -> Result<Vec<Execution>>;
}

/// Accepted events and the causal pins of their roots.
pub trait EventRows {
    /// Accepts an event, assigning the next acceptance sequence.
    fn insert_event(&mut self, event: NewEvent) -> Result<Event>;
    /// Accepts a host record whose data is JSON text already, stored as it is: source
    /// `core.toolbelt`, no correlation key, actor or delivery identity, its data charged to its
    /// Work as [`EventRows::insert_event`] charges an event's. Answers its acceptance sequence.
    fn insert_record(&mut self, record: &NewRecord<'_>) -> Result<i64>;
    fn get_event(&mut self, id: &str) -> Result<Option<Event>>;
    /// In acceptance order; all events when `work` is `None`.
    fn list_events(&mut self, work: Option<&str>, limit: usize) -> Result<Vec<Event>>;
    /// A page of events by acceptance sequence, up to sequence `page.upper`.
    fn page_events(&mut self, filter: &EventFilter, page: &Page<i64>) -> Result<Vec<Event>>;
    /// The sequences of the events [`EventRows::page_events`] answers for the same page, without
    /// their rows: for a reader that keeps events it has read already (an event never changes).
    fn page_event_sequences(&mut self, filter: &EventFilter, page: &Page<i64>) -> Result<Vec<i64>>;
    /// Events after sequence `after` and up to `through` whose correlation key is one of `keys`, in
    /// acceptance order.
    fn events_between_for_keys(&mut self, after: i64, through: i64, keys: &[String]) -> Result<Vec<Event>>;
    fn max_sequence(&mut self) -> Result<i64>;
    /// The event accepted under a delivery identity, if any.
    fn event_by_delivery(&mut self, delivery_id: &str) -> Result<Option<Event>>;
    /// When the causal event `back` places before a root's latest (1: the latest itself) was
    /// accepted, if the root has that many: one index seek, however long the chain (the toolbelt's
    /// call records are not causal links and do not count).
    fn causal_event_time_back(&mut self, root: &str, back: u32) -> Result<Option<Timestamp>>;
    /// A root's pinned limits, with [`EventRows::causal_event_time_back`] for its `per_minute` read
    /// in the same statement; `None` when the root has no pin yet.
    fn causal_bounds(&mut self, root: &str) -> Result<Option<(CausalPin, Option<Timestamp>)>>;
    fn insert_causal_pin(&mut self, root: &str, pin: CausalPin, at: Timestamp) -> Result<()>;
}

/// Waits a Work parks on.
pub trait WaitRows {
    fn insert_wait(&mut self, wait: &Wait) -> Result<()>;
    /// The armed waits subscribed on `key`, oldest first.
    fn armed_waits_for_key(&mut self, key: &str) -> Result<Vec<Wait>>;
    /// The armed waits of one Work, oldest first.
    fn armed_waits_of_work(&mut self, work_id: &str) -> Result<Vec<Wait>>;
    /// The armed waits whose timeout is at or before `now`, oldest first.
    fn armed_waits_due(&mut self, now: Timestamp) -> Result<Vec<Wait>>;
    fn update_wait(&mut self, wait: &Wait) -> Result<()>;
    /// Writes an armed wait's keys and subscribes it on each (it gained one).
    fn resubscribe_wait(&mut self, wait: &Wait) -> Result<()>;
    /// A page of waits in any state, oldest first by `(created_at, id)`, created at or before `page.upper`.
    fn page_waits(&mut self, work: Option<&str>, page: &Page<(i64, String)>) -> Result<Vec<Wait>>;
}

/// A token with what its lease guard judges it by, read together: its execution, its Work and the
/// event the execution's segment continues from (each `None` when there is no such row). The rows
/// are shared: a lease kept on the write connection is handed to each call without copying them.
#[derive(Debug, Clone)]
pub struct TokenLease {
    pub token: Arc<TokenRecord>,
    pub execution: Option<Arc<Execution>>,
    pub work: Option<Arc<Work>>,
    pub cause: Option<Arc<Event>>,
}

/// Execution tokens (digests only).
pub trait TokenRows {
    fn insert_token(&mut self, token: &TokenRecord) -> Result<()>;
    fn token_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<TokenRecord>>;
    /// The token with `digest` and its lease's rows, read together (a toolbelt call's first step).
    fn token_lease_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<TokenLease>>;
    /// Revokes every live token of `work_id` whose epoch is below `epoch`.
    fn revoke_tokens_below(&mut self, work_id: &str, epoch: u32, at: Timestamp) -> Result<()>;
    fn revoke_execution_tokens(&mut self, execution_id: &str, at: Timestamp) -> Result<()>;
    /// Revokes one token by its id (its revocation id); whether a live one was revoked.
    fn revoke_token(&mut self, id: &str, at: Timestamp) -> Result<bool>;
    /// A page of an execution's token records, oldest first by `(issued_at, id)`.
    fn page_tokens_of_execution(&mut self, execution_id: &str, page: &Page<(i64, String)>) -> Result<Vec<TokenRecord>>;

    /// Deletes token records revoked or expired before `cutoff`; returns how many went.
    fn delete_tokens_settled_before(&mut self, cutoff: Timestamp) -> Result<usize>;
}

/// Toolbelt replay records and the audit trail.
pub trait RequestRows {
    fn get_request(&mut self, execution_id: &str, operation: &str, request_id: &str) -> Result<Option<RequestRecord>>;
    fn insert_request(&mut self, record: &RequestRecord) -> Result<()>;
    /// Deletes replay records written before `cutoff` whose execution has finished.
    fn delete_finished_requests_before(&mut self, cutoff: Timestamp) -> Result<usize>;
    fn insert_audit(&mut self, record: &AuditRecord) -> Result<()>;
    /// Oldest first; every record when `execution` is `None`.
    fn list_audit(&mut self, execution: Option<&str>, limit: usize) -> Result<Vec<AuditRecord>>;
    /// A page of audit records, oldest first by `(at, id)`, written at or before `page.upper`.
    fn page_audit(&mut self, filter: &AuditFilter, page: &Page<(i64, String)>) -> Result<Vec<AuditRecord>>;
}

/// Operators' idempotency keys.
pub trait IdempotencyRows {
    fn get_idempotent(&mut self, principal: &str, key: &str) -> Result<Option<IdempotentRecord>>;
    fn insert_idempotent(&mut self, record: &IdempotentRecord) -> Result<()>;
    /// Deletes idempotency records written before `cutoff`.
    fn delete_idempotent_before(&mut self, cutoff: Timestamp) -> Result<usize>;
}

/// Operator credentials (digests only).
pub trait OperatorRows {
    fn insert_operator(&mut self, operator: &OperatorRecord) -> Result<()>;
    fn operator_by_digest(&mut self, digest: &[u8; 32]) -> Result<Option<OperatorRecord>>;
    /// The active (unrevoked) credential of a named operator.
    fn active_operator(&mut self, name: &str) -> Result<Option<OperatorRecord>>;
    /// Revokes an active credential, recording when and by whom.
    fn revoke_operator(&mut self, id: &str, at: Timestamp, by: &str) -> Result<()>;
    fn get_operator(&mut self, id: &str) -> Result<Option<OperatorRecord>>;
    /// A page of every operator credential, revoked ones included: by name, newest (highest id)
    /// first, created at or before `page.upper`.
    fn page_operators(&mut self, page: &Page<(String, String)>) -> Result<Vec<OperatorRecord>>;
    /// The store's key `name`, made from `fresh` the first time any daemon asks for it: a key every
    /// daemon on the store shares, such as the one that authenticates list cursors.
    fn shared_key(&mut self, name: &str, fresh: &[u8]) -> Result<Vec<u8>>;
    /// Records what an operator changed; a record with the same id (a replayed request's) is kept
    /// as it was.
    fn record_operator_action(&mut self, action: &OperatorAction) -> Result<()>;
    /// A page of operators' actions, of one principal or of all, oldest first by `(at, id)`,
    /// recorded at or before `page.upper`.
    fn page_operator_actions(
        &mut self,
        principal: Option<&str>,
        page: &Page<(i64, String)>,
    ) -> Result<Vec<OperatorAction>>;
}

/// Declared artifacts.
pub trait ArtifactRows {
    /// Records a declared file, replacing an earlier record of the same execution and index (a
    /// segment end observed again after a restart).
    fn put_artifact(&mut self, artifact: &ArtifactRecord) -> Result<()>;
    fn get_artifact(&mut self, execution_id: &str, index: u32) -> Result<Option<ArtifactRecord>>;
    /// A page of artifacts, of one execution or of all, oldest execution first: each execution's
    /// log, then its declared files in declaration order; keyed by `(started_at, execution, index)`
    /// with the log at index -1, of executions started at or before `page.upper`.
    fn page_artifacts(&mut self, execution: Option<&str>, page: &Page<ArtifactKey>) -> Result<Vec<ArtifactEntry>>;
}

/// Installed packages.
pub trait PackageRows {
    /// Records an install, replacing an earlier install of the same package.
    fn put_package(&mut self, package: &PackageRecord) -> Result<()>;
    fn get_package(&mut self, name: &str) -> Result<Option<PackageRecord>>;
    /// A page of installed packages, by name.
    fn page_packages(&mut self, page: &Page<String>) -> Result<Vec<PackageRecord>>;
    /// Removes a package's record; `false` when there was none.
    fn delete_package(&mut self, name: &str) -> Result<bool>;
}

/// Human approvals.
pub trait ApprovalRows {
    /// Records a new approval, or its new state.
    fn put_approval(&mut self, approval: &Approval) -> Result<()>;
    fn get_approval(&mut self, id: &str) -> Result<Option<Approval>>;
    /// The latest approval bound to one call (Work, operation, input hash).
    fn approval_for(&mut self, work_id: &str, operation: &str, input_hash: &str) -> Result<Option<Approval>>;
    /// The Work's approvals still waiting for a decision.
    fn pending_approvals_of_work(&mut self, work_id: &str) -> Result<Vec<Approval>>;
    /// A page of approvals, oldest first by `(requested_at, id)`, requested at or before `page.upper`.
    fn page_approvals(&mut self, state: Option<ApprovalState>, page: &Page<(i64, String)>) -> Result<Vec<Approval>>;
}

/// Tool sessions.
pub trait ToolSessionRows {
    fn insert_tool_session(&mut self, session: &ToolSession) -> Result<()>;
    fn get_tool_session(&mut self, id: &str) -> Result<Option<ToolSession>>;
    /// Records how an open session ended; a closed one is left as it is.
    fn close_tool_session(&mut self, id: &str, outcome: SessionOutcome, at: Timestamp) -> Result<()>;
    /// The execution's sessions still open, oldest first.
    fn open_tool_sessions(&mut self, execution_id: &str) -> Result<Vec<ToolSession>>;
}

/// Abbreviated ids.
pub trait IdRows {
    /// Up to `limit` ids of `kind` that start with `prefix`, in order.
    fn ids_starting_with(&mut self, kind: IdKind, prefix: &str, limit: usize) -> Result<Vec<String>>;
}

/// Declares [`Tx`] as the sum of the vocabularies, each named once, and implements it for every
/// type that implements them all.
macro_rules! transaction_of {
    ($($vocabulary:ident),+ $(,)?) => {
        /// Everything the host reads and writes, inside one transaction: every vocabulary above. A
        /// method of any of them is callable on a `&mut dyn Tx`; an adapter implements each apart.
        pub trait Tx: $($vocabulary +)+ {}

        impl<T: ?Sized + $($vocabulary +)+> Tx for T {}
    };
}

transaction_of!(
    GenerationRows,
    WorkRows,
    ExecutionRows,
    EventRows,
    WaitRows,
    TokenRows,
    RequestRows,
    IdempotencyRows,
    OperatorRows,
    ArtifactRows,
    PackageRows,
    ApprovalRows,
    ToolSessionRows,
    IdRows,
);

/// What a transaction may do, and what its caller waits for before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reads only; sees every acknowledged write.
    Read,
    /// Reads state for the host's own decisions (the scheduler's, a request's authentication), not
    /// for an answer: sees every acknowledged write and returns once the state it read is on disk,
    /// but waits for no record's flush. On SQLite it reads inside the writer's open transaction, so
    /// it commits nothing and the calls it follows keep sharing one commit.
    ReadState,
    /// Changes state: returns once its commit is on disk.
    Write,
    /// Records a read and changes no other state: its audit record, its call records on the Work's
    /// log (with their quota charges) and its replay record. Returns once a process crash cannot
    /// lose it (its commit is made, or, on SQLite, its statements are in the redo log and commit
    /// with later ones) and once the state it read is on disk, but does not wait for its own
    /// records to reach the disk ("Durability" in DESIGN.md). A later read sees them and waits.
    Record,
}

/// A store: runs a closure inside one transaction, committing when it succeeds.
pub trait Store: Send + Sync {
    /// Runs `body` in one transaction of `mode`. The body's error rolls back everything it did.
    fn transact(&self, mode: Mode, body: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()>;

    /// Whether this store runs its writes one at a time in this process and lets a caller wait for
    /// their flushes later ([`crate::flush::deferring`]): callers do better queued on one thread
    /// than parked on its lock and its flush (SQLite). A store whose writers run side by side
    /// (PostgreSQL) answers false.
    fn writes_one_at_a_time(&self) -> bool {
        false
    }
}

impl dyn Store + '_ {
    /// Runs `f` in one write transaction: committed (durably) when it returns `Ok`, rolled back otherwise.
    pub fn write<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.run(Mode::Write, f)
    }

    /// Runs `f` in one read transaction.
    pub fn read<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.run(Mode::Read, f)
    }

    /// Runs `f` in one [`Mode::ReadState`] transaction.
    pub fn read_state<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.run(Mode::ReadState, f)
    }

    /// Runs `f` in one [`Mode::Record`] transaction: what it writes records a read.
    pub fn record<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.run(Mode::Record, f)
    }

    /// Runs `f` in one transaction of `mode`.
    pub fn run<T, E: From<StoreError>>(
        &self,
        mode: Mode,
        f: impl FnOnce(&mut dyn Tx) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let mut f = Some(f);
        let mut out = None;
        let status = self.transact(mode, &mut |tx| {
            let Some(f) = f.take() else {
                return Err(StoreError::RolledBack);
            };
            let result = f(tx);
            let failed = result.is_err();
            out = Some(result);
            if failed {
                Err(StoreError::RolledBack)
            } else {
                Ok(())
            }
        });
        match (out, status) {
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (_, Err(e)) => Err(e.into()),
            (None, Ok(())) => Err(StoreError::RolledBack.into()),
        }
    }
}
