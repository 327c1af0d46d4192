//! OpenWOP's records of a tool call on the Work's event log: `agent.toolCalled` when a call reaches
//! its operation, `agent.toolReturned` when it answers. Every caller (the toolbelt, a package's
//! `http.safeFetch` callback, the conformance seams) builds the payloads here.

use serde_json::{json, Value};

pub const TOOL_CALLED: &str = "agent.toolCalled";
pub const TOOL_RETURNED: &str = "agent.toolReturned";

/// How a call reached its tool, as RFC 0064's `transport` names it: `http` for a fetch through the
/// egress guard (RFC 0076 §B), `mcp` for a mounted MCP server's tool, `native` for what the host
/// runs itself (builtins, first-party extensions, installed packages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Mcp,
    Native,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Mcp => "mcp",
            Transport::Native => "native",
        }
    }
}

/// What `agent.toolCalled` says of a call.
pub struct ToolCalled<'a> {
    /// The execution making the call.
    pub agent_id: &'a str,
    pub tool_name: &'a str,
    pub call_id: &'a str,
    /// SHA-256 of the input's RFC 8785 form: the record carries this, never the input.
    pub args_hash: &'a str,
    /// Who the host acts for: `execution:<id>`, `package:<name>` or an operator.
    pub principal: &'a str,
    pub transport: Transport,
    pub session_id: Option<&'a str>,
}

impl ToolCalled<'_> {
    pub fn data(&self) -> Value {
        let mut data = json!({
            "agentId": self.agent_id,
            "toolName": self.tool_name,
            "callId": self.call_id,
            "argsHash": self.args_hash,
            "principal": self.principal,
            "transport": self.transport.as_str(),
        });
        if let Some(session) = self.session_id {
            data["sessionId"] = json!(session);
        }
        data
    }
}

/// What `agent.toolReturned` says of the call it answers.
pub struct ToolReturned<'a> {
    pub agent_id: &'a str,
    pub tool_name: &'a str,
    /// The `callId` of the `agent.toolCalled` it answers.
    pub call_id: &'a Value,
    /// `ok`, or the failure class.
    pub status: &'a str,
    pub duration_ms: i64,
}

impl ToolReturned<'_> {
    pub fn data(&self) -> Value {
        json!({
            "agentId": self.agent_id,
            "toolName": self.tool_name,
            "callId": self.call_id,
            "status": self.status,
            "durationMs": self.duration_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_names_its_session_only_when_it_has_one() {
        let mut called = ToolCalled {
            agent_id: "x1",
            tool_name: "emit",
            call_id: "c1",
            args_hash: "h",
            principal: "execution:x1",
            transport: Transport::Native,
            session_id: None,
        };
        assert!(called.data().get("sessionId").is_none());
        called.session_id = Some("s1");
        assert_eq!(called.data()["sessionId"], "s1");
    }
}
