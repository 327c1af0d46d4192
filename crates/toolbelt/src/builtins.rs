//! The builtin operations: `emit`, `read_context`, `declare_outcome`, `wait`, `create_work`.

use conduit_config::Snapshot;
use conduit_core::names::{is_event_type, is_key, is_reserved_type, type_matches};
use conduit_core::session::SessionOutcome;
use conduit_core::tool::{CatalogFields, ToolDescriptor, ToolSource};
use conduit_core::wait::is_valid_wait;
use conduit_core::{
    Causation, Declaration, Duration, ErrorCode, Event, Execution, NewEvent, OutcomeStatus, Parent, Refusal, Source,
    Timestamp, Work,
};
use conduit_scheduler::{accept, create_work, HostError, NewWork};
use conduit_store::{new_id, StoreError, Tx};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::authority::Authority;
use crate::operation::{Emission, WaitRequest};
use crate::Answer;
use crate::CallRequest;

/// Shown to agents before the list of their operations (and served by `os mcp` as instructions).
pub const GUIDANCE: &str = "You are running inside an Open Conduit execution. Use your toolbelt to report \
what you do: emit events for progress, declare an outcome when you are done, or declare a wait to be \
resumed when an event arrives. A declaration releases your authority for this segment.";

/// A builtin's agent-facing description.
#[derive(Debug, Clone, Serialize)]
pub struct OperationDescriptor {
    pub name: String,
    pub summary: String,
    pub input_schema: Value,
}

/// The agent-facing descriptions of every builtin, sorted by name: the catalog's, shortened.
pub fn describe_builtins() -> Vec<OperationDescriptor> {
    builtin_tools()
        .into_iter()
        .map(|tool| OperationDescriptor {
            name: tool.tool_id,
            summary: tool.description.unwrap_or_default(),
            input_schema: tool.input_schema.unwrap_or_default(),
        })
        .collect()
}

/// The catalog descriptors of every builtin, sorted by name, each authorized by its own name (the
/// catalog adds the toolsets that grant it). `read_context` reads; the rest write; none has egress.
pub fn builtin_tools() -> Vec<ToolDescriptor> {
    let string = json!({"type": "string"});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let object = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
    let event_ref = object(
        json!({"event_id": string, "sequence": {"type": "integer"}}),
        &["event_id", "sequence"],
    );
    let declared = |kind: &str| object(json!({"declared": {"const": kind}}), &["declared"]);
    let tool =
        |name: &str, title: &str, summary: &str, fields: CatalogFields, input: Value, output: Value| ToolDescriptor {
            title: Some(title.to_owned()),
            description: Some(summary.to_owned()),
            input_schema: Some(input),
            output_schema: Some(output),
            ..ToolDescriptor::of(name, ToolSource::HostExtension, &fields, vec![name.to_owned()])
        };
    vec![
        tool(
            "create_work",
            "Create child Work",
            "Create child Work in this scope, run by one of its bindings.",
            CatalogFields::write(),
            object(json!({"binding": string, "input": {}, "keys": strings}), &["binding"]),
            object(json!({"work_id": string, "event_id": string}), &["work_id", "event_id"]),
        ),
        tool(
            "declare_outcome",
            "Declare the outcome",
            "Declare this Work's outcome; applied when the process exits. `artifacts` names files in the working directory the host keeps.",
            CatalogFields::write(),
            object(
                json!({"status": {"enum": ["succeeded", "failed"]}, "summary": string, "artifacts": {
                    "type": "array", "items": string, "maxItems": conduit_core::artifact::MAX_DECLARED}}),
                &["status"],
            ),
            declared("outcome"),
        ),
        tool(
            "emit",
            "Emit an event",
            "Emit an event from this execution.",
            CatalogFields::write(),
            object(
                json!({"type": string, "data": {}, "correlation_key": string}),
                &["type"],
            ),
            event_ref,
        ),
        tool(
            "read_context",
            "Read the context",
            "Read this execution's context: its Work, input, wake reason and operations.",
            CatalogFields::read(),
            object(json!({}), &[]),
            json!({"type": "object"}),
        ),
        tool(
            "wait",
            "Wait for an event",
            "Park this Work until a matching event arrives (or the timeout); resumes in a new attempt. `artifacts` names files in the working directory the host keeps.",
            CatalogFields::write(),
            object(
                json!({"types": strings, "keys": strings, "timeout": string, "artifacts": {
                    "type": "array", "items": string, "maxItems": conduit_core::artifact::MAX_DECLARED}}),
                &["types"],
            ),
            declared("wait"),
        ),
    ]
}

/// Whether the builtin `operation` only reads: its call's transaction writes nothing but the call's
/// own records, so it need not wait for them to reach the disk (`Mode::Record`).
pub fn only_reads(operation: &str) -> bool {
    operation == "read_context"
}

/// Runs a builtin for an authorized call.
pub fn run(
    tx: &mut dyn Tx,
    config: &Snapshot,
    authority: &Authority,
    request: &CallRequest,
    keys: &KeyRule<'_>,
    now: Timestamp,
) -> Result<Answer, HostError> {
    let input = &request.input;
    let seed = request
        .request_id
        .as_ref()
        .map(|r| format!("{}/{r}", authority.execution.id));
    let tree = match request.operation.as_str() {
        "emit" => emit(tx, config, authority, parse(input)?, seed, keys, now),
        "read_context" => return read_context(tx, config, authority, parse(input)?),
        "declare_outcome" => declare_outcome(tx, authority, parse(input)?, now),
        "wait" => wait(tx, authority, parse(input)?, now),
        "create_work" => create_child(tx, config, authority, parse(input)?, seed, keys, now),
        _ => Err(Refusal::forbidden().into()),
    };
    tree.map(Answer::Tree)
}

/// Parses an operation's input strictly; `null` stands for an empty object.
fn parse<T: DeserializeOwned>(input: &Value) -> Result<T, Refusal> {
    let empty = json!({});
    // Read in place: the input is not copied first.
    let input = if input.is_null() { &empty } else { input };
    // Read plainly first: tracking the path costs more than the reading, and only a refusal says it.
    T::deserialize(input).or_else(|_| {
        serde_path_to_error::deserialize(input).map_err(|e| {
            let at = e.path().to_string();
            Refusal::invalid_input(format!("the operation's input does not match its schema (at `{at}`)"))
                .with_remedy("see `os guidance` for each operation's input")
        })
    })
}

/// Emits an event as the execution. With a request id the emission has a delivery identity, so a
/// retry that reaches here again returns the event it already accepted.
pub(crate) fn emit(
    tx: &mut dyn Tx,
    config: &Snapshot,
    a: &Authority,
    input: Emission,
    delivery_id: Option<String>,
    keys: &KeyRule<'_>,
    now: Timestamp,
) -> Result<Value, HostError> {
    check_emittable(config, a, &input.event_type)?;
    if let Some(existing) = delivery_id
        .as_deref()
        .map(|d| tx.event_by_delivery(d))
        .transpose()?
        .flatten()
    {
        return Ok(json!({"event_id": existing.id, "sequence": existing.sequence}));
    }
    if let Some(key) = &input.correlation_key {
        keys.check(key)?;
        check_owned(tx, a, key)?;
    }
    let id = new_id();
    let event = NewEvent {
        causation: Causation::continuing(a.cause.as_deref().map(Parent::from), &id),
        id,
        event_type: input.event_type,
        source: Source::Execution(a.execution.id.clone()),
        scope: a.work.scope.clone(),
        work_id: Some(a.work.id.clone()),
        execution_id: Some(a.execution.id.clone()),
        correlation_key: input.correlation_key,
        actor: None,
        data: input.data,
        accepted_at: now,
        delivery_id,
    };
    let event = accept(tx, config, event, now)?;
    Ok(json!({"event_id": event.id, "sequence": event.sequence}))
}

/// An execution emits only namespaced, non-reserved types, within its binding's `emits` when set.
fn check_emittable(config: &Snapshot, a: &Authority, event_type: &str) -> Result<(), Refusal> {
    if !is_event_type(event_type) {
        return Err(Refusal::invalid_input("an event type is namespaced: `family.name`"));
    }
    let emits = config
        .binding(&a.work.scope, &a.work.binding)
        .and_then(|b| b.emits.as_ref());
    let allowed =
        !is_reserved_type(event_type) && emits.is_none_or(|list| list.iter().any(|p| type_matches(p, event_type)));
    if allowed {
        Ok(())
    } else {
        Err(Refusal::new(
            ErrorCode::EventTypeNotAllowed,
            "this execution may not emit events of this family",
        )
        .with_remedy("emit a family your binding's `emits` allows; core, agent, tool and toolbelt belong to the host"))
    }
}

fn check_owned(tx: &mut dyn Tx, a: &Authority, key: &str) -> Result<(), HostError> {
    if tx.work_owning_key(key)?.as_deref() == Some(a.work.id.as_str()) {
        Ok(())
    } else {
        Err(Refusal::new(
            ErrorCode::CorrelationNotOwned,
            "the correlation key is not one this Work owns",
        )
        .with_remedy("use `work:<your work id>` or a key given when the Work was created")
        .into())
    }
}

/// Which keys an execution may claim or emit on: none in a registered extension's namespace
/// (`github:...`) but, for a translated emission, its own registration's. Those keys' events come
/// from the extension's ingress, so a Work must not forge them or take their routing.
pub struct KeyRule<'a> {
    pub registry: &'a crate::Registry,
    /// The registration making a translated emission.
    pub own: Option<&'a str>,
}

impl KeyRule<'_> {
    fn check(&self, key: &str) -> Result<(), HostError> {
        match self.registry.namespace_of(key) {
            Some(namespace) if Some(namespace) != self.own => Err(Refusal::new(
                ErrorCode::CorrelationNotOwned,
                format!(
                    "the key lies in the `{namespace}` extension's namespace, whose events come from that extension"
                ),
            )
            .with_remedy("use `work:<your work id>` or a key of your own")
            .into()),
            _ => Ok(()),
        }
    }
}

/// The most keys a registration's wait may name (as many as a Work may own).
const MAX_WAIT_KEYS: usize = 32;

/// Declares a registration's wait (a translated wait, or a gate's parked call) for the caller's
/// segment, as `wait` declares one. Its keys are the Work's own or lie in the registration's
/// namespace, which no other registration's events use.
pub(crate) fn declare_registration_wait(
    tx: &mut dyn Tx,
    a: &Authority,
    registration: &str,
    wait: &WaitRequest,
    now: Timestamp,
) -> Result<(), HostError> {
    if wait.keys.len() > MAX_WAIT_KEYS || !wait.keys.iter().all(|k| is_key(k)) {
        return Err(Refusal::new(
            ErrorCode::OperationFailed,
            format!("the operation asked for a wait on more than {MAX_WAIT_KEYS} keys, or an ill-formed one"),
        )
        .into());
    }
    let namespace = format!("{registration}:");
    for key in wait.keys.iter().filter(|k| !k.starts_with(&namespace)) {
        check_owned(tx, a, key)?;
    }
    declare_closing(tx, a, wait.declaration(), SessionOutcome::Parked, now)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// The execution's context: scope, binding and playbook, the Work, the input that arrived since the
/// previous attempt's acknowledged watermark, what woke this segment, and the granted operations.
/// The execution's context, written as JSON text at once: the Work and its input events are most
/// of it, and a value tree of them was built, written out and dropped again on every read. Its own
/// keys are in the order a value tree sorts them; the Work's and the events' come in the order
/// their types declare them, as in every answer that writes them directly.
fn read_context(tx: &mut dyn Tx, config: &Snapshot, a: &Authority, _: Empty) -> Result<Answer, HostError> {
    let playbook = config
        .binding(&a.work.scope, &a.work.binding)
        .and_then(|b| b.playbook.as_deref());
    let context = Answer::text(&Context {
        binding: &a.work.binding,
        execution: ContextExecution {
            deadline_at: a.execution.deadline_at,
            epoch: a.execution.epoch,
            id: &a.execution.id,
        },
        input: input_since_acknowledged(tx, a)?,
        operations: &a.token.operations,
        playbook,
        scope: &a.work.scope,
        wake: a.cause.as_deref(),
        work: &a.work,
    });
    Ok(context.map_err(StoreError::from)?)
}

#[derive(Serialize)]
struct Context<'a> {
    binding: &'a str,
    execution: ContextExecution<'a>,
    input: Vec<Event>,
    operations: &'a [String],
    playbook: Option<&'a str>,
    scope: &'a str,
    wake: Option<&'a Event>,
    work: &'a Work,
}

#[derive(Serialize)]
struct ContextExecution<'a> {
    deadline_at: Timestamp,
    epoch: u32,
    id: &'a str,
}

/// Events under the Work's keys accepted after the previous attempt's watermark (all of them for a
/// first attempt) and up to this attempt's, less the Work's own emissions and the host's call
/// records.
fn input_since_acknowledged(tx: &mut dyn Tx, a: &Authority) -> Result<Vec<Event>, HostError> {
    let acknowledged = tx.watermark_before(&a.work.id, &a.execution.id)?;
    let events = tx.events_between_for_keys(acknowledged, a.execution.watermark, &a.work.keys)?;
    Ok(events
        .into_iter()
        .filter(|e| {
            !matches!(e.source, Source::Execution(_) | Source::Toolbelt) || e.work_id.as_ref() != Some(&a.work.id)
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutcomeInput {
    status: OutcomeStatus,
    summary: Option<String>,
    #[serde(default)]
    artifacts: Vec<String>,
}

fn declare_outcome(tx: &mut dyn Tx, a: &Authority, input: OutcomeInput, now: Timestamp) -> Result<Value, HostError> {
    conduit_core::artifact::check_declared(&input.artifacts)?;
    declare(
        tx,
        a,
        Declaration::Outcome {
            status: input.status,
            summary: input.summary,
            artifacts: input.artifacts,
        },
        now,
    )?;
    Ok(json!({"declared": "outcome"}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitInput {
    types: Vec<String>,
    #[serde(default)]
    keys: Vec<String>,
    timeout: Option<String>,
    #[serde(default)]
    artifacts: Vec<String>,
}

fn wait(tx: &mut dyn Tx, a: &Authority, input: WaitInput, now: Timestamp) -> Result<Value, HostError> {
    if !is_valid_wait(&input.types, None) {
        return Err(Refusal::invalid_input("`types` lists one or more event types or family patterns").into());
    }
    for key in &input.keys {
        check_owned(tx, a, key)?;
    }
    let timeout = input.timeout.as_deref().map(parse_timeout).transpose()?;
    if !is_valid_wait(&input.types, timeout) {
        return Err(Refusal::invalid_input(TIMEOUT_SHAPE).into());
    }
    conduit_core::artifact::check_declared(&input.artifacts)?;
    declare(
        tx,
        a,
        Declaration::Wait {
            types: input.types,
            keys: input.keys,
            timeout,
            artifacts: input.artifacts,
        },
        now,
    )?;
    Ok(json!({"declared": "wait"}))
}

const TIMEOUT_SHAPE: &str = "`timeout` is a positive duration such as `30s` or `10m`";

fn parse_timeout(text: &str) -> Result<Duration, Refusal> {
    Duration::parse(text).ok_or_else(|| Refusal::invalid_input(TIMEOUT_SHAPE))
}

/// Records the segment's one declaration under the fence; the lease guard already ensured none exists.
pub(crate) fn declare(
    tx: &mut dyn Tx,
    a: &Authority,
    declaration: Declaration,
    now: Timestamp,
) -> Result<(), HostError> {
    declare_closing(tx, a, declaration, SessionOutcome::Failed, now)
}

/// [`declare`], closing the sessions still open with `sessions` (declaring releases the
/// segment's authority: they end with it).
pub(crate) fn declare_closing(
    tx: &mut dyn Tx,
    a: &Authority,
    declaration: Declaration,
    sessions: SessionOutcome,
    now: Timestamp,
) -> Result<(), HostError> {
    let mut execution = Execution::clone(&a.execution);
    execution.declaration = Some(declaration);
    tx.update_execution(&execution)?;
    conduit_scheduler::close_open_sessions(tx, &execution.id, sessions, now)?;
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateWorkInput {
    binding: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    keys: Vec<String>,
}

/// Creates child Work in the execution's scope. With a request id the child's ids derive from it, so
/// a retry after a crash before commit creates the same child.
fn create_child(
    tx: &mut dyn Tx,
    config: &Snapshot,
    a: &Authority,
    input: CreateWorkInput,
    id_seed: Option<String>,
    keys: &KeyRule<'_>,
    now: Timestamp,
) -> Result<Value, HostError> {
    for key in &input.keys {
        keys.check(key)?;
    }
    let new = NewWork {
        scope: a.work.scope.clone(),
        binding: input.binding,
        input: input.input,
        keys: input.keys,
        // An execution's child takes no binding grant: grants are an operator's to give.
        grants: Vec::new(),
        parent_work: Some(a.work.id.clone()),
        source: Source::Execution(a.execution.id.clone()),
        actor: None,
        id_seed,
    };
    let (work, event) = create_work(tx, config, new, a.cause.as_deref(), now)?;
    Ok(json!({"work_id": work.id, "event_id": event.id}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::Emission;

    /// An input read plainly is the same as one read with its path tracked, and a refusal still
    /// names where the input goes wrong.
    #[test]
    fn an_input_that_does_not_match_is_refused_at_its_place() {
        let read: Emission = parse(&json!({"type": "demo.x", "data": {"n": 1}})).unwrap();
        assert_eq!((read.event_type.as_str(), &read.data), ("demo.x", &json!({"n": 1})));
        let refused = parse::<Emission>(&json!({"type": "demo.x", "correlation_key": 7})).unwrap_err();
        assert!(
            refused.message.contains("(at `correlation_key`)"),
            "{}",
            refused.message
        );
        let unknown = parse::<Emission>(&json!({"type": "demo.x", "extra": true})).unwrap_err();
        assert!(unknown.message.contains("(at `extra`)"), "{}", unknown.message);
    }
}
