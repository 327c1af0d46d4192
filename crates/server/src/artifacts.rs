//! Artifacts: what an execution leaves behind. Today that is its log (stdout and stderr), with the
//! id `log:<execution id>`. Content streams whole or as one byte range.

use std::path::PathBuf;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use conduit_core::{ErrorCode, Refusal, Role};
use serde::Deserialize;
use serde_json::json;

use crate::envelope::{Answer, Failure};
use crate::management::{operator, read, Management};

const LOG_PREFIX: &str = "log:";

/// Where execution logs are.
#[derive(Clone, Debug)]
pub struct Logs(pub PathBuf);

impl Logs {
    fn path(&self, execution: &str) -> PathBuf {
        self.0.join(format!("{execution}.log"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByExecution {
    execution: Option<String>,
}

/// The artifacts of an execution (or of every execution): id, kind, size.
pub async fn list(State(s): State<Management>, headers: HeaderMap, Query(q): Query<ByExecution>) -> Answer {
    let logs = s.logs.clone();
    read(&s, &headers, move |tx| {
        let executions = match &q.execution {
            Some(id) => tx.get_execution(id)?.into_iter().collect(),
            None => tx.list_executions(None)?,
        };
        let items: Vec<_> = executions
            .iter()
            .filter_map(|x| {
                let size = std::fs::metadata(logs.path(&x.id)).ok()?.len();
                Some(json!({"id": format!("{LOG_PREFIX}{}", x.id), "kind": "log", "execution_id": x.id, "size": size}))
            })
            .collect();
        Ok::<_, Failure>(json!({ "items": items }))
    })
    .await
}

/// An artifact's content: whole (`200`), one byte range (`206`), or `416` when the range cannot be
/// satisfied.
pub async fn content(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    operator(&s, &headers, Role::View).await?;
    let execution = id
        .strip_prefix(LOG_PREFIX)
        .ok_or_else(|| Failure(Refusal::not_found("artifact")))?;
    let bytes = tokio::fs::read(s.logs.path(execution))
        .await
        .map_err(|_| Failure(Refusal::not_found("artifact")))?;
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    Ok(ranged(bytes, range))
}

fn ranged(bytes: Vec<u8>, range: Option<&str>) -> Response {
    let size = bytes.len() as u64;
    let Some(spec) = range else {
        return (StatusCode::OK, [(header::ACCEPT_RANGES, "bytes")], bytes).into_response();
    };
    match parse_range(spec, size) {
        Some((start, end)) => {
            let slice = bytes[start as usize..=end as usize].to_vec();
            let mut response = (StatusCode::PARTIAL_CONTENT, Body::from(slice)).into_response();
            let value = format!("bytes {start}-{end}/{size}");
            response.headers_mut().insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("bytes")),
            );
            response
        }
        None => {
            let envelope = Refusal::new(ErrorCode::RangeNotSatisfiable, "the range is outside the artifact");
            let mut response = Failure(envelope).into_response();
            let value = format!("bytes */{size}");
            if let Ok(v) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            response
        }
    }
}

/// One range of `bytes=a-b`, `bytes=a-` or `bytes=-n`, as inclusive offsets within `size`.
fn parse_range(spec: &str, size: u64) -> Option<(u64, u64)> {
    let (first, last) = spec.strip_prefix("bytes=")?.trim().split_once('-')?;
    let (start, end) = match (first.parse::<u64>().ok(), last.parse::<u64>().ok()) {
        (Some(a), Some(b)) => (a, b.min(size.checked_sub(1)?)),
        (Some(a), None) if last.is_empty() => (a, size.checked_sub(1)?),
        (None, Some(n)) if first.is_empty() && n > 0 => (size.saturating_sub(n), size.checked_sub(1)?),
        _ => return None,
    };
    (start <= end && start < size).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_in_each_form() {
        assert_eq!(parse_range("bytes=0-3", 10), Some((0, 3)));
        assert_eq!(parse_range("bytes=7-", 10), Some((7, 9)));
        assert_eq!(parse_range("bytes=-4", 10), Some((6, 9)));
        assert_eq!(parse_range("bytes=5-50", 10), Some((5, 9)));
        assert_eq!(parse_range("bytes=10-", 10), None, "past the end");
        assert_eq!(parse_range("bytes=4-2", 10), None);
        assert_eq!(parse_range("bytes=0-1,3-4", 10), None, "one range only");
        assert_eq!(parse_range("items=0-1", 10), None);
        assert_eq!(parse_range("bytes=0-0", 0), None, "an empty artifact has no range");
    }
}
