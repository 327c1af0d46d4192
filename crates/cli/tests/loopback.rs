//! The optional loopback TCP listener: the management API with the same authentication, and
//! nothing but loopback addresses.

mod common;

use std::io::{Read, Write};

use common::*;

/// A raw HTTP/1.1 GET over TCP: the status.
fn tcp_get(port: u16, path: &str, token: Option<&str>) -> u16 {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_management_api_is_served_on_loopback_with_the_same_authentication() {
    let mut daemon = Daemon::start(None);
    daemon.stop();
    let port = free_port();
    daemon.launch_with_env(&[("OPEN_CONDUIT_LISTEN", &format!("127.0.0.1:{port}"))]);
    let token = daemon.operator_token();
    assert_eq!(tcp_get(port, "/v1/health", Some(&token)), 200);
    assert_eq!(tcp_get(port, "/v1/tools", Some(&token)), 200);
    assert_eq!(tcp_get(port, "/v1/health", None), 401);
    assert_eq!(
        tcp_get(port, "/.well-known/openwop", None),
        200,
        "discovery on every listener"
    );
    assert_eq!(tcp_get(port, "/v1/health", Some("not-a-token")), 401);
}

#[test]
fn a_non_loopback_address_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(OPEN_CONDUIT)
        .args(["daemon", "--listen", "0.0.0.0:0", "--state"])
        .arg(tmp.path().join("state"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(!tmp.path().join("state").exists(), "refused before anything is created");
}
