//! What each `github.*` operation asks of GitHub's REST API, and the part of GitHub's answer it
//! hands back (the fields an agent needs, not GitHub's whole objects).

use conduit_config::GithubConfig;
use conduit_core::Duration;
use conduit_toolbelt::registry::{HandlerOutput, OperationError, WaitRequest};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::api::{Account, Api, Request, ACCEPT_DIFF, MAX_LIST};
use super::webhook::{issue_key, CHECK_SUITE_COMPLETED, REVIEWS_CHANGED};

/// One call's view of the extension: the client, the account, the settings.
pub struct Call<'a> {
    pub api: &'a Api,
    pub account: &'a Account,
    pub settings: &'a GithubConfig,
    /// What `github.git.credential` hands git: `git_token`'s value, else the API token.
    pub git_token: &'a str,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Numbered {
    repo: String,
    number: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Comment {
    repo: String,
    number: u64,
    body: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IssueList {
    repo: String,
    state: Option<String>,
    #[serde(default)]
    labels: Vec<String>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrCreate {
    repo: String,
    title: String,
    head: String,
    base: String,
    body: Option<String>,
    draft: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrEdit {
    repo: String,
    number: u64,
    title: Option<String>,
    body: Option<String>,
    state: Option<String>,
    base: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Review {
    repo: String,
    number: u64,
    event: String,
    body: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Awaited {
    repo: String,
    number: u64,
    timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Credential {
    protocol: Option<String>,
    host: String,
    path: Option<String>,
}

impl Call<'_> {
    pub async fn run(&self, operation: &str, input: Value) -> Result<HandlerOutput, OperationError> {
        let output = match operation {
            "github.issue.view" => self.issue_view(parse(input)?).await?,
            "github.issue.comment" | "github.pr.comment" => self.comment(parse(input)?).await?,
            "github.issue.list" => self.issue_list(parse(input)?).await?,
            "github.pr.view" => self.pr_view(parse(input)?).await?,
            "github.pr.create" => self.pr_create(parse(input)?).await?,
            "github.pr.edit" => self.pr_edit(parse(input)?).await?,
            "github.pr.review" => self.pr_review(parse(input)?).await?,
            "github.pr.diff" => self.pr_diff(parse(input)?).await?,
            "github.pr.reviews" => self.pr_reviews(parse(input)?).await?,
            "github.pr.wait_review" => return wait_review(parse(input)?),
            "github.checks.wait" => return self.checks_wait(parse(input)?).await,
            "github.git.credential" => return Ok(self.credential(parse(input)?).await),
            _ => {
                return Err(OperationError::new(
                    "operation_failed",
                    "the GitHub extension has no such operation",
                ))
            }
        };
        Ok(HandlerOutput::output(output))
    }

    async fn get(&self, path: String) -> Result<Value, OperationError> {
        self.api.json(self.account, Request::get(path)).await
    }

    async fn send(&self, method: &'static str, path: String, body: Value) -> Result<Value, OperationError> {
        self.api.json(self.account, Request::send(method, path, body)).await
    }

    async fn issue_view(&self, input: Numbered) -> Result<Value, OperationError> {
        let issue = self
            .get(format!("/repos/{}/issues/{}", repo(&input.repo)?, input.number))
            .await?;
        Ok(issue_fields(&issue))
    }

    async fn comment(&self, input: Comment) -> Result<Value, OperationError> {
        let path = format!("/repos/{}/issues/{}/comments", repo(&input.repo)?, input.number);
        let comment = self.send("POST", path, json!({"body": input.body})).await?;
        Ok(json!({"id": comment["id"], "url": comment["html_url"]}))
    }

    async fn issue_list(&self, input: IssueList) -> Result<Value, OperationError> {
        let state = input.state.as_deref().unwrap_or("open");
        if !["open", "closed", "all"].contains(&state) {
            return Err(OperationError::new("invalid_input", "`state` is open, closed or all"));
        }
        let mut path = format!("/repos/{}/issues?state={state}", repo(&input.repo)?);
        if !input.labels.is_empty() {
            let labels: String = url::form_urlencoded::byte_serialize(input.labels.join(",").as_bytes()).collect();
            path.push_str(&format!("&labels={labels}"));
        }
        let limit = input.limit.unwrap_or(30).min(MAX_LIST);
        let issues = self.api.list(self.account, path, limit).await?;
        Ok(json!({"items": issues.iter().map(issue_fields).collect::<Vec<_>>()}))
    }

    async fn pr_view(&self, input: Numbered) -> Result<Value, OperationError> {
        let pr = self
            .get(format!("/repos/{}/pulls/{}", repo(&input.repo)?, input.number))
            .await?;
        Ok(pr_fields(&pr))
    }

    async fn pr_create(&self, input: PrCreate) -> Result<Value, OperationError> {
        let body = json!({"title": input.title, "head": input.head, "base": input.base,
                          "body": input.body, "draft": input.draft.unwrap_or(false)});
        let pr = self
            .send("POST", format!("/repos/{}/pulls", repo(&input.repo)?), body)
            .await?;
        Ok(pr_fields(&pr))
    }

    async fn pr_edit(&self, input: PrEdit) -> Result<Value, OperationError> {
        let mut body = serde_json::Map::new();
        for (name, value) in [
            ("title", input.title),
            ("body", input.body),
            ("state", input.state),
            ("base", input.base),
        ] {
            if let Some(value) = value {
                body.insert(name.into(), value.into());
            }
        }
        let path = format!("/repos/{}/pulls/{}", repo(&input.repo)?, input.number);
        Ok(pr_fields(&self.send("PATCH", path, body.into()).await?))
    }

    async fn pr_review(&self, input: Review) -> Result<Value, OperationError> {
        let path = format!("/repos/{}/pulls/{}/reviews", repo(&input.repo)?, input.number);
        let review = self
            .send("POST", path, json!({"event": input.event, "body": input.body}))
            .await?;
        Ok(json!({"id": review["id"], "state": review["state"], "url": review["html_url"]}))
    }

    /// The reviews submitted so far, oldest first.
    async fn pr_reviews(&self, input: Numbered) -> Result<Value, OperationError> {
        let path = format!("/repos/{}/pulls/{}/reviews", repo(&input.repo)?, input.number);
        let reviews = self.api.list(self.account, path, MAX_LIST).await?;
        let fields = |r: &Value| {
            json!({"id": r["id"], "author": r["user"]["login"], "author_association": r["author_association"],
                   "state": r["state"], "commit_id": r["commit_id"], "submitted_at": r["submitted_at"]})
        };
        Ok(json!({"items": reviews.iter().map(fields).collect::<Vec<_>>()}))
    }

    async fn pr_diff(&self, input: Numbered) -> Result<Value, OperationError> {
        let request = Request {
            accept: ACCEPT_DIFF,
            ..Request::get(format!("/repos/{}/pulls/{}", repo(&input.repo)?, input.number))
        };
        Ok(json!({"diff": self.api.text(self.account, request).await?}))
    }

    /// The pull request's check suites now: when there are some and every one has completed, the
    /// answer; otherwise a wait for the next suite to complete (call again when resumed).
    async fn checks_wait(&self, input: Awaited) -> Result<HandlerOutput, OperationError> {
        let name = repo(&input.repo)?;
        let pr = self.get(format!("/repos/{name}/pulls/{}", input.number)).await?;
        let sha = pr["head"]["sha"]
            .as_str()
            .filter(|s| s.chars().all(|c| c.is_ascii_hexdigit()));
        let sha = sha.ok_or_else(|| OperationError::new("github_unexpected", "the pull request has no head commit"))?;
        let suites = self
            .get(format!("/repos/{name}/commits/{sha}/check-suites?per_page=100"))
            .await?;
        let suites: Vec<Value> = suites["check_suites"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| json!({"app": s["app"]["slug"], "status": s["status"], "conclusion": s["conclusion"]}))
            .collect();
        let done = !suites.is_empty() && suites.iter().all(|s| s["status"] == "completed");
        let output = json!({"head_sha": sha, "completed": done, "suites": suites});
        if done {
            return Ok(HandlerOutput::output(output));
        }
        let wait = awaiting(CHECK_SUITE_COMPLETED, &input)?;
        Ok(HandlerOutput {
            wait: Some(wait),
            ..HandlerOutput::output(output)
        })
    }

    /// A credential for the configured git host only; for any other host, nothing (git then asks
    /// its next helper, or the user).
    async fn credential(&self, input: Credential) -> HandlerOutput {
        let _ = input.path;
        let host = self.settings.git_host();
        // Plain http would send the token in the clear: only to a host on this machine.
        let web = match input.protocol.as_deref() {
            None | Some("https") => true,
            Some("http") => is_loopback_host(&host),
            Some(_) => false,
        };
        if !web || !input.host.eq_ignore_ascii_case(&host) {
            return HandlerOutput::output(json!({}));
        }
        HandlerOutput {
            secret: true,
            ..HandlerOutput::output(json!({"username": "x-access-token", "password": self.git_token}))
        }
    }
}

/// Whether `host` (`host` or `host:port`) names this machine.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Waits for the next review submitted, edited or dismissed on the pull request.
fn wait_review(input: Awaited) -> Result<HandlerOutput, OperationError> {
    let wait = awaiting(REVIEWS_CHANGED, &input)?;
    let output = json!({"awaiting": "a review", "key": wait.keys[0]});
    Ok(HandlerOutput {
        wait: Some(wait),
        ..HandlerOutput::output(output)
    })
}

fn awaiting(event_type: &str, input: &Awaited) -> Result<WaitRequest, OperationError> {
    let timeout = match &input.timeout {
        Some(text) => Some(Duration::parse(text).filter(|d| d.0 > 0).ok_or_else(|| {
            OperationError::new(
                "invalid_input",
                "`timeout` is a positive duration such as `30m` or `2h`",
            )
        })?),
        None => None,
    };
    Ok(WaitRequest {
        types: vec![event_type.into()],
        keys: vec![issue_key(repo(&input.repo)?, input.number)],
        timeout,
    })
}

/// `owner/name`, each part GitHub's characters and neither `.` nor `..` (so no path escapes).
fn repo(text: &str) -> Result<&str, OperationError> {
    let part = |p: &str| {
        !p.is_empty() && p != "." && p != ".." && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match text.split_once('/') {
        Some((owner, name)) if part(owner) && part(name) => Ok(text),
        _ => Err(OperationError::new("invalid_input", "`repo` is `owner/name`")),
    }
}

fn parse<T: DeserializeOwned>(input: Value) -> Result<T, OperationError> {
    serde_json::from_value(input)
        .map_err(|_| OperationError::new("invalid_input", "the input does not match the operation's schema"))
}

fn issue_fields(issue: &Value) -> Value {
    json!({
        "number": issue["number"], "title": issue["title"], "state": issue["state"], "body": issue["body"],
        "author": issue["user"]["login"], "url": issue["html_url"], "comments": issue["comments"],
        "labels": issue["labels"].as_array().into_iter().flatten().map(|l| l["name"].clone()).collect::<Vec<_>>(),
        "is_pull_request": issue.get("pull_request").is_some(),
    })
}

fn pr_fields(pr: &Value) -> Value {
    json!({
        "number": pr["number"], "title": pr["title"], "state": pr["state"], "body": pr["body"],
        "draft": pr["draft"], "merged": pr["merged"], "author": pr["user"]["login"], "url": pr["html_url"],
        "head": {"ref": pr["head"]["ref"], "sha": pr["head"]["sha"]}, "base": {"ref": pr["base"]["ref"]},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_host_on_this_machine_is_loopback() {
        for (host, loopback) in [
            ("127.0.0.1:8080", true),
            ("localhost", true),
            ("[::1]:9", true),
            ("github.com", false),
            ("127.0.0.1.example.com", false),
            ("10.0.0.1:80", false),
        ] {
            assert_eq!(is_loopback_host(host), loopback, "{host}");
        }
    }

    #[test]
    fn a_repo_is_owner_slash_name_and_never_climbs_out_of_the_path() {
        for good in ["acme/app", "a-b/c.d_e"] {
            assert!(repo(good).is_ok(), "{good}");
        }
        for bad in [
            "acme",
            "acme/app/x",
            "../x",
            "acme/..",
            "a/.",
            "a b/c",
            "a/c?x=1",
            "/x",
            "a/",
        ] {
            assert!(repo(bad).is_err(), "{bad}");
        }
    }
}
