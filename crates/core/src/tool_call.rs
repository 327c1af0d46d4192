//! OpenWOP's records of a tool call on the Work's event log: `agent.toolCalled` when a call reaches
//! its operation, `agent.toolReturned` when it answers. Every caller (the toolbelt, a package's
//! `http.safeFetch` callback, the conformance seams) builds the payloads here.

use serde::{Serialize, Serializer};
use serde_json::Value;

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

impl Serialize for Transport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What `agent.toolCalled` says of a call. Its fields are in the order of their JSON names, so its
/// text is the one a `serde_json::Value` of it prints (sorted keys).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCalled<'a> {
    /// The execution making the call.
    pub agent_id: &'a str,
    /// SHA-256 of the input's RFC 8785 form: the record carries this, never the input.
    pub args_hash: &'a str,
    pub call_id: &'a str,
    /// Who the host acts for: `execution:<id>`, `package:<name>` or an operator.
    pub principal: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<&'a str>,
    pub tool_name: &'a str,
    pub transport: Transport,
}

/// What `agent.toolReturned` says of the call it answers; its fields in the order of their names.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReturned<'a> {
    pub agent_id: &'a str,
    /// The `callId` of the `agent.toolCalled` it answers.
    pub call_id: &'a str,
    pub duration_ms: i64,
    /// `ok`, or the failure class.
    pub status: &'a str,
    pub tool_name: &'a str,
}

/// A call record's data, as a JSON value or as its text. Its fields are references, strings and
/// integers, which always serialize.
pub trait CallRecord: Serialize {
    fn data(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Written in one pass, with no value tree: what the toolbelt stores for each call.
    fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl CallRecord for ToolCalled<'_> {}
impl CallRecord for ToolReturned<'_> {}

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

    /// The text the toolbelt stores is the one the value prints, keys sorted as before the records
    /// were written in one pass.
    #[test]
    fn a_records_text_is_its_values_text() {
        let called = ToolCalled {
            agent_id: "x1",
            tool_name: "emit",
            call_id: "c\"1",
            args_hash: "h",
            principal: "execution:x1",
            transport: Transport::Http,
            session_id: Some("s1"),
        };
        assert_eq!(called.text(), called.data().to_string());
        assert_eq!(
            called.text(),
            r#"{"agentId":"x1","argsHash":"h","callId":"c\"1","principal":"execution:x1","sessionId":"s1","toolName":"emit","transport":"http"}"#
        );
        let returned = ToolReturned {
            agent_id: "x1",
            tool_name: "emit",
            call_id: "c1",
            status: "ok",
            duration_ms: 3,
        };
        assert_eq!(returned.text(), returned.data().to_string());
        assert_eq!(
            returned.text(),
            r#"{"agentId":"x1","callId":"c1","durationMs":3,"status":"ok","toolName":"emit"}"#
        );
    }
}
