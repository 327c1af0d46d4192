//! Keyset pages of a list, each sealed in a cursor bound to its endpoint and filters, and the list
//! filters the routes share.

use axum::http::Uri;
use conduit_core::{ErrorCode, Refusal};
use conduit_store::{Page, Tx};
use serde::{Deserialize, Serialize};

use super::access::read;
use super::state::Management;
use crate::clock::now;
use crate::cursor::{Paging, Position, CURSOR_LIFETIME};
use crate::envelope::{Answer, Failure};

/// A page of a list as the wire has it, serialized straight from its items (no JSON tree between).
#[derive(Serialize)]
struct PageOf<T> {
    items: Vec<T>,
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ByWork {
    work: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

impl ByWork {
    /// The list this query asks for at `uri`, and the Work it is filtered to.
    pub(super) fn list(self, uri: &Uri) -> (List, Option<String>) {
        let filters = format!("work={}", self.work.as_deref().unwrap_or(""));
        (List::at(uri, filters, self.cursor, self.limit), self.work)
    }
}

/// A list request: its endpoint, its filters (canonically written), its paging, and where its
/// first page starts (after this key; from the list's start when `None`).
pub(super) struct List {
    pub(super) endpoint: String,
    pub(super) filters: String,
    pub(super) paging: Paging,
    pub(super) start: Option<serde_json::Value>,
}

impl List {
    /// The list at `uri`, with its filters written canonically and the request's paging.
    pub(super) fn at(uri: &Uri, filters: String, cursor: Option<String>, limit: Option<usize>) -> List {
        List {
            endpoint: uri.path().to_owned(),
            filters,
            paging: Paging { cursor, limit },
            start: None,
        }
    }

    /// The list with its first page starting after `key`.
    pub(super) fn after(self, key: Option<serde_json::Value>) -> List {
        List { start: key, ..self }
    }
}

/// A page of a list in time order: the first page's upper bound is now.
pub(super) async fn page_until_now<K, T>(
    s: &Management,
    list: List,
    fetch: impl FnOnce(&mut dyn Tx, &Page<K>) -> Result<Vec<T>, conduit_store::StoreError> + Send + 'static,
    key_of: impl Fn(&T) -> K + Send + 'static,
) -> Answer
where
    K: Serialize + serde::de::DeserializeOwned + Send + 'static,
    T: Serialize + Send + 'static,
{
    page(s, list, |_| Ok(now().0), fetch, key_of).await
}

/// One page of a list: rows past the cursor's position within the upper bound the first page
/// captured, and the cursor of the next page (`null` after the last).
pub(super) async fn page<K, T>(
    s: &Management,
    list: List,
    upper: impl FnOnce(&mut dyn Tx) -> Result<i64, Failure> + Send + 'static,
    fetch: impl FnOnce(&mut dyn Tx, &Page<K>) -> Result<Vec<T>, conduit_store::StoreError> + Send + 'static,
    key_of: impl Fn(&T) -> K + Send + 'static,
) -> Answer
where
    K: Serialize + serde::de::DeserializeOwned + Send + 'static,
    T: Serialize + Send + 'static,
{
    let limit = list.paging.limit()?;
    let opened = match &list.paging.cursor {
        Some(cursor) => Some(s.cursors.open(cursor, &list.endpoint, &list.filters, now())?),
        None => None,
    };
    let cursors = s.cursors.clone();
    read(s, move |tx| {
        let (upper, after) = match opened {
            Some(p) => (
                p.upper,
                Some(serde_json::from_value(p.after).map_err(|_| invalid_cursor())?),
            ),
            None => match list.start {
                Some(key) => (
                    upper(tx)?,
                    Some(serde_json::from_value(key).map_err(|_| invalid_cursor())?),
                ),
                None => (upper(tx)?, None),
            },
        };
        let items = fetch(tx, &Page { after, upper, limit })?;
        let next = (items.len() == limit)
            .then(|| items.last().map(&key_of))
            .flatten()
            .map(|key| {
                cursors.seal(&Position {
                    endpoint: list.endpoint,
                    filters: list.filters,
                    upper,
                    after: serde_json::to_value(key).unwrap_or_default(),
                    expires: now().plus(CURSOR_LIFETIME).0,
                })
            });
        Ok(PageOf {
            items,
            next_cursor: next,
        })
    })
    .await
}

/// A time filter's value: RFC 3339 text, or `invalid_request` naming the parameter.
pub(super) fn time(name: &str, text: &str) -> Result<conduit_core::Timestamp, Failure> {
    conduit_core::Timestamp::parse_rfc3339(text).ok_or_else(|| {
        Failure(Refusal::new(
            ErrorCode::InvalidRequest,
            format!("{name} is an RFC 3339 time, such as 2026-12-01T16:00:00Z"),
        ))
    })
}

fn invalid_cursor() -> Failure {
    Failure(Refusal::new(
        ErrorCode::InvalidCursor,
        "the cursor is not valid for this list",
    ))
}
