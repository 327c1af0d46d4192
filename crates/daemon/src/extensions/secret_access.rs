//! How the release's extensions reach the secrets the configuration names: the current
//! configuration (which maps names to references) and the daemon's resolver.

use conduit_config::CurrentConfig;
use conduit_toolbelt::registry::OperationError;

use crate::secrets::Resolver;

/// Where an extension finds secrets. Offline configuration checks have none: they never call an
/// operation.
#[derive(Clone)]
pub struct SecretAccess {
    pub resolver: Resolver,
    pub config: CurrentConfig,
}

impl SecretAccess {
    /// The value of the secret named `name` in the current configuration.
    pub async fn named(&self, name: &str) -> Result<String, OperationError> {
        let unknown = || OperationError::new("secret_unavailable", "the configuration names no such secret");
        let reference = self.config.get().secret_reference(name).ok_or_else(unknown)?.to_owned();
        self.resolve(&reference).await
    }

    /// Resolves `reference` off the runtime (a `cmd:` may take seconds). The error names the
    /// reference's failure code, never its text.
    pub async fn resolve(&self, reference: &str) -> Result<String, OperationError> {
        let resolver = self.resolver.clone();
        let reference = reference.to_owned();
        crate::secrets::off_runtime(move || resolver.resolve(&reference))
            .await
            .ok_or_else(|| OperationError::new("secret_unavailable", "the secret could not be resolved"))?
            .map(|s| s.expose().to_owned())
            .map_err(|e| {
                OperationError::new(
                    "secret_unavailable",
                    format!("the secret could not be resolved ({})", e.code()),
                )
            })
    }
}
