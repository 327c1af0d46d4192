//! The tool catalog on the management socket: every registered operation's descriptor, narrowed by
//! `?scope=` (what that scope's ceiling allows) and `?source=`.

use axum::extract::{Path, Query, State};
use conduit_core::tool::SourceFilter;
use conduit_core::{Refusal, Role};
use serde::Deserialize;

use axum::http::HeaderMap;

use super::access::{operator, revision};
use super::state::Management;
use crate::envelope::{ok_json, Answer, Failure};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    scope: Option<String>,
    source: Option<String>,
}

/// `GET /v1/tools`: a bare array sorted by `toolId`.
pub async fn list(State(s): State<Management>, Query(q): Query<ToolsQuery>) -> Answer {
    operator(Role::View).await?;
    ok_json(visible(&s, &q)?)
}

/// `GET /v1/tools/{toolId}`: one registered operation's descriptor.
pub async fn get(State(s): State<Management>, headers: HeaderMap, Path(tool_id): Path<String>) -> Answer {
    operator(Role::View).await?;
    let registry = s.registry.get();
    let tool = registry.catalog().find(&tool_id).map(str::to_owned);
    Ok(revision(
        &headers,
        tool.ok_or_else(|| Failure(Refusal::not_found("tool")))?,
    ))
}

/// The catalog's JSON array, narrowed by the query.
fn visible(s: &Management, q: &ToolsQuery) -> Result<String, Failure> {
    let config = s.config.get();
    if let Some(scope) = &q.scope {
        if config.scope(scope).is_none() {
            return Err(Failure(Refusal::unknown_scope()));
        }
    }
    let source = q.source.as_deref().map(SourceFilter::from_query).transpose()?;
    let (grant, gating) = (config.package_grant(), config.package_gating());
    let registry = s.registry.get();
    let gated = |tool_id: &str| {
        q.scope.as_deref().is_some_and(|scope| {
            config
                .approval_rule(scope, tool_id, |t, o| registry.toolset_holds(t, o))
                .is_some()
        })
    };
    // With `?scope=`, what Work in that scope could call: allowed by its ceiling, and not a
    // package's whose requirement the grant set no longer covers.
    let callable_in = |scope: &str, tool_id: &str| {
        config.authorize_operation(scope, tool_id) && registry.requirement_met(tool_id, &grant, gating).is_ok()
    };
    let keep = |t: &conduit_core::tool::ToolDescriptor| {
        source.is_none_or(|source| source.admits(t.source))
            && q.scope.as_deref().is_none_or(|scope| callable_in(scope, &t.tool_id))
    };
    Ok(registry.catalog().select_gated(keep, gated))
}
