//! The first-party extensions' settings (`"extensions": {"github": {...}, "slack": {...}}`) and
//! their rules. Credentials are named, never written here: `token`, `webhook_secret` and
//! `signing_secret` name entries of `secrets`, which the daemon resolves when it needs them.

use serde::{Deserialize, Serialize};

use crate::diagnostic::Diagnostic;
use crate::model::Config;

pub const GITHUB_API: &str = "https://api.github.com";
pub const SLACK_API: &str = "https://slack.com/api";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtensionsConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackConfig>,
}

/// GitHub (REST v3): where its API is (GitHub Enterprise has its own), the secret holding the token
/// its operations use, and its webhook ingress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GithubConfig {
    #[serde(default = "github_api")]
    pub api_url: String,
    /// The secret holding the API token.
    pub token: String,
    /// The secret webhook deliveries are signed with; without one the ingress refuses every delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
    /// The scope webhook events are accepted in (needed with `webhook_secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The git host (`host` or `host:port`) `github.git.credential` answers for; by default the
    /// API's host, `github.com` for `api.github.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_host: Option<String>,
}

/// Slack (Web API): where its API is, the secret holding the bot token, and its Events ingress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    #[serde(default = "slack_api")]
    pub api_url: String,
    /// The secret holding the bot token.
    pub token: String,
    /// The secret Slack signs its Events requests with; without one the ingress refuses them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// The scope Slack events are accepted in (needed with `signing_secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

fn github_api() -> String {
    GITHUB_API.into()
}

fn slack_api() -> String {
    SLACK_API.into()
}

impl GithubConfig {
    /// The git host credentials are answered for: `git_host`, else the API's `host[:port]`, with
    /// `api.github.com` meaning `github.com`.
    pub fn git_host(&self) -> String {
        if let Some(host) = &self.git_host {
            return host.to_ascii_lowercase();
        }
        let authority = authority(&self.api_url).unwrap_or_default().to_ascii_lowercase();
        match authority.as_str() {
            "api.github.com" => "github.com".into(),
            _ => authority,
        }
    }
}

/// The `host[:port]` of an `http(s)://` URL.
fn authority(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    (!authority.is_empty() && !authority.contains(['@', ' '])).then_some(authority)
}

/// The extensions' diagnostics: an `http(s)` API URL, secrets that exist, a scope that exists
/// wherever an ingress is configured.
pub(crate) fn check(config: &Config, found: &mut Vec<Diagnostic>) {
    let Some(extensions) = &config.extensions else {
        return;
    };
    if let Some(github) = &extensions.github {
        let ingress = Ingress {
            secret: github.webhook_secret.as_deref(),
            secret_field: "webhook_secret",
            scope: github.scope.as_deref(),
        };
        check_one(
            config,
            "/extensions/github",
            &github.api_url,
            &github.token,
            ingress,
            found,
        );
        if github
            .git_host
            .as_deref()
            .is_some_and(|h| authority(&format!("https://{h}")) != Some(h))
        {
            found.push(Diagnostic::error(
                "/extensions/github/git_host",
                "invalid_value",
                "a git host is `host` or `host:port`",
                "write the host git clones from, such as github.com",
            ));
        }
    }
    if let Some(slack) = &extensions.slack {
        let ingress = Ingress {
            secret: slack.signing_secret.as_deref(),
            secret_field: "signing_secret",
            scope: slack.scope.as_deref(),
        };
        check_one(
            config,
            "/extensions/slack",
            &slack.api_url,
            &slack.token,
            ingress,
            found,
        );
    }
}

struct Ingress<'a> {
    secret: Option<&'a str>,
    secret_field: &'static str,
    scope: Option<&'a str>,
}

fn check_one(config: &Config, at: &str, api_url: &str, token: &str, ingress: Ingress<'_>, found: &mut Vec<Diagnostic>) {
    if authority(api_url).is_none() {
        found.push(Diagnostic::error(
            format!("{at}/api_url"),
            "invalid_value",
            "the API URL is an http:// or https:// URL with a host",
            "write the API's base URL",
        ));
    }
    let secrets = [("token", Some(token)), (ingress.secret_field, ingress.secret)];
    for (field, name) in secrets {
        if name.is_some_and(|n| !config.secrets.contains_key(n)) {
            found.push(Diagnostic::error(
                format!("{at}/{field}"),
                "unknown_reference",
                "no secret has this name",
                "name an entry of `secrets`",
            ));
        }
    }
    match ingress.scope {
        Some(scope) if !config.scopes.contains_key(scope) => found.push(Diagnostic::error(
            format!("{at}/scope"),
            "unknown_reference",
            "no scope has this id",
            "name a scope of this configuration",
        )),
        None if ingress.secret.is_some() => found.push(Diagnostic::error(
            format!("{at}/scope"),
            "invalid_value",
            "an ingress needs the scope its events are accepted in",
            "add `scope`",
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn github(api_url: &str, git_host: Option<&str>) -> GithubConfig {
        GithubConfig {
            api_url: api_url.into(),
            token: "gh".into(),
            webhook_secret: None,
            scope: None,
            git_host: git_host.map(str::to_owned),
        }
    }

    #[test]
    fn the_git_host_is_the_apis_with_api_github_com_meaning_github_com() {
        for (api, host, expected) in [
            ("https://api.github.com", None, "github.com"),
            ("https://ghe.example.com/api/v3", None, "ghe.example.com"),
            ("http://127.0.0.1:8080", None, "127.0.0.1:8080"),
            ("https://api.github.com", Some("Git.Example"), "git.example"),
        ] {
            assert_eq!(github(api, host).git_host(), expected, "{api}");
        }
    }

    #[test]
    fn an_authority_needs_a_scheme_and_a_host_and_no_userinfo() {
        for (url, expected) in [
            ("https://h/x", Some("h")),
            ("http://h:1", Some("h:1")),
            ("ftp://h", None),
            ("https:///x", None),
            ("https://u@h", None),
        ] {
            assert_eq!(authority(url), expected, "{url}");
        }
    }
}
