//! The fetch path: resolve, vet every address, connect to the vetted one (pinned) and check the
//! peer, speak HTTP/1.1 (TLS for https), follow redirects by hand re-checking every hop, and cap
//! the body and the time. No proxy is consulted: the environment's proxy variables are ignored.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, HOST, LOCATION};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::Url;

use crate::address::{self, Blocked};
use crate::request::{self, Target, TargetHost};
use crate::FetchError;

/// Resolves a host name to its addresses; tests inject their own.
pub trait Resolve: Send + Sync {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;
}

/// The system resolver.
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((name, port)).await?.map(|a| a.ip()).collect()) })
    }
}

/// The host's clamps on every fetch.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_response_bytes: usize,
    pub max_request_bytes: usize,
    pub timeout: Duration,
    pub max_redirects: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_response_bytes: 10 * 1024 * 1024,
            max_request_bytes: 1024 * 1024,
            timeout: Duration::from_secs(30),
            max_redirects: 5,
        }
    }
}

/// One fetch as the caller asks for it.
#[derive(Debug, Clone, Default)]
pub struct FetchRequest {
    pub url: String,
    pub method: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// An `Authorization` value the host built from a granted secret; sent to the first origin only.
    pub authorization: Option<String>,
}

#[derive(Debug, Clone)]
pub struct FetchResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The URL that answered, after redirects.
    pub url: String,
}

/// The SSRF-guarded HTTP client that `http.fetch` and packages' `http.safeFetch` share.
#[derive(Clone)]
pub struct SafeFetch {
    resolver: Arc<dyn Resolve>,
    limits: Limits,
    tls: tokio_rustls::TlsConnector,
    allowance: crate::allowance::Allowance,
}

/// A request as it goes out on one hop.
struct Hop<'a> {
    target: &'a Target,
    method: &'a Method,
    headers: &'a [(String, String)],
    body: Option<&'a [u8]>,
    authorization: Option<&'a str>,
}

impl SafeFetch {
    pub fn new(limits: Limits) -> SafeFetch {
        SafeFetch {
            resolver: Arc::new(SystemResolver),
            limits,
            tls: tokio_rustls::TlsConnector::from(tls_config()),
            allowance: crate::allowance::Allowance::from_env(),
        }
    }

    /// The same client with another resolver (tests: names that resolve where the test says).
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolve>) -> SafeFetch {
        self.resolver = resolver;
        self
    }

    /// The same client with a test allowance (which permits nothing without the `test-allowance`
    /// feature).
    pub fn with_allowance(mut self, allowance: crate::allowance::Allowance) -> SafeFetch {
        self.allowance = allowance;
        self
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Fetches `request` within the timeout; every hop is vetted before anything connects.
    pub async fn fetch(&self, request: FetchRequest) -> Result<FetchResponse, FetchError> {
        tokio::time::timeout(self.limits.timeout, self.follow(request))
            .await
            .map_err(|_| FetchError::Failed("the fetch timed out"))?
    }

    async fn follow(&self, request: FetchRequest) -> Result<FetchResponse, FetchError> {
        request::headers(&request.headers)?;
        let mut method = Method::from_bytes(request::method(request.method.as_deref())?.as_bytes())
            .map_err(|_| FetchError::invalid("`method` is not a method"))?;
        if request
            .body
            .as_ref()
            .is_some_and(|b| b.len() > self.limits.max_request_bytes)
        {
            return Err(FetchError::invalid("the request body is over the limit"));
        }
        let mut body = request.body;
        let mut target = request::target(&request.url)?;
        let origin = target.url.origin();
        for _ in 0..=self.limits.max_redirects {
            let authorization = request
                .authorization
                .as_deref()
                .filter(|_| target.url.origin() == origin);
            let hop = Hop {
                target: &target,
                method: &method,
                headers: &request.headers,
                body: body.as_deref(),
                authorization,
            };
            let response = self.hop(hop).await?;
            let Some(next) = redirect(&target.url, &response) else {
                return Ok(response);
            };
            if response.status == 303 || (matches!(response.status, 301 | 302) && method == Method::POST) {
                method = Method::GET;
                body = None;
            }
            target = request::target_of(next)?;
        }
        Err(FetchError::Failed("too many redirects"))
    }

    /// One request to one vetted, pinned address.
    async fn hop(&self, hop: Hop<'_>) -> Result<FetchResponse, FetchError> {
        let addr = self.vet(hop.target).await?;
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|_| FetchError::Failed("could not connect"))?;
        if stream.peer_addr().ok() != Some(addr) {
            return Err(FetchError::Failed("the connected peer is not the vetted address"));
        }
        if hop.target.url.scheme() == "https" {
            let name = server_name(&hop.target.host)?;
            let tls = self
                .tls
                .connect(name, stream)
                .await
                .map_err(|_| FetchError::Failed("the TLS handshake failed"))?;
            self.exchange(tls, hop).await
        } else {
            self.exchange(stream, hop).await
        }
    }

    /// The address to connect to: a literal as given, or every resolved address vetted (one
    /// refused address refuses the whole name) and the first taken.
    async fn vet(&self, target: &Target) -> Result<SocketAddr, FetchError> {
        let addresses = match &target.host {
            TargetHost::Ip(ip) => vec![*ip],
            TargetHost::Name(name) => self
                .resolver
                .resolve(name, target.port)
                .await
                .map_err(|_| FetchError::Failed("the host name did not resolve"))?,
        };
        let first = *addresses
            .first()
            .ok_or(FetchError::Failed("the host name did not resolve"))?;
        for ip in &addresses {
            let addr = SocketAddr::new(*ip, target.port);
            if !self.allowance.permits(addr) {
                address::check(*ip).map_err(FetchError::Blocked)?;
            }
        }
        Ok(SocketAddr::new(first, target.port))
    }

    async fn exchange<S>(&self, io: S, hop: Hop<'_>) -> Result<FetchResponse, FetchError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let failed = |_| FetchError::Failed("the HTTP exchange failed");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(failed)?;
        tokio::spawn(connection);
        let response = sender.send_request(outgoing(&hop)?).await.map_err(failed)?;
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            return Err(FetchError::Blocked(Blocked::Upgrade));
        }
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let body = Limited::new(response.into_body(), self.limits.max_response_bytes)
            .collect()
            .await
            .map_err(|_| FetchError::Failed("the response body is over the limit or broke off"))?
            .to_bytes()
            .to_vec();
        Ok(FetchResponse {
            status,
            headers,
            body,
            url: hop.target.url.to_string(),
        })
    }
}

/// The TLS client configuration (ring, the webpki roots), built once per process.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            #[allow(clippy::expect_used, reason = "a constant: ring offers the default TLS versions")]
            let config =
                rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                    .with_safe_default_protocol_versions()
                    .expect("ring supports the default TLS versions")
                    .with_root_certificates(roots)
                    .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

/// The request on the wire: origin-form path, `Host` from the URL, the caller's checked headers,
/// and the host-built `Authorization`.
fn outgoing(hop: &Hop<'_>) -> Result<Request<Full<Bytes>>, FetchError> {
    let url = &hop.target.url;
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let mut request = Request::builder().method(hop.method.clone()).uri(path);
    let headers = request
        .headers_mut()
        .ok_or(FetchError::invalid("the request is not valid HTTP"))?;
    headers.insert(HOST, HeaderValue::from_str(&host).map_err(not_http)?);
    for (name, value) in hop.headers {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).map_err(not_http)?,
            HeaderValue::from_str(value).map_err(not_http)?,
        );
    }
    if let Some(authorization) = hop.authorization {
        let mut value = HeaderValue::from_str(authorization).map_err(not_http)?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    let body = Full::new(Bytes::from(hop.body.map(<[u8]>::to_vec).unwrap_or_default()));
    request
        .body(body)
        .map_err(|_| FetchError::invalid("the request is not valid HTTP"))
}

fn not_http<E>(_: E) -> FetchError {
    FetchError::invalid("a header name or value is not valid HTTP")
}

/// Where a redirect points, resolved against the URL that answered it.
fn redirect(base: &Url, response: &FetchResponse) -> Option<Url> {
    if !matches!(response.status, 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = response
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(LOCATION.as_str()))?;
    base.join(&location.1).ok()
}

fn server_name(host: &TargetHost) -> Result<rustls::pki_types::ServerName<'static>, FetchError> {
    let name = match host {
        TargetHost::Name(name) => rustls::pki_types::ServerName::try_from(name.clone()).ok(),
        TargetHost::Ip(ip) => Some(rustls::pki_types::ServerName::IpAddress((*ip).into())),
    };
    name.ok_or(FetchError::invalid("the host is not a valid TLS server name"))
}
