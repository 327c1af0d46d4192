//! Artifacts: what an execution leaves behind. Its log (stdout and stderr) is `log:<execution id>`;
//! each file its declared outcome named is `file:<execution id>:<index>`, kept by the daemon when the
//! segment ended (or refused, with the reason); an agent attempt's transcript is the file at
//! `TRANSCRIPT_INDEX`, listed with kind `transcript`. Content streams whole or as one byte range.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::IntoResponse;
use conduit_core::artifact::{parse_file_id, TRANSCRIPT_INDEX};
use conduit_core::{ArtifactRecord, ErrorCode, Refusal};
use conduit_store::{ArtifactEntry, ArtifactKey};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_util::io::ReaderStream;

use super::access::viewed;
use super::paging::{page_until_now, List};
use super::state::Management;
use crate::envelope::{Answer, Failure};
use crate::ports::ArtifactFiles;

const LOG_PREFIX: &str = "log:";

/// The artifacts of an execution (or of every execution), a page at a time: each execution's log,
/// then its declared files.
pub async fn list(State(s): State<Management>, uri: Uri, Query(q): Query<ArtifactQuery>) -> Answer {
    let files = s.files.clone();
    let filters = format!("execution={}", q.execution.as_deref().unwrap_or(""));
    let list = List::at(&uri, filters, q.cursor, q.limit);
    page_until_now(
        &s,
        list,
        move |tx, page| {
            let entries = tx.page_artifacts(q.execution.as_deref(), page)?;
            Ok(entries.into_iter().map(|entry| listed(&files, entry)).collect())
        },
        |item: &Listed| item.key.clone(),
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ArtifactQuery {
    execution: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// An artifact as listed, with the key the next page starts after.
#[derive(Serialize)]
pub(super) struct Listed {
    #[serde(skip)]
    key: ArtifactKey,
    #[serde(flatten)]
    item: Value,
}

fn listed(files: &ArtifactFiles, entry: ArtifactEntry) -> Listed {
    let key = entry.key();
    let item = match &entry.declared {
        Some(a) => declared_item(a),
        None => log_item(files, &entry.execution_id),
    };
    Listed { key, item }
}

/// An execution's log (stdout and stderr); empty until its process writes.
fn log_item(files: &ArtifactFiles, execution: &str) -> Value {
    let size = std::fs::metadata(files.log(execution)).map_or(0, |m| m.len());
    json!({"id": format!("{LOG_PREFIX}{execution}"), "kind": "log", "execution_id": execution, "size": size})
}

fn declared_item(a: &ArtifactRecord) -> Value {
    let kind = if a.index == TRANSCRIPT_INDEX {
        "transcript"
    } else {
        "declared"
    };
    let mut item = json!({"id": a.id(), "kind": kind, "execution_id": a.execution_id, "name": a.name});
    match &a.kept {
        Ok((size, sha256)) => {
            item["size"] = json!(size);
            item["sha256"] = json!(sha256);
        }
        Err(refusal) => item["refused"] = json!(refusal.as_str()),
    }
    item
}

/// An artifact's content: whole (`200`), one byte range (`206`), or `416` when the range cannot be
/// satisfied.
pub async fn content(State(s): State<Management>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let files = s.files.clone();
    let is_log = id.starts_with(LOG_PREFIX);
    // Paths come from the store's records, never from the request's text.
    let path = viewed(&s, move |tx| {
        let found = match (id.strip_prefix(LOG_PREFIX), parse_file_id(&id)) {
            (Some(execution), _) => tx.get_execution(execution)?.map(|x| files.log(&x.id)),
            (None, Some((execution, index))) => tx
                .get_artifact(execution, index)?
                .filter(|a| a.kept.is_ok())
                .map(|a| files.declared(&a)),
            (None, None) => None,
        };
        found.ok_or_else(not_found)
    })
    .await?;
    let file = match tokio::fs::File::open(&path).await {
        Ok(file) => file,
        // A log is listed from its execution's start; until the process writes, it is empty.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && is_log => {
            return ok_empty();
        }
        Err(_) => return Err(not_found()),
    };
    let size = file.metadata().await.map_err(|_| not_found())?.len();
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    ranged(file, size, range).await
}

fn ok_empty() -> Answer {
    Ok((StatusCode::OK, [(header::CONTENT_LENGTH, "0")], Body::empty()).into_response())
}

fn not_found() -> Failure {
    Failure(Refusal::not_found("artifact"))
}

/// The content streamed from the file (never read whole into memory: a log can be large), all of
/// it or one range.
async fn ranged(mut file: tokio::fs::File, size: u64, range: Option<&str>) -> Answer {
    let Some(spec) = range else {
        let body = Body::from_stream(ReaderStream::new(file));
        let length = size.to_string();
        let headers = [
            (header::ACCEPT_RANGES, "bytes"),
            (header::CONTENT_LENGTH, length.as_str()),
        ];
        return Ok((StatusCode::OK, headers, body).into_response());
    };
    Ok(match parse_range(spec, size) {
        Some((start, end)) => {
            file.seek(std::io::SeekFrom::Start(start))
                .await
                .map_err(|_| not_found())?;
            let body = Body::from_stream(ReaderStream::new(file.take(end - start + 1)));
            let length = (end - start + 1).to_string();
            let mut response = (
                StatusCode::PARTIAL_CONTENT,
                [(header::CONTENT_LENGTH, length.as_str())],
                body,
            )
                .into_response();
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
    })
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
