//! The rules of the first-party extensions' settings (`"extensions": {"github": {...},
//! "slack": {...}}`). Credentials are named, never written here: `token`, `webhook_secret` and
//! `signing_secret` name entries of `secrets`, which the daemon resolves when it needs them.

use crate::diagnostic::Diagnostic;
use crate::model::{Config, GithubConfig};

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
            .git_token
            .as_ref()
            .is_some_and(|n| !config.secrets.contains_key(n))
        {
            found.push(unknown_secret("/extensions/github/git_token"));
        }
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

fn unknown_secret(pointer: &str) -> Diagnostic {
    Diagnostic::error(
        pointer,
        "unknown_reference",
        "no secret has this name",
        "name an entry of `secrets`",
    )
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
            found.push(unknown_secret(&format!("{at}/{field}")));
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
            git_token: None,
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
