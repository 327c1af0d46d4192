//! The introspection extension: an execution reads its own scope's Work and their events, for a
//! generation whose configuration enables it (`extensions.introspection`). Read only, and never
//! past the caller's scope: a Work of another scope is `not_found`, as an unknown one is.

use std::sync::Arc;

use conduit_config::CurrentConfig;
use conduit_core::tool::{CatalogFields, ReplayPolicy, ToolSource};
use conduit_core::{Work, WorkState};
use conduit_store::{EventFilter, Page, Store, StoreError, WorkFilter};
use conduit_toolbelt::registry::{
    Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationError, OperationSpec, Registration, ToolsetEntry,
    ToolsetSpec,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::store_thread::on_store_thread;

pub const NAME: &str = "introspection";

/// The most items one read answers.
const MAX_ITEMS: usize = 100;

/// What the operations read: the store, and the configuration that enables them.
#[derive(Clone)]
pub struct Introspection {
    live: Option<(Arc<dyn Store>, CurrentConfig)>,
}

impl Introspection {
    /// Serving `store` under `config`; `None` only names the operations (configuration checks).
    pub fn new(live: Option<(Arc<dyn Store>, CurrentConfig)>) -> Introspection {
        Introspection { live }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListWork {
    state: Option<String>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OneWork {
    work_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkEvents {
    work_id: String,
    /// Only events accepted after this sequence.
    after: Option<i64>,
    limit: Option<usize>,
}

/// A failure the store gave: nothing of its text reaches the caller.
struct Unavailable;

impl From<StoreError> for Unavailable {
    fn from(_: StoreError) -> Self {
        Unavailable
    }
}

impl Handler for Introspection {
    fn call(&self, call: HandlerCall) -> HandlerFuture {
        let this = self.clone();
        Box::pin(async move { this.run(call).await.map(HandlerOutput::output) })
    }
}

impl Introspection {
    async fn run(self, call: HandlerCall) -> Result<Value, OperationError> {
        let unconfigured = || {
            OperationError::new(
                "extension_unconfigured",
                "introspection is not enabled; an operator sets `extensions.introspection` to {}",
            )
        };
        let (store, config) = self.live.clone().ok_or_else(unconfigured)?;
        if !config.get().introspection_enabled() {
            return Err(unconfigured());
        }
        let scope = call.scope.clone();
        let read: Result<Option<Value>, Unavailable> = match call.operation.as_str() {
            "introspection.work.list" => {
                let input: ListWork = parsed(call.input)?;
                let state = input.state.as_deref().map(work_state).transpose()?;
                let filter = WorkFilter {
                    scope: Some(scope),
                    state,
                };
                let page = Page {
                    after: None,
                    upper: i64::MAX,
                    limit: bounded(input.limit),
                };
                on_store_thread(store, move |s| {
                    s.read(|tx| {
                        let items: Vec<Value> = tx.page_work(&filter, &page)?.iter().map(summary).collect();
                        Ok(Some(json!({"items": items})))
                    })
                })
                .await
            }
            "introspection.work.get" => {
                let input: OneWork = parsed(call.input)?;
                on_store_thread(store, move |s| {
                    s.read(|tx| Ok(in_scope(tx, &input.work_id, &scope)?.map(|w| json!(w))))
                })
                .await
            }
            "introspection.events.list" => {
                let input: WorkEvents = parsed(call.input)?;
                let limit = bounded(input.limit);
                on_store_thread(store, move |s| {
                    s.read(|tx| {
                        if in_scope(tx, &input.work_id, &scope)?.is_none() {
                            return Ok(None);
                        }
                        let page = Page {
                            after: input.after,
                            upper: tx.max_sequence()?,
                            limit,
                        };
                        Ok(Some(
                            json!({"items": tx.page_events(&EventFilter::of_work(&input.work_id), &page)?}),
                        ))
                    })
                })
                .await
            }
            _ => return Err(OperationError::new("not_found", "no such introspection operation")),
        };
        match read {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => Err(OperationError::new("not_found", "no Work of this scope has this id")),
            Err(Unavailable) => Err(OperationError::new(
                "introspection_unavailable",
                "the store could not be read",
            )),
        }
    }
}

fn parsed<T: serde::de::DeserializeOwned>(input: Value) -> Result<T, OperationError> {
    serde_json::from_value(input)
        .map_err(|_| OperationError::new("invalid_input", "the input does not match the operation's schema"))
}

fn work_state(text: &str) -> Result<WorkState, OperationError> {
    WorkState::parse(text).ok_or_else(|| {
        OperationError::new(
            "invalid_input",
            "`state` is ready, running, waiting, succeeded, failed or cancelled",
        )
    })
}

fn bounded(limit: Option<usize>) -> usize {
    limit.unwrap_or(20).clamp(1, MAX_ITEMS)
}

/// The Work `id` when it is in `scope`; another scope's is as unknown as a missing one.
fn in_scope(tx: &mut dyn conduit_store::Tx, id: &str, scope: &str) -> Result<Option<Work>, StoreError> {
    Ok(tx.get_work(id)?.filter(|w| w.scope == scope))
}

/// What a list shows of a Work: no input (`introspection.work.get` has it).
fn summary(work: &Work) -> Value {
    json!({"id": work.id, "binding": work.binding, "state": work.state, "parent_work": work.parent_work,
           "keys": work.keys, "outcome": work.outcome, "created_at": work.created_at, "updated_at": work.updated_at})
}

pub fn registration(handler: Arc<Introspection>) -> Registration {
    let object = |required: &[&str], properties: Value| json!({"type": "object", "additionalProperties": false, "required": required, "properties": properties});
    let string = json!({"type": "string"});
    let limit = json!({"type": "integer", "minimum": 1, "maximum": MAX_ITEMS});
    let read = CatalogFields {
        replay_policy: ReplayPolicy::NonDeterministic,
        ..CatalogFields::read()
    };
    let spec = |name: &str, title: &str, summary: &str, input: Value| OperationSpec {
        name: name.into(),
        title: Some(title.into()),
        summary: summary.into(),
        input_schema: input,
        output_schema: json!({"type": "object"}),
        catalog: read.clone(),
        capabilities: Vec::new(),
        handler: handler.clone(),
    };
    let operations = vec![
        spec(
            "introspection.work.list",
            "This scope's Work",
            "The Work of this execution's scope, newest first (`state` narrows it; `limit`, default 20).",
            object(&[], json!({"state": string, "limit": limit})),
        ),
        spec(
            "introspection.work.get",
            "One Work of this scope",
            "A Work of this execution's scope, with its input and outcome.",
            object(&["work_id"], json!({"work_id": string})),
        ),
        spec(
            "introspection.events.list",
            "A Work's events",
            "The events of a Work of this scope in acceptance order, after the sequence `after`.",
            object(
                &["work_id"],
                json!({"work_id": string, "after": {"type": "integer"}, "limit": limit}),
            ),
        ),
    ];
    let reader = ToolsetSpec {
        name: "introspection.reader".into(),
        operations: operations
            .iter()
            .map(|op| ToolsetEntry {
                operation: op.name.clone(),
                since: "0.1.0".into(),
            })
            .collect(),
    };
    Registration {
        name: NAME.into(),
        source: ToolSource::HostExtension,
        operations,
        toolsets: vec![reader],
    }
}
