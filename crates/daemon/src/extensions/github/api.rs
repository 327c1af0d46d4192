//! GitHub's REST API (v3) through the egress guard: one request, or a list followed page by page,
//! with GitHub's answers turned into stable refusal codes. A rate limit or an outage GitHub asks
//! to be left alone for (`Retry-After`, `x-ratelimit-reset`) is respected: until then calls are
//! refused at once, without a request.

use std::time::{SystemTime, UNIX_EPOCH};

use conduit_egress::{FetchRequest, FetchResponse, SafeFetch};
use conduit_toolbelt::registry::OperationError;
use serde_json::Value;

use crate::extensions::backoff::Backoff;

/// The most items a list operation gathers (at 100 a page, 10 requests).
pub const MAX_LIST: usize = 1000;

const ACCEPT_JSON: &str = "application/vnd.github+json";
pub const ACCEPT_DIFF: &str = "application/vnd.github.diff";
const API_VERSION: &str = "2022-11-28";

/// The client every GitHub operation shares, and when GitHub last asked to be left alone until.
#[derive(Clone)]
pub struct Api {
    fetch: SafeFetch,
    backoff: Backoff,
}

/// Where and as whom: the configured API URL and the token from its secret.
pub struct Account {
    pub base: String,
    pub token: String,
}

/// One request: `path` is relative to the API URL (`/repos/o/r/pulls/1`).
pub struct Request {
    pub method: &'static str,
    pub path: String,
    pub body: Option<Value>,
    pub accept: &'static str,
}

impl Request {
    pub fn get(path: String) -> Request {
        Request {
            method: "GET",
            path,
            body: None,
            accept: ACCEPT_JSON,
        }
    }

    pub fn send(method: &'static str, path: String, body: Value) -> Request {
        Request {
            method,
            path,
            body: Some(body),
            accept: ACCEPT_JSON,
        }
    }
}

impl Api {
    pub fn new(fetch: SafeFetch) -> Api {
        Api {
            fetch,
            backoff: Backoff::default(),
        }
    }

    /// The answer's body as JSON.
    pub async fn json(&self, account: &Account, request: Request) -> Result<Value, OperationError> {
        let response = self.text(account, request).await?;
        serde_json::from_str(&response).map_err(|_| unexpected())
    }

    /// The answer's body as text.
    pub async fn text(&self, account: &Account, request: Request) -> Result<String, OperationError> {
        let url = format!("{}{}", account.base.trim_end_matches('/'), request.path);
        let response = self.send(account, &request, url).await?;
        String::from_utf8(response.body).map_err(|_| unexpected())
    }

    /// Up to `limit` items of a list, following `Link: rel="next"` on the API's own origin only
    /// (the token goes nowhere else).
    pub async fn list(&self, account: &Account, path: String, limit: usize) -> Result<Vec<Value>, OperationError> {
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut url = Some(format!(
            "{}{path}{separator}per_page=100",
            account.base.trim_end_matches('/')
        ));
        let mut items = Vec::new();
        while let Some(next) = url.take() {
            let response = self.send(account, &Request::get(String::new()), next).await?;
            let page: Vec<Value> = serde_json::from_slice(&response.body).map_err(|_| unexpected())?;
            items.extend(page);
            if items.len() >= limit {
                items.truncate(limit);
                break;
            }
            url = next_page(&response, &account.base);
        }
        Ok(items)
    }

    async fn send(&self, account: &Account, request: &Request, url: String) -> Result<FetchResponse, OperationError> {
        self.backoff.check("GitHub")?;
        let fetch = FetchRequest {
            url,
            method: Some(request.method.into()),
            headers: vec![
                ("Accept".into(), request.accept.into()),
                ("X-GitHub-Api-Version".into(), API_VERSION.into()),
                ("User-Agent".into(), "open-conduit".into()),
                ("Content-Type".into(), "application/json".into()),
            ],
            body: request.body.as_ref().map(|b| b.to_string().into_bytes()),
            authorization: Some(format!("Bearer {}", account.token)),
        };
        let response = self
            .fetch
            .fetch(fetch)
            .await
            .map_err(|e| OperationError::new(e.code(), e.message()))?;
        if (200..300).contains(&response.status) {
            return Ok(response);
        }
        let refusal = refusal_for(response.status, &response.headers, &response.body, unix_now());
        self.backoff.note(&refusal);
        Err(refusal)
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn unexpected() -> OperationError {
    OperationError::new("github_unexpected", "GitHub's answer was not what its API documents")
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The `rel="next"` URL of a page, when it lies under the API URL.
fn next_page(response: &FetchResponse, base: &str) -> Option<String> {
    let link = header(&response.headers, "link")?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        let url = url.trim().strip_prefix('<')?.strip_suffix('>')?;
        let next = params.split(';').any(|p| p.trim() == "rel=\"next\"");
        let under = url
            .strip_prefix(base.trim_end_matches('/'))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?']));
        (next && under).then(|| url.to_owned())
    })
}

/// What a GitHub error answer means for the caller: a stable code, a message of the host's own
/// (never GitHub's text), and, for a rate limit or an outage, how long to wait.
pub fn refusal_for(status: u16, headers: &[(String, String)], body: &[u8], now_unix: u64) -> OperationError {
    let retry_after = header(headers, "retry-after").and_then(|v| v.trim().parse::<u64>().ok());
    // A secondary rate limit says so only in its message.
    let secondary = String::from_utf8_lossy(body)
        .to_ascii_lowercase()
        .contains("secondary rate limit");
    let exhausted = secondary || header(headers, "x-ratelimit-remaining").is_some_and(|v| v.trim() == "0");
    let reset = header(headers, "x-ratelimit-reset")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|at| at.saturating_sub(now_unix).max(1));
    let (code, message) = match status {
        403 | 429 if exhausted || retry_after.is_some() || status == 429 => {
            let wait = retry_after.or(reset).unwrap_or(60);
            return OperationError {
                retry_after: Some(wait),
                ..OperationError::new(
                    "github_rate_limited",
                    "GitHub's rate limit is reached; try again after `retry_after` seconds",
                )
            };
        }
        401 => (
            "github_unauthorized",
            "GitHub refused the token; check the secret `extensions.github.token` names",
        ),
        403 => ("github_forbidden", "the token may not do this on GitHub"),
        404 => (
            "github_not_found",
            "GitHub has no such repository, issue or pull request, or the token cannot see it",
        ),
        409 | 422 => ("github_invalid", "GitHub refused the request as invalid"),
        500..=599 => {
            return OperationError {
                retry_after: retry_after.or(Some(30)),
                ..OperationError::new("github_unavailable", "GitHub is unavailable; try again later")
            }
        }
        _ => ("github_unexpected", "GitHub's answer was not what its API documents"),
    };
    OperationError::new(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| ((*n).into(), (*v).into())).collect()
    }

    #[test]
    fn githubs_answers_become_stable_codes_with_how_long_to_wait() {
        let now = 1_000;
        for (status, pairs, code, wait) in [
            (
                403,
                &[("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "1090")][..],
                "github_rate_limited",
                Some(90),
            ),
            (429, &[("Retry-After", "7")][..], "github_rate_limited", Some(7)),
            (403, &[("Retry-After", "5")][..], "github_rate_limited", Some(5)),
            (403, &[("X-RateLimit-Remaining", "12")][..], "github_forbidden", None),
            (401, &[][..], "github_unauthorized", None),
            (404, &[][..], "github_not_found", None),
            (422, &[][..], "github_invalid", None),
            (503, &[("Retry-After", "11")][..], "github_unavailable", Some(11)),
            (502, &[][..], "github_unavailable", Some(30)),
            (302, &[][..], "github_unexpected", None),
        ] {
            let refusal = refusal_for(status, &headers(pairs), b"{}", now);
            assert_eq!(
                (refusal.code.as_str(), refusal.retry_after),
                (code, wait),
                "{status} {pairs:?}"
            );
        }
    }

    #[test]
    fn a_secondary_rate_limit_is_known_by_its_message() {
        let body = br#"{"message": "You have exceeded a secondary rate limit."}"#;
        let refusal = refusal_for(403, &[], body, 0);
        assert_eq!(
            (refusal.code.as_str(), refusal.retry_after),
            ("github_rate_limited", Some(60))
        );
    }

    #[test]
    fn the_next_page_is_followed_only_under_the_api_url() {
        let page = |link: &str| FetchResponse {
            status: 200,
            headers: headers(&[("link", link)]),
            body: Vec::new(),
            url: String::new(),
        };
        let base = "http://127.0.0.1:9";
        let ours = r#"<http://127.0.0.1:9/x?page=2>; rel="next", <http://127.0.0.1:9/x?page=5>; rel="last""#;
        assert_eq!(
            next_page(&page(ours), base).as_deref(),
            Some("http://127.0.0.1:9/x?page=2")
        );
        let elsewhere = r#"<http://127.0.0.1:10/x?page=2>; rel="next""#;
        assert_eq!(next_page(&page(elsewhere), base), None, "the token goes nowhere else");
        let longer_port = r#"<http://127.0.0.1:90/x?page=2>; rel="next""#;
        assert_eq!(next_page(&page(longer_port), base), None);
        assert_eq!(
            next_page(&page(r#"<http://127.0.0.1:9/x?page=1>; rel="prev""#), base),
            None
        );
    }
}
