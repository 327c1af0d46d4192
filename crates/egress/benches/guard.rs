//! The guard's overhead (`cargo bench -p conduit-egress --bench guard`; `BENCH_CALLS`, default
//! 2000): a plain hyper client and `SafeFetch` fetching the same local server in one run, a fresh
//! connection per request for both, and the address classifier alone.

// A bench, like a test, stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use conduit_egress::allowance::Allowance;
use conduit_egress::{address, FetchRequest, Limits, Resolve, SafeFetch};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

struct Loopback;

impl Resolve for Loopback {
    fn resolve<'a>(&'a self, _: &'a str, _: u16) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async { Ok(vec![IpAddr::from([127, 0, 0, 1])]) })
    }
}

fn main() {
    let calls = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rows = runtime.block_on(async {
        let server = serve().await;
        let fetch = SafeFetch::new(Limits::default())
            .with_resolver(Arc::new(Loopback))
            .with_allowance(Allowance::of([server]));
        let by_name = format!("http://bench.test:{}/", server.port());
        let by_address = format!("http://{server}/");
        vec![
            ("plain hyper", time(calls, || plain(server)).await),
            ("safeFetch, address", time(calls, || guarded(&fetch, &by_address)).await),
            ("safeFetch, name", time(calls, || guarded(&fetch, &by_name)).await),
        ]
    });
    let floor = rows[0].1[rows[0].1.len() / 2];
    println!("{calls} fetches each, p50 / p90 (µs), ratio of p50 to plain hyper's");
    for (name, samples) in &rows {
        let (p50, p90) = (samples[samples.len() / 2], samples[samples.len() * 9 / 10]);
        println!(
            "{name:<20} {:>8.1} {:>8.1} {:>6.2}x",
            micros(p50),
            micros(p90),
            micros(p50) / micros(floor)
        );
    }
    classifier();
}

/// The classifier alone over a mix of public and refused addresses, IPv4 and IPv6.
fn classifier() {
    let addresses: Vec<IpAddr> = [
        "93.184.216.34",
        "10.0.0.1",
        "127.0.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "8.8.8.8",
        "2606:4700::1111",
        "::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "64:ff9b::808:808",
        "2002:c0a8:101::1",
        "fd00::1",
        "2001:db8::1",
        "240.0.0.1",
        "1.1.1.1",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect();
    let rounds = 1_000_000;
    let start = Instant::now();
    let mut public = 0usize;
    for _ in 0..rounds {
        for ip in &addresses {
            public += usize::from(address::check(std::hint::black_box(*ip)).is_ok());
        }
    }
    let per = start.elapsed().as_nanos() as f64 / (rounds * addresses.len()) as f64;
    println!("classifier           {per:>8.2} ns per address ({public} public verdicts)");
}

async fn plain(server: SocketAddr) {
    let stream = tokio::net::TcpStream::connect(server).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::get("/")
        .header("host", "bench")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "hello");
}

async fn guarded(fetch: &SafeFetch, url: &str) {
    let request = FetchRequest {
        url: url.to_owned(),
        ..FetchRequest::default()
    };
    assert_eq!(fetch.fetch(request).await.unwrap().body, b"hello");
}

async fn serve() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service_fn(|_: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello"))))
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

async fn time<F: Future<Output = ()>>(n: usize, f: impl Fn() -> F) -> Vec<Duration> {
    for _ in 0..50 {
        f().await;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f().await;
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
