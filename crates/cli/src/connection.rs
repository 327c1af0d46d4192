//! One socket and the file holding its bearer token; each request re-reads the token, so a
//! rotated token is picked up without restarting anything.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use conduit_client::{Client, ClientError};
use serde_json::Value;

use crate::report::Failure;
use crate::runtime;

/// A request to either surface.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `GET` of a path with its (already encoded) query.
    Get(String),
    /// `POST` of a JSON body.
    Post {
        path: String,
        body: Value,
    },
    /// `GET` of content that is not JSON; the answer is `{"content": <text>}`.
    GetContent(String),
    Delete(String),
}

/// Where to send requests and where to find the token that authenticates them.
#[derive(Debug, Clone)]
pub struct Connection {
    socket: PathBuf,
    token_file: PathBuf,
    /// The `Idempotency-Key` every POST carries: `None` sends none (the toolbelt, whose request ids
    /// are the agent's to choose), `Some(None)` a fresh key per request, `Some(Some(k))` the given one.
    idempotency: Option<Option<String>>,
    /// How long a request keeps dialling a socket nothing listens at (a daemon restarting) before
    /// it fails; `None` fails at once.
    patience: Option<Duration>,
}

/// The pause between dials of a socket nothing listens at.
const REDIAL: Duration = Duration::from_millis(200);

impl Connection {
    pub fn new(socket: PathBuf, token_file: PathBuf) -> Self {
        Connection {
            socket,
            token_file,
            idempotency: None,
            patience: None,
        }
    }

    /// Makes a request wait up to `patience` for a socket nothing listens at yet, dialling again
    /// and re-reading the token each time. Nothing was sent until a dial succeeds, so every request
    /// may wait, whatever it does.
    pub fn with_dial_patience(mut self, patience: Duration) -> Self {
        self.patience = Some(patience);
        self
    }

    /// Makes every POST carry an `Idempotency-Key`: `key`, or a fresh one per request.
    pub fn with_idempotency(mut self, key: Option<String>) -> Self {
        self.idempotency = Some(key);
        self
    }

    fn idempotency_key(&self) -> Option<String> {
        let fresh = || format!("oc-{}", uuid::Uuid::now_v7());
        self.idempotency
            .as_ref()
            .map(|given| given.clone().unwrap_or_else(fresh))
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn token_file(&self) -> &Path {
        &self.token_file
    }

    /// Sends one request on a current-thread runtime and waits for its answer.
    pub fn send(&self, request: &Request) -> Result<Value, Failure> {
        current_thread()?.block_on(self.send_async(request))
    }

    /// Sends one request from inside a runtime already running (the MCP server's), waiting for an
    /// unreachable socket as long as the connection's patience allows.
    pub async fn send_async(&self, request: &Request) -> Result<Value, Failure> {
        let deadline = self.patience.map(|p| Instant::now() + p);
        let mut told = false;
        loop {
            match self.exchange(&self.client()?, request).await {
                Err(ClientError::Unreachable(message)) if deadline.is_some_and(|d| Instant::now() < d) => {
                    if !told {
                        eprintln!("{message}; dialling again while the daemon comes back");
                        told = true;
                    }
                    tokio::time::sleep(REDIAL).await;
                }
                answer => return Ok(answer?),
            }
        }
    }

    /// Reads content that is not JSON, byte for byte.
    pub fn fetch(&self, path: &str) -> Result<Vec<u8>, Failure> {
        let client = self.client()?;
        Ok(current_thread()?.block_on(client.get_bytes(path))?)
    }

    /// A client holding the token as the file has it now.
    fn client(&self) -> Result<Client, Failure> {
        Ok(Client::new(&self.socket, read_token(&self.token_file)?))
    }

    async fn exchange(&self, client: &Client, request: &Request) -> Result<Value, ClientError> {
        match request {
            Request::Get(path) => client.get(path).await,
            Request::Delete(path) => client.delete(path).await,
            Request::GetContent(path) => client
                .get_bytes(path)
                .await
                .map(|bytes| serde_json::json!({ "content": String::from_utf8_lossy(&bytes) })),
            Request::Post { path, body } => {
                client
                    .post_with_key(path, body, self.idempotency_key().as_deref())
                    .await
            }
        }
    }
}

/// A `POST` of `body` to `path`.
pub fn post(path: &str, body: Value) -> Request {
    Request::Post {
        path: path.to_owned(),
        body,
    }
}

/// Replaces the token file with `token` (owner-only, through a temporary file and a rename).
pub fn write_token(path: &Path, token: &str) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: std::io::Error| Failure::Local(format!("cannot write the token file {}: {e}", path.display()));
    let tmp = path.with_extension("rotating");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(failed)?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)
}

/// The token as the file at `path` holds it now, without its trailing whitespace or newline.
pub fn read_token(path: &Path) -> Result<String, Failure> {
    let unreadable = |why: String| Failure::Local(format!("cannot read the token file {}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
    let token = text.trim_end();
    if token.is_empty() {
        return Err(unreadable("it is empty".to_owned()));
    }
    // Anything else could not go into an Authorization header, and would read as a dead daemon.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(unreadable(
            "it does not hold a token (one line of printable characters, no spaces); \
             `open-conduit auth recover` issues the owner a new one with the daemon stopped"
                .to_owned(),
        ));
    }
    Ok(token.to_owned())
}

/// The runtime a blocking request runs on.
fn current_thread() -> Result<tokio::runtime::Runtime, Failure> {
    runtime::build(&mut tokio::runtime::Builder::new_current_thread())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_trimmed_of_trailing_whitespace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        std::fs::write(&path, "abc.def \n\n").expect("write");
        assert_eq!(read_token(&path).expect("token"), "abc.def");
    }

    #[test]
    fn missing_or_empty_token_file_is_a_local_failure_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        let absent = read_token(&path).expect_err("absent");
        std::fs::write(&path, "\n").expect("write");
        let empty = read_token(&path).expect_err("empty");
        std::fs::write(&path, "two words\n").expect("write");
        let malformed = read_token(&path).expect_err("malformed");
        for failure in [absent, empty, malformed] {
            let Failure::Local(message) = failure else {
                panic!("expected a local failure, got {failure:?}");
            };
            assert!(message.contains(&path.display().to_string()), "{message}");
        }
    }
}
