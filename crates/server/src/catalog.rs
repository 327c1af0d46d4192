//! The tool catalog on the management socket: every registered operation's descriptor, narrowed by
//! `?scope=` (what that scope's ceiling allows) and `?source=`.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use conduit_core::tool::{ToolDescriptor, ToolSource};
use conduit_core::{ErrorCode, Refusal, Role};
use conduit_toolbelt::catalog;
use serde::Deserialize;

use crate::envelope::{ok, Answer, Failure};
use crate::management::{operator, Management};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    scope: Option<String>,
    source: Option<String>,
}

/// `GET /v1/tools`: a bare array sorted by `toolId`.
pub async fn list(State(s): State<Management>, headers: HeaderMap, Query(q): Query<ToolsQuery>) -> Answer {
    operator(&s, &headers, Role::View).await?;
    let tools = visible(&s, &q)?;
    ok(StatusCode::OK, &tools)
}

/// `GET /v1/tools/{toolId}`: one registered operation's descriptor.
pub async fn get(State(s): State<Management>, headers: HeaderMap, Path(tool_id): Path<String>) -> Answer {
    operator(&s, &headers, Role::View).await?;
    let tool = catalog(&s.registry)
        .into_iter()
        .find(|t| t.tool_id == tool_id)
        .ok_or_else(|| Failure(Refusal::not_found("tool")))?;
    ok(StatusCode::OK, &tool)
}

fn visible(s: &Management, q: &ToolsQuery) -> Result<Vec<ToolDescriptor>, Failure> {
    let config = s.config.get();
    if let Some(scope) = &q.scope {
        if config.scope(scope).is_none() {
            return Err(Failure(
                Refusal::new(ErrorCode::UnknownScope, "the active configuration has no such scope")
                    .with_remedy("list scopes with `open-conduit scopes`"),
            ));
        }
    }
    let source = q.source.as_deref().map(parse_source).transpose()?;
    Ok(catalog(&s.registry)
        .into_iter()
        .filter(|t| source.is_none_or(|source| t.source == source))
        .filter(|t| {
            q.scope
                .as_deref()
                .is_none_or(|scope| config.authorize_operation(scope, &t.tool_id))
        })
        .collect())
}

fn parse_source(text: &str) -> Result<ToolSource, Failure> {
    serde_json::from_value(serde_json::Value::from(text)).map_err(|_| {
        Failure(
            Refusal::new(ErrorCode::InvalidRequest, "unknown tool source")
                .with_remedy("use host-extension, node-pack or mcp"),
        )
    })
}
