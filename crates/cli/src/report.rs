//! Failures, what they print, and the exit status each ends with.
//!
//! Exit status: 0 ok, 1 refused by the daemon, 2 usage, local or transport error (clap's own usage
//! errors also exit 2).

use std::io::Write;
use std::process::ExitCode;

use conduit_client::ClientError;
use serde_json::Value;

use crate::text::{diagnostics, pretty};

/// Turns a successful answer into the human-readable text printed without `--json`.
pub type Human = fn(&Value) -> String;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// A problem on this side: bad usage, a missing environment variable or file. Exit 2.
    Local(String),
    /// The socket could not be reached or the exchange broke off. Exit 2.
    Transport(String),
    /// The daemon answered with an error envelope. Exit 1.
    Refused {
        code: String,
        message: String,
        remedy: Option<String>,
        envelope: Value,
    },
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Self {
        let remedy = error.remedy().map(str::to_owned);
        match error {
            ClientError::Unreachable(message) | ClientError::Transport(message) => Failure::Transport(message),
            ClientError::Refused {
                code, message, body, ..
            } => Failure::Refused {
                code,
                message,
                remedy,
                envelope: body,
            },
        }
    }
}

/// Prints a command's result and picks its exit status.
#[derive(Debug, Clone, Copy)]
pub struct Reporter {
    json: bool,
    refusal_prefix: &'static str,
}

impl Reporter {
    /// For `open-conduit`: a refusal's first line is `error: <code>: <message>`.
    pub fn operator(json: bool) -> Self {
        Reporter::new(json, "error: ")
    }

    /// For `os`: a refusal's first line is exactly `<code>: <message>`.
    pub fn execution(json: bool) -> Self {
        Reporter::new(json, "")
    }

    /// Prints the answer (as JSON with `--json`, else through `human`) or the failure.
    pub fn finish(&self, result: Result<Value, Failure>, human: Human) -> ExitCode {
        match result {
            Ok(answer) if self.json => print(&mut std::io::stdout(), &pretty(&answer)),
            Ok(answer) => {
                print(&mut std::io::stdout(), &human(&answer));
                if answer.get("more") == Some(&Value::Bool(true)) {
                    eprintln!("more items remain: raise --limit to see them");
                }
            }
            Err(failure) => return self.fail(failure),
        }
        ExitCode::SUCCESS
    }

    /// Ends a command that printed its own output (or none): exit 0, or the failure printed.
    pub fn finish_printed(&self, result: Result<(), Failure>) -> ExitCode {
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => self.fail(failure),
        }
    }

    /// Like [`Reporter::finish`] for a validation: its report is printed either way, and an answer
    /// with `"valid": false` exits 1.
    pub fn finish_validation(&self, result: Result<Value, Failure>, human: Human) -> ExitCode {
        let invalid = matches!(&result, Ok(answer) if answer.get("valid") == Some(&Value::Bool(false)));
        match self.finish(result, human) {
            code if invalid && code == ExitCode::SUCCESS => ExitCode::from(1),
            code => code,
        }
    }

    /// Prints a failure: a refusal's envelope goes to stdout with `--json`, all else to stderr.
    pub fn fail(&self, failure: Failure) -> ExitCode {
        match failure {
            Failure::Local(message) | Failure::Transport(message) => {
                print(&mut std::io::stderr(), &format!("error: {message}"));
                ExitCode::from(2)
            }
            Failure::Refused { envelope, .. } if self.json => {
                print(&mut std::io::stdout(), &pretty(&envelope));
                ExitCode::from(1)
            }
            Failure::Refused {
                code,
                message,
                remedy,
                envelope,
            } => {
                let remedy = remedy.map(|r| format!("\nremedy: {r}")).unwrap_or_default();
                let prefix = self.refusal_prefix;
                let details = diagnostics(&envelope);
                let details = if details.is_empty() {
                    details
                } else {
                    format!("\n{details}")
                };
                print(
                    &mut std::io::stderr(),
                    &format!("{prefix}{code}: {message}{remedy}{details}"),
                );
                ExitCode::from(1)
            }
        }
    }

    fn new(json: bool, refusal_prefix: &'static str) -> Self {
        Reporter { json, refusal_prefix }
    }
}

/// Writes one block of text and a newline; a closed pipe (`| head`) is not an error worth a panic.
fn print(out: &mut impl Write, text: &str) {
    let _ = writeln!(out, "{text}");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn refusal_keeps_code_message_remedy_and_envelope() {
        let envelope = json!({"error": "conflict", "message": "busy", "remedy": "retry"});
        let failure = Failure::from(ClientError::Refused {
            status: 409,
            code: "conflict".into(),
            message: "busy".into(),
            body: envelope.clone(),
        });
        let Failure::Refused {
            code,
            message,
            remedy,
            envelope: kept,
        } = failure
        else {
            panic!("expected a refusal, got {failure:?}");
        };
        assert_eq!((code.as_str(), message.as_str()), ("conflict", "busy"));
        assert_eq!((remedy.as_deref(), kept), (Some("retry"), envelope));
    }
}
