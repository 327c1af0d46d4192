//! The SSRF guard, table-driven through the real fetch path: every row is a URL handed to
//! `SafeFetch::fetch` with an injected resolver, against a local server the test allowance treats
//! as public. Blocked rows must never reach the server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use conduit_egress::allowance::Allowance;
use conduit_egress::{Blocked, FetchError, FetchRequest, Limits, Resolve, SafeFetch};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// Names resolve to what the table says; `rebind.test` answers the server first, then metadata.
struct Resolver {
    names: HashMap<&'static str, Vec<IpAddr>>,
    rebinds: AtomicUsize,
}

impl Resolve for Resolver {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        _: u16,
    ) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>> {
        let answer = match name {
            "rebind.test" if self.rebinds.fetch_add(1, Ordering::SeqCst) > 0 => Ok(vec![ip("169.254.169.254")]),
            _ => self
                .names
                .get(name)
                .cloned()
                .ok_or_else(|| io::ErrorKind::NotFound.into()),
        };
        Box::pin(async move { answer })
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A local server: `/ok`, redirects, a 101, a large body and a slow answer. Counts connections.
async fn server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            let service = service_fn(move |r: Request<Incoming>| answer(r, addr.port()));
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    (addr, connections)
}

async fn answer(request: Request<Incoming>, port: u16) -> Result<Response<Full<Bytes>>, Infallible> {
    let redirect = |to: String| Response::builder().status(302).header("location", to);
    let path = request.uri().path().to_owned();
    if let Some(n) = path.strip_prefix("/hops/").and_then(|n| n.parse::<u32>().ok()) {
        let to = if n == 0 {
            "/ok".to_owned()
        } else {
            format!("/hops/{}", n - 1)
        };
        return Ok(redirect(to).body(Full::new(Bytes::new())).unwrap());
    }
    let response = match path.as_str() {
        "/echo" => return Ok(Response::new(Full::new(Bytes::from(echo(request).await)))),
        "/see-other" => Response::builder().status(303).header("location", "/echo"),
        "/to-same" => redirect("/echo".into()),
        "/to-other" => redirect(format!("http://other.test:{port}/echo")),
        "/ok" => Response::builder().status(200),
        "/redirect-private" => redirect("http://10.0.0.1/".into()),
        "/redirect-metadata" => redirect("http://169.254.169.254/latest/meta-data/".into()),
        "/redirect-ok" => redirect("/ok".into()),
        "/redirect-rebind" => redirect(format!("http://rebind.test:{port}/ok")),
        "/upgrade" => Response::builder().status(101).header("upgrade", "websocket"),
        "/big" => return Ok(Response::new(Full::new(Bytes::from(vec![b'x'; 4096])))),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Response::builder().status(200)
        }
        _ => Response::builder().status(404),
    };
    Ok(response.body(Full::new(Bytes::from_static(b"hello"))).unwrap())
}

/// What the server saw of a request: its method, its body's length, whether it carried
/// `Authorization`.
async fn echo(request: Request<Incoming>) -> String {
    use http_body_util::BodyExt;
    let method = request.method().to_string();
    let auth = if request.headers().contains_key("authorization") {
        "yes"
    } else {
        "no"
    };
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().len())
        .unwrap_or(0);
    format!("{method} {body} auth={auth}")
}

fn client(server: SocketAddr, limits: Limits) -> SafeFetch {
    let public = vec![server.ip()];
    let names = HashMap::from([
        ("public.test", public.clone()),
        ("rebind.test", public.clone()),
        ("other.test", public.clone()),
        ("mixed.test", vec![server.ip(), ip("10.0.0.7")]),
        ("private.test", vec![ip("192.168.0.1")]),
        ("unique-local.test", vec![ip("fd00::1")]),
        ("mapped.test", vec![ip("::ffff:127.0.0.1")]),
    ]);
    let resolver = Resolver {
        names,
        rebinds: AtomicUsize::new(0),
    };
    SafeFetch::new(limits)
        .with_resolver(Arc::new(resolver))
        .with_allowance(Allowance::of([server]))
}

#[derive(Debug, PartialEq)]
enum Expect {
    Fetched(u16),
    Refused(Blocked),
    Invalid,
    Failed,
}

fn outcome(result: Result<conduit_egress::FetchResponse, FetchError>) -> Expect {
    match result {
        Ok(response) => Expect::Fetched(response.status),
        Err(FetchError::Blocked(class)) => Expect::Refused(class),
        Err(FetchError::Invalid(_)) => Expect::Invalid,
        Err(FetchError::Failed(_)) => Expect::Failed,
    }
}

#[tokio::test]
async fn every_address_class_and_spelling_is_judged_through_the_fetch_path() {
    use Blocked::*;
    use Expect::{Failed, Fetched, Invalid, Refused};
    let (server, connections) = server().await;
    let port = server.port();
    let fetch = client(server, Limits::default());
    let blocked: &[(&str, Blocked)] = &[
        // Loopback in every IPv4 spelling the WHATWG parser accepts, and IPv6.
        ("http://127.0.0.1/", Loopback),
        ("http://127.1/", Loopback),
        ("http://2130706433/", Loopback),
        ("http://0x7f000001/", Loopback),
        ("http://0177.0.0.1/", Loopback),
        ("http://0x7f.1/", Loopback),
        ("http://127.255.255.254:8080/", Loopback),
        ("http://[::1]/", Loopback),
        ("http://[0:0:0:0:0:0:0:1]/", Loopback),
        ("http://localhost/", Loopback),
        ("http://LOCALHOST./", Loopback),
        ("http://api.localhost/", Loopback),
        ("http://[::ffff:127.0.0.1]/", Loopback),
        ("http://[::ffff:7f00:1]/", Loopback),
        ("http://[::127.0.0.1]/", Loopback),
        ("http://mapped.test/", Loopback),
        // Unspecified.
        ("http://0.0.0.0/", Unspecified),
        ("http://0/", Unspecified),
        ("http://0.1.2.3/", Unspecified),
        ("http://[::]/", Unspecified),
        // RFC 1918, directly and embedded.
        ("http://10.0.0.1/", Private),
        ("http://10.255.255.255/", Private),
        ("http://172.16.0.1/", Private),
        ("http://172.31.255.255/", Private),
        ("http://192.168.1.1/", Private),
        ("http://3232235777/", Private),
        ("http://[::ffff:10.0.0.1]/", Private),
        ("http://[64:ff9b::10.0.0.1]/", Private),
        ("http://[2002:c0a8:101::1]/", Private),
        ("http://private.test/", Private),
        // Shared address space (CGNAT).
        ("http://100.64.0.1/", SharedAddressSpace),
        ("http://100.127.255.255/", SharedAddressSpace),
        // Link-local and metadata.
        ("http://169.254.1.1/", LinkLocal),
        ("http://[fe80::1]/", LinkLocal),
        ("http://169.254.169.254/latest/meta-data/", Metadata),
        ("http://[::ffff:169.254.169.254]/", Metadata),
        ("http://[::ffff:a9fe:a9fe]/", Metadata),
        ("http://metadata.google.internal/", Metadata),
        ("http://METADATA.GOOGLE.INTERNAL./computeMetadata/v1/", Metadata),
        ("http://metadata.goog/", Metadata),
        ("http://instance-data.ec2.internal/", Metadata),
        // IPv6 local ranges.
        ("http://[fc00::1]/", UniqueLocal),
        ("http://[fd12:3456:789a::1]/", UniqueLocal),
        ("http://unique-local.test/", UniqueLocal),
        ("http://[fec0::1]/", SiteLocal),
        // Multicast and broadcast.
        ("http://224.0.0.1/", Multicast),
        ("http://239.255.255.250/", Multicast),
        ("http://[ff02::1]/", Multicast),
        ("http://255.255.255.255/", Broadcast),
        // Reserved, documentation, benchmarking, protocol assignments, Teredo.
        ("http://240.0.0.1/", Reserved),
        ("http://[100::1]/", Reserved),
        ("http://[64:ff9b:1::1]/", Reserved),
        ("http://[3fff::1]/", Documentation),
        ("http://192.0.2.1/", Documentation),
        ("http://198.51.100.7/", Documentation),
        ("http://203.0.113.9/", Documentation),
        ("http://[2001:db8::1]/", Documentation),
        ("http://198.18.0.1/", Benchmarking),
        ("http://198.19.255.1/", Benchmarking),
        ("http://[2001:2::1]/", Benchmarking),
        ("http://192.0.0.1/", ProtocolAssignments),
        ("http://[2001:10::1]/", ProtocolAssignments),
        ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", Teredo),
        ("http://192.88.99.1/", RelayAnycast),
        ("http://[2002:c058:6301::1]/", RelayAnycast),
        ("http://168.63.129.16/", Metadata),
    ];
    for (url, class) in blocked {
        let got = outcome(fetch.fetch(get(url)).await);
        assert_eq!(got, Refused(*class), "{url}");
    }
    let invalid = [
        "http://[fe80::1%25eth0]/",
        "ftp://public.test/",
        "file:///etc/passwd",
        "gopher://public.test/",
        "http://user:secret@public.test/",
        "http://:pw@public.test/",
        "not a url",
        "/relative/only",
    ];
    for url in invalid {
        assert_eq!(outcome(fetch.fetch(get(url)).await), Invalid, "{url}");
    }
    let mixed = format!("http://mixed.test:{port}/ok");
    assert_eq!(
        outcome(fetch.fetch(get(&mixed)).await),
        Refused(Private),
        "a name with one public and one private address is refused whole"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 0, "nothing blocked ever connected");

    let fetched = [
        format!("http://public.test:{port}/ok"),
        format!("http://PUBLIC.test.:{port}/ok"),
        format!("http://public.test:{port}/redirect-ok"),
    ];
    for url in &fetched {
        assert_eq!(outcome(fetch.fetch(get(url)).await), Fetched(200), "{url}");
    }
    assert_eq!(
        outcome(fetch.fetch(get("http://nowhere.test/")).await),
        Failed,
        "unresolvable"
    );
}

#[tokio::test]
async fn every_redirect_hop_is_vetted_again() {
    let (server, _) = server().await;
    let port = server.port();
    let fetch = client(server, Limits::default());
    let cases = [
        ("redirect-private", Blocked::Private),
        ("redirect-metadata", Blocked::Metadata),
        ("redirect-rebind", Blocked::Metadata),
    ];
    for (path, class) in cases {
        let url = format!("http://public.test:{port}/{path}");
        let url = if path == "redirect-rebind" {
            url.replace("public.test", "rebind.test")
        } else {
            url
        };
        assert_eq!(outcome(fetch.fetch(get(&url)).await), Expect::Refused(class), "{path}");
    }
}

#[tokio::test]
async fn a_protocol_switch_is_refused_before_any_connection_and_in_any_answer() {
    let (server, connections) = server().await;
    let fetch = client(server, Limits::default());
    let url = format!("http://public.test:{}/ok", server.port());
    for header in [
        ("Connection", "Upgrade"),
        ("connection", "keep-alive, upgrade"),
        ("Upgrade", "websocket"),
    ] {
        let request = FetchRequest {
            headers: vec![(header.0.into(), header.1.into())],
            ..get(&url)
        };
        assert_eq!(outcome(fetch.fetch(request).await), Expect::Refused(Blocked::Upgrade));
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "refused before any network activity"
    );
    let switched = fetch.fetch(get(&url.replace("/ok", "/upgrade"))).await;
    assert_eq!(outcome(switched), Expect::Refused(Blocked::Upgrade), "a 101 answer");
}

#[tokio::test]
async fn the_body_cap_and_the_timeout_end_a_fetch() {
    let (server, _) = server().await;
    let limits = Limits {
        max_response_bytes: 1024,
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let fetch = client(server, limits);
    let url = |path: &str| format!("http://public.test:{}/{path}", server.port());
    assert_eq!(
        fetch.fetch(get(&url("big"))).await.err(),
        Some(FetchError::Failed("the response body is over the limit or broke off"))
    );
    assert_eq!(
        fetch.fetch(get(&url("slow"))).await.err(),
        Some(FetchError::Failed("the fetch timed out"))
    );
}

#[tokio::test]
async fn host_owned_headers_and_unknown_methods_are_refused() {
    let (server, _) = server().await;
    let fetch = client(server, Limits::default());
    let url = format!("http://public.test:{}/ok", server.port());
    for header in ["Host", "Authorization", "Proxy-Authorization", "Transfer-Encoding"] {
        let request = FetchRequest {
            headers: vec![(header.into(), "x".into())],
            ..get(&url)
        };
        assert_eq!(outcome(fetch.fetch(request).await), Expect::Invalid, "{header}");
    }
    for method in ["CONNECT", "TRACE", "BREW"] {
        let request = FetchRequest {
            method: Some(method.into()),
            ..get(&url)
        };
        assert_eq!(outcome(fetch.fetch(request).await), Expect::Invalid, "{method}");
    }
}

fn get(url: &str) -> FetchRequest {
    FetchRequest {
        url: url.to_owned(),
        ..FetchRequest::default()
    }
}

/// The allowance is keyed by exact socket address: the same server on a name is public only on the
/// allowed port, and a non-loopback address is never allowed.
#[test]
fn the_allowance_holds_loopback_addresses_only() {
    let allowance = Allowance::of(["127.0.0.1:8080".parse().unwrap(), "10.0.0.1:80".parse().unwrap()]);
    assert!(allowance.permits("127.0.0.1:8080".parse().unwrap()));
    assert!(!allowance.permits("127.0.0.1:8081".parse().unwrap()));
    assert!(!allowance.permits("10.0.0.1:80".parse().unwrap()));
}

/// Redirects: at most five are followed, a 303 turns a POST into a GET without its body, and
/// `Authorization` goes to the first origin only.
#[tokio::test]
async fn redirects_are_capped_reshape_a_see_other_and_keep_credentials_to_the_origin() {
    let (server, _) = server().await;
    let fetch = client(server, Limits::default());
    let url = |path: &str| format!("http://public.test:{}{path}", server.port());
    assert_eq!(
        outcome(fetch.fetch(get(&url("/hops/4"))).await),
        Expect::Fetched(200),
        "five redirects"
    );
    assert_eq!(
        fetch.fetch(get(&url("/hops/5"))).await.err(),
        Some(FetchError::Failed("too many redirects")),
        "a sixth"
    );
    let text = |response: Result<conduit_egress::FetchResponse, FetchError>| {
        String::from_utf8(response.unwrap().body).unwrap()
    };
    let post = |path: &str| FetchRequest {
        method: Some("POST".into()),
        body: Some(b"payload".to_vec()),
        authorization: Some("Bearer planted".into()),
        ..get(&url(path))
    };
    assert_eq!(text(fetch.fetch(post("/echo")).await), "POST 7 auth=yes");
    assert_eq!(
        text(fetch.fetch(post("/see-other")).await),
        "GET 0 auth=yes",
        "303: GET, no body"
    );
    let same = FetchRequest {
        method: None,
        body: None,
        ..post("/to-same")
    };
    assert_eq!(text(fetch.fetch(same).await), "GET 0 auth=yes", "same origin keeps it");
    let other = FetchRequest {
        method: None,
        body: None,
        ..post("/to-other")
    };
    assert_eq!(
        text(fetch.fetch(other).await),
        "GET 0 auth=no",
        "another origin never sees it"
    );
}

/// A request body past `max_request_bytes` (1 MiB) is refused before anything is resolved.
#[tokio::test]
async fn a_request_body_over_the_cap_is_refused_before_connecting() {
    let (server, connections) = server().await;
    let fetch = client(server, Limits::default());
    let request = |len: usize| FetchRequest {
        method: Some("POST".into()),
        body: Some(vec![b'x'; len]),
        ..get(&format!("http://public.test:{}/echo", server.port()))
    };
    assert_eq!(outcome(fetch.fetch(request(1024 * 1024 + 1)).await), Expect::Invalid);
    assert_eq!(connections.load(Ordering::SeqCst), 0);
    assert_eq!(
        outcome(fetch.fetch(request(1024 * 1024)).await),
        Expect::Fetched(200),
        "1 MiB is within"
    );
}
