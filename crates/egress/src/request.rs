//! What a fetch asks for, checked before any network activity: the URL (WHATWG parsing; http or
//! https; no userinfo; a name refused by its spelling), the method, and the headers (no protocol
//! switch, nothing that would steer the connection or carry a credential the host did not build).
//! Pure: no resolution, no sockets.

use url::{Host, Url};

use crate::address::{self, Blocked};
use crate::FetchError;

/// Methods a fetch may use. `CONNECT` and `TRACE` are not among them.
pub const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Headers the host sets or refuses to forward: the connection is the host's to shape, and an
/// `Authorization` header is built by the host from a granted secret, never passed through.
const HOST_OWNED_HEADERS: [&str; 10] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "content-length",
    "authorization",
];

/// Where a hop goes: the parsed URL and the host as it will be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: Url,
    pub host: TargetHost,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetHost {
    /// A name to resolve (lowercase, without a trailing dot).
    Name(String),
    /// An address literal.
    Ip(std::net::IpAddr),
}

/// Parses and checks a URL; a name is checked by its spelling here, every address (a literal or a
/// resolved one) when the hop is vetted.
pub fn target(text: &str) -> Result<Target, FetchError> {
    let url = Url::parse(text).map_err(|_| FetchError::invalid("`url` is not an absolute http or https URL"))?;
    target_of(url)
}

/// Checks an already parsed URL (a redirect's `Location`, resolved against the hop it came from).
pub fn target_of(url: Url) -> Result<Target, FetchError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::invalid("only http and https URLs are fetched"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(FetchError::invalid("a URL with credentials in it is not fetched"));
    }
    let port = url
        .port_or_known_default()
        .ok_or_else(|| FetchError::invalid("the URL has no port"))?;
    let host = match url.host() {
        Some(Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            address::check_name(&name).map_err(FetchError::Blocked)?;
            TargetHost::Name(name)
        }
        Some(Host::Ipv4(ip)) => TargetHost::Ip(ip.into()),
        Some(Host::Ipv6(ip)) => TargetHost::Ip(ip.into()),
        None => return Err(FetchError::invalid("the URL has no host")),
    };
    Ok(Target { url, host, port })
}

/// The method, upper-cased, if it is allowed.
pub fn method(method: Option<&str>) -> Result<String, FetchError> {
    let method = method.unwrap_or("GET").to_ascii_uppercase();
    if METHODS.contains(&method.as_str()) {
        Ok(method)
    } else {
        Err(FetchError::invalid(
            "`method` is one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
        ))
    }
}

/// Checks the caller's headers: a protocol switch is `ssrf_blocked` (`upgrade`); a header the host
/// owns is refused as input.
pub fn headers(headers: &[(String, String)]) -> Result<(), FetchError> {
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let upgrade = name == "upgrade"
            || (name == "connection" && value.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade")));
        if upgrade {
            return Err(FetchError::Blocked(Blocked::Upgrade));
        }
        if HOST_OWNED_HEADERS.contains(&name.as_str()) {
            return Err(FetchError::invalid(
                "the request sets a header the host owns (Host, Connection, Authorization, ...); name a granted `secret` for Authorization",
            ));
        }
    }
    Ok(())
}
