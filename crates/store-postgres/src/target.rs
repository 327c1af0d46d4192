//! Where a store's connections go and how: the URL, the password given beside it, and TLS.
//!
//! A Unix socket or a loopback address is dialled as the URL says (TLS only with `sslmode=require`).
//! Any other host is reached only over TLS, with the server's certificate verified against the
//! certificate authority given (or the public roots) and its name or address: a password or the
//! store's digests never cross a network in the clear, nor to a server that is not the one named.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use conduit_store::StoreError;
use postgres::config::{Host, SslMode};
use postgres::{Client, Config, NoTls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::{backend, Result};

/// What reaches the server beside the URL.
#[derive(Clone, Default)]
pub struct Access {
    /// The password, resolved from a secret reference by the caller; it overrides one in the URL.
    pub password: Option<String>,
    /// The PEM certificates of the authority the server's certificate must chain to; without it,
    /// the public roots.
    pub ca_pem: Option<Vec<u8>>,
}

/// Never the password.
impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .finish()
    }
}

/// A server to dial: its configuration, and the TLS it is dialled with, if any.
#[derive(Clone)]
pub(crate) struct Target {
    config: Config,
    tls: Option<MakeRustlsConnect>,
}

impl Target {
    /// The target `url` names with `access`, refused before any dial when it would be reached
    /// without TLS across a network.
    pub(crate) fn of(url: &str, access: &Access) -> Result<Target> {
        let mut config =
            Config::from_str(url).map_err(|_| StoreError::Backend("the PostgreSQL URL does not parse".into()))?;
        if let Some(password) = &access.password {
            config.password(password);
        }
        let tls = match (config.get_ssl_mode(), is_local(&config)) {
            // PostgreSQL offers no TLS on a Unix socket, and needs none there.
            _ if only_sockets(&config) => false,
            (SslMode::Require, _) => true,
            // A certificate authority given is one to verify the server with.
            (_, true) => access.ca_pem.is_some(),
            (SslMode::Disable, false) => {
                return Err(StoreError::Backend(
                    "the PostgreSQL URL names a host that is not this machine with sslmode=disable; such a \
                     host is reached only over TLS"
                        .into(),
                ))
            }
            (_, false) => true,
        };
        if tls {
            // `prefer` would fall back to plain text.
            config.ssl_mode(SslMode::Require);
        }
        let tls = tls.then(|| connector(access.ca_pem.as_deref())).transpose()?;
        Ok(Target { config, tls })
    }

    /// Whether connections go over TLS.
    #[cfg(test)]
    fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A new client: over TLS when the target says so.
    pub(crate) fn dial(&self) -> Result<Client> {
        match &self.tls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        }
        .map_err(backend)
    }
}

/// A TLS connector that verifies the server's certificate against `ca_pem`, or the public roots.
fn connector(ca_pem: Option<&[u8]>) -> Result<MakeRustlsConnect> {
    let roots = match ca_pem {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in CertificateDer::pem_slice_iter(pem) {
                let certificate = certificate.map_err(|_| refused_ca())?;
                roots.add(certificate).map_err(|_| refused_ca())?;
            }
            if roots.is_empty() {
                return Err(refused_ca());
            }
            roots
        }
        None => rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|_| StoreError::Backend("TLS could not be set up".into()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn refused_ca() -> StoreError {
    StoreError::Backend("the store's certificate authority file holds no PEM certificate".into())
}

/// Whether every host `config` may dial is a Unix socket.
fn only_sockets(config: &Config) -> bool {
    config.get_hostaddrs().is_empty() && config.get_hosts().iter().all(|h| matches!(h, Host::Unix(_)))
}

/// Whether every host and host address `config` may dial is a Unix socket or loopback.
fn is_local(config: &Config) -> bool {
    let host_is_local = |host: &Host| match host {
        Host::Unix(_) => true,
        // An address, not a name: a resolver could send even `localhost` elsewhere.
        Host::Tcp(name) => name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()),
    };
    config.get_hosts().iter().all(host_is_local) && config.get_hostaddrs().iter().all(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_socket_or_loopback_is_local() {
        for (url, local) in [
            ("postgresql:///db?host=/run/pg", true),
            ("postgres://u@localhost/db", false),
            ("postgres://u@127.0.0.1:5432/db", true),
            ("postgres://u@[::1]/db", true),
            ("host=/tmp user=u", true),
            ("postgres://u@db.example/db", false),
            ("postgres://u@10.0.0.5/db", false),
            ("postgres://u@localhost/db?hostaddr=10.0.0.5", false),
            ("postgres://u@localhost,db.example/db", false),
        ] {
            let config = Config::from_str(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(is_local(&config), local, "{url}");
        }
    }

    #[test]
    fn a_host_that_is_not_this_machine_is_reached_over_tls_or_not_at_all() {
        let none = Access::default();
        let tls = |url: &str| Target::of(url, &none).map(|t| t.uses_tls());
        assert_eq!(tls("postgresql:///db?host=/run/pg").ok(), Some(false));
        assert_eq!(
            tls("postgres://u@127.0.0.1/db").ok(),
            Some(false),
            "loopback as written"
        );
        assert_eq!(tls("postgres://u@127.0.0.1/db?sslmode=require").ok(), Some(true));
        assert_eq!(
            tls("postgres://u@db.example/db").ok(),
            Some(true),
            "prefer becomes require"
        );
        assert_eq!(tls("postgres://u@localhost/db?sslmode=prefer").ok(), Some(true));
        assert_eq!(
            tls("postgresql:///db?host=/run/pg&sslmode=require").ok(),
            Some(false),
            "no TLS on a socket"
        );
        // Refused before any dial: the test sends nothing to the network.
        assert!(tls("postgres://u@db.example/db?sslmode=disable").is_err());
        assert!(tls("postgres://u@localhost,127.0.0.1/db?sslmode=disable").is_err());
    }

    #[test]
    fn a_certificate_authority_file_must_hold_a_certificate() {
        let access = |pem: &[u8]| Access {
            ca_pem: Some(pem.to_vec()),
            ..Access::default()
        };
        let url = "postgres://u@db.example/db";
        assert!(Target::of(url, &access(b"")).is_err());
        assert!(Target::of(url, &access(b"not a certificate")).is_err());
    }

    #[test]
    fn the_password_is_never_printed() {
        let access = Access {
            password: Some("hunter2".into()),
            ca_pem: None,
        };
        assert!(!format!("{access:?}").contains("hunter2"));
    }
}
