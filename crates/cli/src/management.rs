//! The operator's side: where the management socket and token are, and the requests it takes
//! (`docs/api.md`, "Management socket").

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use conduit_client::percent_encode_segment as encode;
use serde_json::Value;

use crate::connection::{post, Connection, Request};
use crate::json::{object, strings};
use crate::report::Failure;

/// The management socket's name inside the state directory.
const SOCKET: &str = "management.sock";
/// The operator token's path inside the state directory.
const TOKEN_FILE: &str = "private/operator.token";

/// The locations given by flag or environment; whatever is absent is derived from the state
/// directory.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    pub state: Option<PathBuf>,
    pub endpoint: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
    /// The `Idempotency-Key` for this invocation's mutation; a fresh one when absent.
    pub idempotency_key: Option<String>,
    /// At most this many items of a list; every item when absent.
    pub limit: Option<usize>,
}

impl Locations {
    /// `--state`, else `$XDG_STATE_HOME/open-conduit`, else `$HOME/.local/state/open-conduit`.
    pub fn state_dir(&self) -> Result<PathBuf, Failure> {
        let from_env = || default_state_dir(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"));
        self.state.clone().or_else(from_env).ok_or_else(|| {
            Failure::Local(
                "cannot find the state directory: neither XDG_STATE_HOME nor HOME is set; \
                 pass --state DIR"
                    .to_owned(),
            )
        })
    }

    /// The management socket and operator token file to use.
    pub fn connection(&self) -> Result<Connection, Failure> {
        let connection = Connection::new(
            self.given_or_in_state(&self.endpoint, SOCKET)?,
            self.given_or_in_state(&self.token_file, TOKEN_FILE)?,
        );
        Ok(connection.with_idempotency(self.idempotency_key.clone()))
    }

    /// Sends a request to the management socket found here (see [`send`]).
    pub fn send(&self, request: &Request) -> Result<Value, Failure> {
        self.connection().and_then(|connection| send(&connection, request))
    }

    /// Sends a request to the management socket found here, following a list to its last page
    /// (see [`send_all`]).
    pub fn send_all(&self, request: &Request) -> Result<Value, Failure> {
        self.connection()
            .and_then(|connection| send_up_to(&connection, request, self.limit))
    }

    fn given_or_in_state(&self, given: &Option<PathBuf>, name: &str) -> Result<PathBuf, Failure> {
        match given {
            Some(path) => Ok(path.clone()),
            None => Ok(self.state_dir()?.join(name)),
        }
    }
}

/// The default state directory from the values of `XDG_STATE_HOME` and `HOME`; an empty or
/// relative `XDG_STATE_HOME` is ignored, as the XDG base directory specification says.
pub fn default_state_dir(xdg_state_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    Some(crate::xdg::base_dir(xdg_state_home, home, ".local/state")?.join("open-conduit"))
}

/// Sends a request; a daemon that cannot be reached is reported with how to start it.
pub fn send(connection: &Connection, request: &Request) -> Result<Value, Failure> {
    let socket = connection.socket();
    if matches!(socket.try_exists(), Ok(false)) {
        return Err(Failure::Transport(not_running(socket)));
    }
    connection.send(request).map_err(|failure| match failure {
        Failure::Transport(detail) => Failure::Transport(format!("{detail}\n{}", not_running(socket))),
        other => other,
    })
}

/// Sends a request and, for a list, follows its cursors to the last page, answering every item.
pub fn send_all(connection: &Connection, request: &Request) -> Result<Value, Failure> {
    send_up_to(connection, request, None)
}

/// Sends a request and, for a list, follows its cursors until more than `limit` items (or the last
/// page), asking each later page for no more than that takes. A list cut short answers
/// `"more": true`, exactly when an item past the limit exists.
pub fn send_up_to(connection: &Connection, request: &Request, limit: Option<usize>) -> Result<Value, Failure> {
    let mut answer = send(connection, request)?;
    let Request::Get(path) = request else { return Ok(answer) };
    let separator = if path.contains('?') { '&' } else { '?' };
    while let Some(cursor) = answer.get("next_cursor").and_then(Value::as_str).map(str::to_owned) {
        let have = items_in(&answer);
        let page = match limit {
            Some(n) if have > n => break,
            // One past the limit, so whether more remain is known without another request.
            Some(n) => format!("&limit={}", (n + 1 - have).min(MAX_PAGE)),
            None => String::new(),
        };
        let next = send(
            connection,
            &Request::Get(format!("{path}{separator}cursor={}{page}", encode(&cursor))),
        )?;
        let items = next.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
        if let Some(all) = answer.get_mut("items").and_then(Value::as_array_mut) {
            all.extend(items);
        }
        answer["next_cursor"] = next.get("next_cursor").cloned().unwrap_or(Value::Null);
    }
    if let (Some(n), Some(all)) = (limit, answer.get_mut("items").and_then(Value::as_array_mut)) {
        let more = all.len() > n;
        all.truncate(n);
        // The cursor of the last page fetched does not start after the last item kept.
        answer["next_cursor"] = Value::Null;
        answer["more"] = Value::Bool(more);
    }
    Ok(answer)
}

/// The `items` of a list answer, taken out of it.
pub fn items(mut answer: Value) -> Vec<Value> {
    match answer["items"].take() {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
}

/// The most rows a list answers in one page.
const MAX_PAGE: usize = 500;

fn items_in(answer: &Value) -> usize {
    answer.get("items").and_then(Value::as_array).map_or(0, Vec::len)
}

pub fn health() -> Request {
    Request::Get("/v1/health".to_owned())
}

/// What `work create` asks for beyond its scope and binding.
#[derive(Debug, Default)]
pub struct NewWork {
    pub input: Option<Value>,
    pub keys: Vec<String>,
    pub grants: Vec<String>,
}

/// `POST /v1/work`: ready Work in a scope, run by one of its bindings.
pub fn create_work(scope: &str, binding: &str, new: NewWork) -> Request {
    post(
        "/v1/work",
        object([
            ("scope", Some(scope.into())),
            ("binding", Some(binding.into())),
            ("input", new.input),
            ("keys", strings(new.keys)),
            ("grants", strings(new.grants)),
        ]),
    )
}

pub fn list_work(scope: Option<&str>, state: Option<&str>) -> Request {
    get_with_query("/v1/work", &[("scope", scope), ("state", state)])
}

/// `GET /v1/ids`: the one id of `kind` (work, execution, event, approval) starting with `prefix`.
pub fn resolve_id(kind: &str, prefix: &str) -> Request {
    get_with_query("/v1/ids", &[("kind", Some(kind)), ("prefix", Some(prefix))])
}

pub fn get_work(id: &str) -> Request {
    Request::Get(format!("/v1/work/{}", encode(id)))
}

/// `POST /v1/events`: an operator's event, a root or derived from `parent`.
pub fn emit(
    event_type: &str,
    scope: &str,
    data: Option<Value>,
    correlation_key: Option<String>,
    parent: Option<String>,
) -> Request {
    post(
        "/v1/events",
        object([
            ("type", Some(event_type.into())),
            ("scope", Some(scope.into())),
            ("data", data),
            ("correlation_key", correlation_key.map(Value::from)),
            ("parent", parent.map(Value::from)),
        ]),
    )
}

/// `POST /v1/actions`: an action on a Work, or in a scope (on an optional key).
pub fn invoke_action(
    action: &str,
    work: Option<String>,
    scope: Option<String>,
    correlation_key: Option<String>,
    data: Option<Value>,
) -> Request {
    post(
        "/v1/actions",
        object([
            ("action", Some(action.into())),
            ("work_id", work.map(Value::from)),
            ("scope", scope.map(Value::from)),
            ("correlation_key", correlation_key.map(Value::from)),
            ("data", data),
        ]),
    )
}

/// What `events list` filters on; every one given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    pub work: Option<String>,
    pub event_type: Option<String>,
    pub since: Option<String>,
}

impl EventQuery {
    /// One Work's events.
    pub fn of_work(work: &str) -> EventQuery {
        EventQuery {
            work: Some(work.to_owned()),
            ..EventQuery::default()
        }
    }
}

/// `GET /v1/events[?work=&type=&since=&after=]`: events in acceptance order, after the one with
/// sequence `after` when it is given.
pub fn list_events(query: &EventQuery, after: Option<i64>) -> Request {
    let after = after.map(|a| a.to_string());
    get_with_query(
        "/v1/events",
        &[
            ("work", query.work.as_deref()),
            ("type", query.event_type.as_deref()),
            ("since", query.since.as_deref()),
            ("after", after.as_deref()),
        ],
    )
}

pub fn event_chain(id: &str) -> Request {
    Request::Get(format!("/v1/events/{}/chain", encode(id)))
}

pub fn list_executions(work: Option<&str>) -> Request {
    get_with_query("/v1/executions", &[("work", work)])
}

/// `POST /v1/work/{id}/cancel`.
pub fn cancel_work(id: &str) -> Request {
    act("work", id, "cancel")
}

/// `POST /v1/work/{id}/retry`.
pub fn retry_work(id: &str) -> Request {
    act("work", id, "retry")
}

/// `POST /v1/scopes/{id}/reconcile`: the scope's unfinished Work in line with the active generation.
pub fn reconcile_scope(id: &str) -> Request {
    act("scopes", id, "reconcile")
}

/// `POST /v1/work/{id}/hold` or `/release`: hold Work from being claimed, or release it.
pub fn hold_work(id: &str, hold: bool) -> Request {
    act("work", id, if hold { "hold" } else { "release" })
}

/// `POST /v1/work/{id}/rebind`: another binding of the Work's scope runs its next attempt.
pub fn rebind_work(id: &str, binding: &str) -> Request {
    let body = object([("binding", Some(Value::from(binding)))]);
    post(&format!("/v1/work/{}/rebind", encode(id)), body)
}

/// `POST /v1/work/{id}/attach`: the Work owns one more correlation key.
pub fn attach_key(id: &str, key: &str) -> Request {
    let body = object([("key", Some(Value::from(key)))]);
    post(&format!("/v1/work/{}/attach", encode(id)), body)
}

/// `POST /v1/executions/{id}/cancel`.
pub fn cancel_execution(id: &str) -> Request {
    act("executions", id, "cancel")
}

/// `POST /v1/executions/{id}/confirm-stopped`: the operator's word that its process is gone.
pub fn confirm_stopped(id: &str) -> Request {
    act("executions", id, "confirm-stopped")
}

/// `POST /v1/work/{id}/wake`: an event on the Work's own key.
pub fn wake_work(id: &str, event_type: &str, data: Option<Value>) -> Request {
    let body = object([("type", Some(Value::from(event_type))), ("data", data)]);
    post(&format!("/v1/work/{}/wake", encode(id)), body)
}

/// `GET /v1/scopes`.
pub fn scopes() -> Request {
    Request::Get("/v1/scopes".to_owned())
}

/// `POST /v1/scopes/{id}/route/trace`: how the router would handle the event now.
pub fn route_trace(
    scope: &str,
    event_type: &str,
    correlation_key: Option<String>,
    work: Option<String>,
    data: Option<Value>,
) -> Request {
    let body = object([
        ("type", Some(Value::from(event_type))),
        ("correlation_key", correlation_key.map(Value::from)),
        ("work_id", work.map(Value::from)),
        ("data", data),
    ]);
    post(&format!("/v1/scopes/{}/route/trace", encode(scope)), body)
}

/// `GET /v1/scopes/{id}/route/samples`.
pub fn route_samples(scope: &str) -> Request {
    Request::Get(format!("/v1/scopes/{}/route/samples", encode(scope)))
}

/// `GET /v1/waits`.
pub fn waits(work: Option<&str>) -> Request {
    get_with_query("/v1/waits", &[("work", work)])
}

/// `GET /v1/artifacts`: what executions left behind (their logs).
pub fn list_artifacts(execution: Option<&str>) -> Request {
    get_with_query("/v1/artifacts", &[("execution", execution)])
}

/// `GET /v1/artifacts/{id}/content`.
pub fn artifact_content(id: &str) -> Request {
    Request::GetContent(artifact_content_path(id))
}

pub fn artifact_content_path(id: &str) -> String {
    format!("/v1/artifacts/{}/content", encode(id))
}

/// `GET /v1/auth/operators`: every operator credential, revoked ones included, without tokens.
pub fn operators() -> Request {
    Request::Get("/v1/auth/operators".to_owned())
}

/// `POST /v1/auth/operators`: a named operator's credential; its token is answered once.
pub fn add_operator(name: &str, role: Option<&str>) -> Request {
    post(
        "/v1/auth/operators",
        object([("name", Some(Value::from(name))), ("role", role.map(Value::from))]),
    )
}

/// `POST /v1/auth/rotate`: the caller's replacement credential, answered once.
pub fn rotate() -> Request {
    post("/v1/auth/rotate", object([]))
}

/// `POST /v1/auth/revoke`: a credential by its token id.
pub fn revoke(token_id: &str) -> Request {
    post("/v1/auth/revoke", object([("token_id", Some(Value::from(token_id)))]))
}

/// `GET /v1/config`: the active generation, secret references redacted.
pub fn config_show() -> Request {
    Request::Get("/v1/config".to_owned())
}

/// `POST /v1/config/validate`: the file's text, validated by the daemon.
pub fn config_validate(text: String) -> Request {
    post(
        "/v1/config/validate",
        object([("config_text", Some(Value::from(text)))]),
    )
}

/// `POST /v1/config/apply`: the file's text, published as the next generation.
pub fn config_apply(text: String, expected_generation: Option<i64>) -> Request {
    let body = object([
        ("config_text", Some(Value::from(text))),
        ("expected_generation", expected_generation.map(Value::from)),
    ]);
    post("/v1/config/apply", body)
}

/// `POST /v1/config/set`: one value of the active configuration, through apply.
pub fn config_set(pointer: &str, value: Value, expected_generation: Option<i64>) -> Request {
    let body = object([
        ("pointer", Some(Value::from(pointer))),
        ("value", Some(value)),
        ("expected_generation", expected_generation.map(Value::from)),
    ]);
    post("/v1/config/set", body)
}

/// What `open-conduit audit` may narrow the audit trail to.
#[derive(Debug, Default)]
pub struct AuditQuery<'a> {
    pub execution: Option<&'a str>,
    pub work: Option<&'a str>,
    pub operation: Option<&'a str>,
    pub result: Option<&'a str>,
    pub since: Option<&'a str>,
    pub until: Option<&'a str>,
}

/// `GET /v1/audit`: toolbelt call records, oldest first, narrowed by `query`.
pub fn list_audit(query: &AuditQuery<'_>) -> Request {
    get_with_query(
        "/v1/audit",
        &[
            ("execution", query.execution),
            ("work", query.work),
            ("operation", query.operation),
            ("result", query.result),
            ("since", query.since),
            ("until", query.until),
        ],
    )
}

/// `GET /v1/audit/operators[?operator=]`: what operators changed, oldest first.
pub fn list_operator_actions(operator: Option<&str>) -> Request {
    get_with_query("/v1/audit/operators", &[("operator", operator)])
}

/// `GET /v1/approvals[?state=]`.
pub fn list_approvals(state: Option<&str>) -> Request {
    get_with_query("/v1/approvals", &[("state", state)])
}

/// `GET /v1/approvals/{id}`.
pub fn approval(id: &str) -> Request {
    Request::Get(format!("/v1/approvals/{}", encode(id)))
}

/// `POST /v1/approvals/{id}/approve`.
pub fn approve(id: &str) -> Request {
    act("approvals", id, "approve")
}

/// `POST /v1/approvals/{id}/deny`.
pub fn deny(id: &str, reason: &str) -> Request {
    post(
        &format!("/v1/approvals/{}/deny", encode(id)),
        serde_json::json!({ "reason": reason }),
    )
}

/// `GET /v1/packages`: installed packages and their status.
pub fn list_packages() -> Request {
    Request::Get("/v1/packages".to_owned())
}

/// `GET /v1/packages/{name}`.
pub fn package(name: &str) -> Request {
    Request::Get(format!("/v1/packages/{}", encode(name)))
}

/// `POST /v1/packages`: install the package in `dir` (an absolute path).
pub fn install_package(dir: &str) -> Request {
    post("/v1/packages", serde_json::json!({ "dir": dir }))
}

/// `DELETE /v1/packages/{name}`.
pub fn remove_package(name: &str) -> Request {
    Request::Delete(format!("/v1/packages/{}", encode(name)))
}

/// `GET /v1/tools[?scope=&source=]`: the registered operations, sorted by toolId.
pub fn list_tools(scope: Option<&str>, source: Option<&str>) -> Request {
    get_with_query("/v1/tools", &[("scope", scope), ("source", source)])
}

/// `GET /v1/tools/{toolId}`: one operation's descriptor.
pub fn tool(id: &str) -> Request {
    Request::Get(format!("/v1/tools/{}", encode(id)))
}

/// `POST /v1/{collection}/{id}/{action}` with an empty body: an action on one resource.
fn act(collection: &str, id: &str, action: &str) -> Request {
    post(&format!("/v1/{collection}/{}/{action}", encode(id)), object([]))
}

/// `GET path?name=value&...` with only the parameters that are present, values encoded.
fn get_with_query(path: &str, params: &[(&str, Option<&str>)]) -> Request {
    let query: Vec<String> = params
        .iter()
        .filter_map(|(name, value)| Some(format!("{name}={}", encode((*value)?))))
        .collect();
    if query.is_empty() {
        Request::Get(path.to_owned())
    } else {
        Request::Get(format!("{path}?{}", query.join("&")))
    }
}

fn not_running(socket: &Path) -> String {
    format!(
        "the daemon is not running at {}; start it with `open-conduit daemon`",
        socket.display()
    )
}

#[cfg(test)]
mod tests;
