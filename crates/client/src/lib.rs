//! The client both command lines use: HTTP/1.1 JSON over a Unix socket.
//!
//! Every request dials the socket afresh, sends `Host: localhost` and a bearer token, and follows no
//! redirects; there is no proxy because there is no network. A 2xx answer is returned as JSON; any
//! other answer is parsed as the flat error envelope `{"error", "message", ...}` (see `docs/api.md`).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::UnixStream;

/// The header that stands in for a request id when the body carries none.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The code given to a non-2xx answer that carries no error envelope.
pub const UNEXPECTED_RESPONSE: &str = "unexpected_response";

/// Why a request produced no JSON answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens at the socket (no file, or no server behind it): nothing was sent, so the
    /// very request may be sent again. The message names the socket.
    #[error("{0}")]
    Unreachable(String),
    /// The exchange broke off after the socket was dialled; the message names the socket.
    #[error("{0}")]
    Transport(String),
    /// The server answered with a non-2xx status and (normally) an error envelope.
    #[error("{code}: {message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
        /// The whole envelope, including code-specific fields such as `remedy`.
        body: Value,
    },
}

impl ClientError {
    /// The envelope's `remedy` (a suggested next step), if the server gave one.
    pub fn remedy(&self) -> Option<&str> {
        match self {
            ClientError::Refused { body, .. } => body.get("remedy").and_then(Value::as_str),
            ClientError::Unreachable(_) | ClientError::Transport(_) => None,
        }
    }
}

/// A client for one Unix socket, authenticating with one bearer token.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    token: String,
}

impl Client {
    pub fn new(socket: impl Into<PathBuf>, token: impl Into<String>) -> Self {
        Client {
            socket: socket.into(),
            token: token.into(),
        }
    }

    /// The socket this client dials.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `GET path_and_query`; the caller encodes ids and query values (see [`percent_encode_segment`]).
    pub async fn get(&self, path_and_query: &str) -> Result<Value, ClientError> {
        self.send(Method::GET, path_and_query, None, None).await
    }

    /// `GET path` of a body that is not JSON (an artifact's content): its bytes.
    pub async fn get_bytes(&self, path_and_query: &str) -> Result<Vec<u8>, ClientError> {
        let request = self.request(Method::GET, path_and_query, None, None)?;
        let (status, bytes) = self.exchange(request).await?;
        if status.is_success() {
            Ok(bytes.to_vec())
        } else {
            Err(refusal(status, &bytes))
        }
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Result<Value, ClientError> {
        self.send(Method::DELETE, path, None, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.post_with_key(path, body, None).await
    }

    /// `POST path` with a JSON body and, when given, an `Idempotency-Key` header.
    pub async fn post_with_key(
        &self,
        path: &str,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, ClientError> {
        self.send(Method::POST, path, Some(body), idempotency_key).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Value, ClientError> {
        let request = self.request(method, path, body, idempotency_key)?;
        let (status, bytes) = self.exchange(request).await?;
        self.interpret(status, &bytes)
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, "localhost")
            .header(ACCEPT, "application/json")
            .header(AUTHORIZATION, format!("Bearer {}", self.token));
        if body.is_some() {
            builder = builder.header(CONTENT_TYPE, "application/json");
        }
        if let Some(key) = idempotency_key {
            builder = builder.header(IDEMPOTENCY_KEY, key);
        }
        let bytes = body.map(Value::to_string).unwrap_or_default();
        builder
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| self.transport("cannot build a request for", e))
    }

    /// One request on a fresh connection; answers the status and the whole body.
    async fn exchange(&self, request: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes), ClientError> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| ClientError::Unreachable(format!("cannot connect to {}: {e}", self.socket.display())))?;
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.transport("cannot talk HTTP/1.1 over", e))?;
        // The connection task ends by itself once `sender` is dropped at the end of this call.
        tokio::spawn(connection);
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| self.transport("no answer from", e))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| self.transport("the answer broke off from", e))?;
        Ok((status, body.to_bytes()))
    }

    fn interpret(&self, status: StatusCode, body: &[u8]) -> Result<Value, ClientError> {
        if status.is_success() {
            if body.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(body).map_err(|e| self.transport("the answer is not JSON from", e));
        }
        Err(refusal(status, body))
    }

    fn transport(&self, what: &str, error: impl std::fmt::Display) -> ClientError {
        ClientError::Transport(format!("{what} {}: {error}", self.socket.display()))
    }
}

/// Reads a non-2xx answer as the flat error envelope, tolerating answers that carry none.
fn refusal(status: StatusCode, body: &[u8]) -> ClientError {
    let body = serde_json::from_slice::<Value>(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    let text = |field: &str| body.get(field).and_then(Value::as_str).map(str::to_owned);
    let (code, message) = match (text("error"), text("message")) {
        (Some(code), message) => (code, message.unwrap_or_default()),
        (None, _) => (
            UNEXPECTED_RESPONSE.to_owned(),
            format!("HTTP {status} without an error envelope"),
        ),
    };
    ClientError::Refused {
        status: status.as_u16(),
        code,
        message,
        body,
    }
}

/// Percent-encodes `s` for use as one path segment or query value: every byte outside the
/// unreserved set (`A-Z a-z 0-9 - . _ ~`) becomes `%XX`, so ids containing `/` stay one segment.
pub fn percent_encode_segment(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for byte in s.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::BodyExt;
    use hyper::body::Incoming;
    use hyper::server::conn::http1 as server_http1;
    use hyper::service::service_fn;
    use hyper::Response;
    use serde_json::json;
    use tokio::net::UnixListener;

    use super::*;

    /// Echoes the request back as JSON; `/refuse` answers an envelope, `/plain` a bare 500.
    async fn handle(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let echo = json!({
            "method": request.method().as_str(),
            "uri": request.uri().to_string(),
            "host": header("host"),
            "authorization": header("authorization"),
            "idempotency_key": header("idempotency-key"),
        });
        let path = request.uri().path().to_owned();
        let body = request.into_body().collect().await.map(|b| b.to_bytes());
        let body: Value = body
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        let (status, text) = match path.as_str() {
            "/refuse" => (
                422,
                json!({"error": "unknown_scope", "message": "no such scope", "remedy": "add it"}).to_string(),
            ),
            "/plain" => (500, "boom".to_owned()),
            _ => (200, json!({"echo": echo, "body": body}).to_string()),
        };
        let response = Response::builder()
            .status(status)
            .body(Full::new(Bytes::from(text)))
            .expect("response");
        Ok(response)
    }

    async fn serve(listener: UnixListener) {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(server_http1::Builder::new().serve_connection(TokioIo::new(stream), service_fn(handle)));
        }
    }

    fn server() -> (tempfile::TempDir, Client) {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("test.sock");
        let listener = UnixListener::bind(&socket).expect("bind");
        tokio::spawn(serve(listener));
        (dir, Client::new(socket, "secret-token"))
    }

    #[tokio::test]
    async fn get_answers_json_and_sends_host_and_bearer() {
        let (_dir, client) = server();
        let answer = client.get("/v1/work?scope=a%2Fb").await.expect("get");
        assert_eq!(answer["echo"]["method"], "GET");
        assert_eq!(answer["echo"]["uri"], "/v1/work?scope=a%2Fb");
        assert_eq!(answer["echo"]["host"], "localhost");
        assert_eq!(answer["echo"]["authorization"], "Bearer secret-token");
        assert_eq!(answer["echo"]["idempotency_key"], Value::Null);
    }

    #[tokio::test]
    async fn post_with_key_sends_body_and_idempotency_key() {
        let (_dir, client) = server();
        let body = json!({"operation": "emit", "input": {"type": "demo.hello"}});
        let answer = client
            .post_with_key("/v1/toolbelt/call", &body, Some("req-1"))
            .await
            .expect("post");
        assert_eq!(answer["echo"]["method"], "POST");
        assert_eq!(answer["echo"]["idempotency_key"], "req-1");
        assert_eq!(answer["body"], body);
    }

    #[tokio::test]
    async fn error_envelope_becomes_refused() {
        let (_dir, client) = server();
        let error = client.post("/refuse", &json!({})).await.expect_err("refused");
        assert_eq!(error.remedy(), Some("add it"));
        let ClientError::Refused {
            status,
            code,
            message,
            body,
        } = error
        else {
            panic!("expected a refusal, got {error:?}");
        };
        assert_eq!(
            (status, code.as_str(), message.as_str()),
            (422, "unknown_scope", "no such scope")
        );
        assert_eq!(body["remedy"], "add it");
    }

    #[tokio::test]
    async fn non_envelope_error_is_still_refused() {
        let (_dir, client) = server();
        let error = client.get("/plain").await.expect_err("refused");
        let ClientError::Refused { status, code, body, .. } = error else {
            panic!("expected a refusal, got {error:?}");
        };
        assert_eq!((status, code.as_str()), (500, UNEXPECTED_RESPONSE));
        assert_eq!(body, json!("boom"));
    }

    #[tokio::test]
    async fn a_missing_socket_is_unreachable_naming_the_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("absent.sock");
        let error = Client::new(&socket, "t")
            .get("/v1/health")
            .await
            .expect_err("no socket");
        let ClientError::Unreachable(message) = error else {
            panic!("expected an unreachable socket, got {error:?}");
        };
        assert!(message.contains(&socket.display().to_string()), "{message}");
    }

    #[test]
    fn percent_encoding_keeps_only_unreserved_bytes() {
        for (raw, encoded) in [
            ("abc-XYZ_0.9~", "abc-XYZ_0.9~"),
            ("a/b", "a%2Fb"),
            ("work:1 2", "work%3A1%202"),
            ("?#%&=+", "%3F%23%25%26%3D%2B"),
            ("é", "%C3%A9"),
            ("", ""),
        ] {
            assert_eq!(percent_encode_segment(raw), encoded, "{raw:?}");
        }
    }
}
