//! `os mcp`: the execution's toolbelt as a stdio MCP server (the official Rust SDK, `rmcp`), so any
//! MCP client (Claude Code, Codex, ...) can mount it.
//!
//! - `tools/list` is the execution's catalog (`GET /v1/tools`), read afresh on every list, with the
//!   MCP annotations derived from each descriptor by [`annotations`].
//! - The server instructions are the binding's playbook when it names one, else the toolbelt's
//!   guidance.
//! - `tools/call` is a toolbelt call; a refusal is a tool error whose text starts with its code.
//! - The token file is re-read on every request, so rotation is seamless.
//! - A tool's first call opens a tool session that its later calls share; the sessions close
//!   `completed` before a declaration (which ends authority) and when the client disconnects.
//!
//! stdout is the protocol channel: nothing else may write to it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use conduit_core::names::DECLARING_OPERATIONS;
use conduit_core::toolbelt_env::OS_PLAYBOOK_DIR;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::connection::Connection;
use crate::report::Failure;
use crate::{runtime, toolbelt};

/// The bridge between one MCP client and one execution's toolbelt.
#[derive(Clone)]
pub struct Bridge {
    toolbelt: Connection,
    instructions: String,
    /// The open tool session of each tool called so far.
    sessions: Arc<Mutex<HashMap<String, String>>>,
}

impl Bridge {
    /// The binding's playbook (`$OS_PLAYBOOK_DIR/skills/<name>/SKILL.md`) when it names one and
    /// it can be read, else the toolbelt's guidance.
    async fn instructions(&self, playbooks: Option<PathBuf>) -> Result<String, Failure> {
        let guidance = self.toolbelt.send_async(&toolbelt::guidance()).await?;
        let playbook = guidance["playbook"]
            .as_str()
            .zip(playbooks)
            .and_then(|(name, dir)| std::fs::read_to_string(dir.join("skills").join(name).join("SKILL.md")).ok());
        Ok(playbook.unwrap_or_else(|| guidance["guidance"].as_str().unwrap_or_default().to_owned()))
    }

    async fn tools(&self) -> Result<Vec<Tool>, Failure> {
        let catalog = self.toolbelt.send_async(&toolbelt::tools()).await?;
        Ok(catalog.as_array().into_iter().flatten().map(tool).collect())
    }

    /// One toolbelt call, in the tool's session unless it is a declaration.
    async fn call(&self, operation: &str, input: Value) -> Result<Value, Failure> {
        if DECLARING_OPERATIONS.contains(&operation) {
            self.close_sessions().await;
            return self.post_call(operation, &input, None).await;
        }
        let session = self.session(operation).await;
        match self.post_call(operation, &input, session.as_deref()).await {
            // The host closed the session (or forgot it): the call did not run; retry in a new one.
            Err(Failure::Refused { code, .. }) if session.is_some() && is_stale_session(&code) => {
                self.forget_session(operation);
                let session = self.session(operation).await;
                self.post_call(operation, &input, session.as_deref()).await
            }
            answer => answer,
        }
    }

    async fn post_call(&self, operation: &str, input: &Value, session: Option<&str>) -> Result<Value, Failure> {
        let call = toolbelt::call_in(operation, input.clone(), None, session.map(str::to_owned));
        self.toolbelt.send_async(&call).await
    }

    /// The tool's open session, opening one on its first call; `None` when the host will not open
    /// one (the call then answers for itself).
    async fn session(&self, operation: &str) -> Option<String> {
        if let Some(id) = self.lock().get(operation) {
            return Some(id.clone());
        }
        let opened = self
            .toolbelt
            .send_async(&toolbelt::open_session(operation))
            .await
            .ok()?;
        let id = opened["session_id"].as_str()?.to_owned();
        self.lock().insert(operation.to_owned(), id.clone());
        Some(id)
    }

    fn forget_session(&self, operation: &str) {
        self.lock().remove(operation);
    }

    /// Closes every session this bridge opened with `completed` (a session the host already closed
    /// refuses, which changes nothing).
    async fn close_sessions(&self) {
        let open: Vec<String> = self.lock().drain().map(|(_, id)| id).collect();
        for id in open {
            let _ = self.toolbelt.send_async(&toolbelt::close_session(&id, false)).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("open-conduit-toolbelt", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .tools()
            .await
            .map_err(|f| ErrorData::internal_error(failure_text(&f), None))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let input = Value::Object(request.arguments.unwrap_or_default());
        let result = match self.call(&request.name, input).await {
            Ok(answer) => match toolbelt::parked_message(&answer) {
                // Not an error: the agent should stop and will be resumed.
                Some(message) => CallToolResult::success(vec![
                    ContentBlock::text(message),
                    ContentBlock::text(answer["output"].to_string()),
                ]),
                None => succeeded(answer["output"].clone()),
            },
            Err(failure) => CallToolResult::error(vec![ContentBlock::text(failure_text(&failure))]),
        };
        Ok(result.into())
    }
}

/// `os mcp`: serves on a runtime of its own until the client disconnects, with the playbooks in
/// `$OS_PLAYBOOK_DIR`.
pub fn run(toolbelt: Connection) -> Result<(), Failure> {
    let playbooks = std::env::var_os(OS_PLAYBOOK_DIR).map(PathBuf::from);
    runtime::build(tokio::runtime::Builder::new_multi_thread().worker_threads(2))?.block_on(serve(toolbelt, playbooks))
}

/// Serves MCP on stdin/stdout until the client disconnects, then closes the sessions it opened.
pub async fn serve(toolbelt: Connection, playbooks: Option<PathBuf>) -> Result<(), Failure> {
    let mut bridge = Bridge {
        toolbelt,
        instructions: String::new(),
        sessions: Arc::default(),
    };
    bridge.instructions = bridge.instructions(playbooks).await?;
    let service = bridge
        .clone()
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| Failure::Transport(format!("the MCP client did not initialize: {e}")))?;
    let _ = service.waiting().await;
    bridge.close_sessions().await;
    Ok(())
}

/// The fixed table from a descriptor to MCP's hints: `readOnlyHint` for `pure`/`read`,
/// `destructiveHint` for `write`/`exec` (and any tier this release does not know), `idempotentHint` for a `deterministic`/`idempotent`
/// replay policy, `openWorldHint` unless egress is `none`.
pub fn annotations(descriptor: &Value) -> ToolAnnotations {
    let tier = descriptor["safetyTier"].as_str().unwrap_or("exec");
    let replay = descriptor["replayPolicy"].as_str().unwrap_or("non-deterministic");
    let egress = descriptor["egress"].as_str().unwrap_or("host-owned");
    let read_only = matches!(tier, "pure" | "read");
    ToolAnnotations::from_raw(
        None,
        Some(read_only),
        Some(!read_only),
        Some(matches!(replay, "deterministic" | "idempotent")),
        Some(egress != "none"),
    )
}

fn is_stale_session(code: &str) -> bool {
    code == "session_not_open" || code == "not_found"
}

/// A call's output as MCP content: its JSON as text, and as structured content when it is an object.
fn succeeded(output: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(output.to_string())]);
    if output.is_object() {
        result.structured_content = Some(output);
    }
    result
}

/// A refusal as the agent reads it: `<code>: <message>`, then the remedy when there is one.
fn failure_text(failure: &Failure) -> String {
    match failure {
        Failure::Refused {
            code, message, remedy, ..
        } => match remedy {
            Some(remedy) => format!("{code}: {message} ({remedy})"),
            None => format!("{code}: {message}"),
        },
        Failure::Local(message) | Failure::Transport(message) => format!("unavailable: {message}"),
    }
}

/// An MCP tool from a catalog descriptor: name = toolId, its description and schemas, and the
/// annotations of [`annotations`].
fn tool(descriptor: &Value) -> Tool {
    let name = descriptor["toolId"].as_str().unwrap_or_default().to_owned();
    let description = descriptor["description"].as_str().unwrap_or_default().to_owned();
    let mut tool = Tool::new(name, description, Arc::new(object(&descriptor["inputSchema"])));
    if let Some(title) = descriptor["title"].as_str() {
        tool = tool.with_title(title);
    }
    // MCP requires an object output schema; any other shape is left out.
    if descriptor["outputSchema"]["type"] == "object" {
        tool = tool.with_raw_output_schema(Arc::new(object(&descriptor["outputSchema"])));
    }
    tool.with_annotations(annotations(descriptor))
}

fn object(schema: &Value) -> JsonObject {
    match schema {
        Value::Object(map) => map.clone(),
        _ => JsonObject::from_iter([("type".to_owned(), json!("object"))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_follow_the_fixed_table() {
        let hints = |tier: &str, replay: &str, egress: &str| {
            let a = annotations(&json!({"safetyTier": tier, "replayPolicy": replay, "egress": egress}));
            (
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                a.open_world_hint,
            )
        };
        let (yes, no) = (Some(true), Some(false));
        assert_eq!(hints("read", "idempotent", "none"), (yes, no, yes, no));
        assert_eq!(hints("pure", "deterministic", "none"), (yes, no, yes, no));
        assert_eq!(hints("write", "non-deterministic", "safe-fetch"), (no, yes, no, yes));
        assert_eq!(hints("exec", "idempotent", "host-owned"), (no, yes, yes, yes));
        assert_eq!(
            hints("?", "?", "?"),
            (no, yes, no, yes),
            "an unknown descriptor is treated as the most dangerous"
        );
    }

    #[test]
    fn refusals_read_code_first() {
        let refused = Failure::Refused {
            code: "forbidden".into(),
            message: "no".into(),
            remedy: Some("ask".into()),
            envelope: Value::Null,
        };
        assert_eq!(failure_text(&refused), "forbidden: no (ask)");
    }
}
