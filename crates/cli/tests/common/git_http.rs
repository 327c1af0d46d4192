//! A git smart-HTTP server on loopback: `git http-backend` (git's own CGI program) behind a small
//! server that demands Basic auth, keeping each request's `Host` and whether it authenticated.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use base64::Engine;

/// One request as the server saw it: its `Host`, and whether it carried the expected credential.
#[derive(Debug, Clone)]
pub struct GitRequest {
    pub host: String,
    pub authorized: bool,
    pub presented: bool,
}

pub struct GitServer {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<GitRequest>>>,
}

impl GitServer {
    /// Serves the bare repositories under `root` to `username:password`.
    pub fn start(root: &Path, username: &str, password: &str) -> GitServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
        );
        let (root, kept) = (root.to_owned(), seen.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (root, kept, expected) = (root.clone(), kept.clone(), expected.clone());
                std::thread::spawn(move || serve(stream, &root, &expected, &kept));
            }
        });
        GitServer { port, seen }
    }

    pub fn requests(&self) -> Vec<GitRequest> {
        self.seen.lock().unwrap().clone()
    }
}

/// A bare repository `name` under `root` with one commit on `main`, accepting pushes over HTTP.
pub fn bare_repo(root: &Path, name: &str) -> PathBuf {
    let bare = root.join(name);
    let seed = root.join(format!("{name}-seed"));
    let git = |dir: &Path, args: &[&str]| {
        let status = Command::new("git")
            .args([
                "-c",
                "user.name=seed",
                "-c",
                "user.email=seed@example.invalid",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    std::fs::create_dir_all(&seed).unwrap();
    git(root, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    git(&bare, &["config", "http.receivepack", "true"]);
    git(&seed, &["init", "-q"]);
    std::fs::write(seed.join("README"), "seed\n").unwrap();
    git(&seed, &["add", "README"]);
    git(&seed, &["commit", "-qm", "seed"]);
    git(&seed, &["push", "-q", bare.to_str().unwrap(), "HEAD:main"]);
    bare
}

fn serve(stream: TcpStream, root: &Path, expected: &str, seen: &Mutex<Vec<GitRequest>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let Some((method, target, headers)) = super::fake_http::read_head(&mut reader) else {
        return;
    };
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let body = read_body(&mut reader, header("content-length"), header("transfer-encoding"));
    let presented = header("authorization");
    let request = GitRequest {
        host: header("host").unwrap_or_default(),
        authorized: presented.as_deref() == Some(expected),
        presented: presented.is_some(),
    };
    seen.lock().unwrap().push(request.clone());
    let mut stream = stream;
    if !request.authorized {
        let _ = stream.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REMOTE_USER", "agent")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding").unwrap_or_default())
        .env("GIT_PROTOCOL", header("git-protocol").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    cgi.stdin.take().unwrap().write_all(&body).unwrap();
    let output = cgi.wait_with_output().unwrap();
    respond(stream, &output.stdout);
}

fn read_body(reader: &mut impl BufRead, length: Option<String>, encoding: Option<String>) -> Vec<u8> {
    let mut body = Vec::new();
    if encoding.is_some_and(|e| e.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                return body;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let length: usize = length.and_then(|l| l.parse().ok()).unwrap_or(0);
    body.resize(length, 0);
    reader.read_exact(&mut body).unwrap();
    body
}

/// Turns the CGI program's answer (headers, `Status:`, a blank line, the body) into HTTP.
fn respond(mut stream: TcpStream, cgi: &[u8]) {
    let split = cgi.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    let split = split.or_else(|| cgi.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let (end, gap) = split.unwrap_or((cgi.len(), 0));
    let head = String::from_utf8_lossy(&cgi[..end]);
    let body = &cgi[(end + gap).min(cgi.len())..];
    let mut status = "200 OK".to_owned();
    let mut out = String::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => status = value.trim().to_owned(),
            Some(_) => out.push_str(&format!("{line}\r\n")),
            None => {}
        }
    }
    let head = format!(
        "HTTP/1.1 {status}\r\n{out}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}
