//! A fake HTTP API on loopback for the extensions' tests: each request (method, path, the headers
//! the extensions set, the JSON body) is kept and answered by the test's function.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub accept: Option<String>,
    pub body: Value,
}

pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

pub type Requests = Arc<Mutex<Vec<Seen>>>;

/// Serves on a free loopback port, answering each request with `answer(request, port)`.
pub fn start(answer: impl Fn(&Seen, u16) -> Answer + Send + Sync + 'static) -> (u16, Requests) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Requests = Arc::new(Mutex::new(Vec::new()));
    let (kept, answer) = (seen.clone(), Arc::new(answer));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (kept, answer) = (kept.clone(), answer.clone());
            std::thread::spawn(move || {
                if let Some(request) = read(&stream) {
                    kept.lock().unwrap().push(request.clone());
                    respond(stream, answer(&request, port));
                }
            });
        }
    });
    (port, seen)
}

pub fn json_answer(status: u16, body: Value) -> Answer {
    Answer {
        status,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: body.to_string(),
    }
}

/// A request's method, target and headers (names lower-cased).
pub type Head = (String, String, Vec<(String, String)>);

/// Reads a request's line and headers.
pub fn read_head(reader: &mut impl BufRead) -> Option<Head> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    Some((method, target, headers))
}

fn read(stream: &TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let (method, path, headers) = read_head(&mut reader)?;
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen {
        method,
        path,
        authorization: header("authorization"),
        accept: header("accept"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn respond(mut stream: TcpStream, answer: Answer) {
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (name, value) in answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(answer.body.as_bytes());
}
