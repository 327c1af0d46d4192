//! The `github` extension: GitHub's REST API as toolbelt operations (`github.*`), translated waits
//! on GitHub events, git credentials for the configured host, and the webhook ingress that turns
//! deliveries into events. Its settings are `extensions.github` (`api_url`, `token`,
//! `webhook_secret`, `scope`, `git_host`); its HTTP goes through the egress guard.

mod api;
mod operations;
mod specs;
pub mod webhook;

use std::sync::Arc;

use conduit_config::GithubConfig;
use conduit_egress::{Limits, SafeFetch};
use conduit_toolbelt::registry::{Handler, HandlerCall, HandlerFuture, HandlerOutput, OperationError, Registration};

use super::secret_access::SecretAccess;
use api::{Account, Api};

pub const NAME: &str = "github";

/// The extension's handler: the shared API client and where the token comes from.
#[derive(Clone)]
pub struct Github {
    api: Api,
    secrets: Option<SecretAccess>,
}

impl Github {
    pub fn new(secrets: Option<SecretAccess>) -> Github {
        Github {
            api: Api::new(SafeFetch::new(Limits::default())),
            secrets,
        }
    }

    async fn run(self, call: HandlerCall) -> Result<HandlerOutput, OperationError> {
        let (settings, secrets) = self.settings()?;
        let account = Account {
            base: settings.api_url.clone(),
            token: secrets.named(&settings.token).await?,
        };
        let git_token = match (&settings.git_token, call.operation.as_str()) {
            (Some(name), "github.git.credential") => secrets.named(name).await?,
            _ => account.token.clone(),
        };
        let github = operations::Call {
            api: &self.api,
            account: &account,
            settings: &settings,
            git_token: &git_token,
        };
        github.run(&call.operation, call.input).await
    }

    /// The current generation's settings; without them the operations are refused.
    fn settings(&self) -> Result<(GithubConfig, SecretAccess), OperationError> {
        let unconfigured = || {
            OperationError::new(
                "extension_unconfigured",
                "GitHub is not configured; an operator sets `extensions.github` (api_url, token)",
            )
        };
        let secrets = self.secrets.clone().ok_or_else(unconfigured)?;
        let settings = secrets.config.get().github().cloned().ok_or_else(unconfigured)?;
        Ok((settings, secrets))
    }
}

impl Handler for Github {
    fn call(&self, call: HandlerCall) -> HandlerFuture {
        Box::pin(self.clone().run(call))
    }
}

/// The `github` registration: its operations and the `@github.author` and `@github.reviewer`
/// toolsets.
pub fn registration(handler: Arc<Github>) -> Registration {
    specs::registration(handler)
}
