//! `os git-credential get|store|erase`: a git credential helper
//! (`git config credential.helper '!os git-credential'`) whose only source is the toolbelt. `get`
//! asks the serving route which granted operation serves `git.credential`, calls it with what git
//! described (protocol, host, path), and prints `username=` and `password=` when it answered a
//! credential for that host, nothing otherwise; `store` and `erase` keep nothing (the host owns
//! the credential).
//!
//! The protocol: git writes `key=value` lines ending with a blank line or end of input, and reads
//! the same from the helper's stdout.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::connection::{Connection, Request};
use crate::report::Failure;
use crate::toolbelt;

pub const CAPABILITY: &str = "git.credential";

/// What git asked about: its `key=value` lines up to the first blank one.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The credential lines for git, when `output` holds a username and password fit to print (no
/// line breaks, which would let a value forge another attribute); otherwise nothing.
pub fn answer(output: &Value) -> String {
    let field = |name: &str| {
        output[name]
            .as_str()
            .filter(|v| !v.is_empty() && !v.contains(['\n', '\r', '\0']))
    };
    match (field("username"), field("password")) {
        (Some(username), Some(password)) => format!("username={username}\npassword={password}\n"),
        _ => String::new(),
    }
}

/// The operation's input: what git described, less anything else it sent.
fn input(request: &BTreeMap<String, String>) -> Option<Value> {
    let host = request.get("host")?;
    let mut input = json!({"host": host});
    for key in ["protocol", "path"] {
        if let Some(value) = request.get(key) {
            input[key] = value.clone().into();
        }
    }
    Some(input)
}

/// `get`: the lines to print for git (empty when no granted operation serves the capability or
/// it has no credential for this host).
pub fn get(connection: &Connection, request: &BTreeMap<String, String>) -> Result<String, Failure> {
    let Some(input) = input(request) else {
        return Ok(String::new());
    };
    let path = format!("/v1/toolbelt/serving?capability={CAPABILITY}");
    let serving = connection.send(&Request::Get(path))?;
    let Some(operation) = serving["operations"]
        .as_array()
        .and_then(|ops| ops.first())
        .and_then(Value::as_str)
    else {
        return Ok(String::new());
    };
    let called = connection.send(&toolbelt::call(operation, input, None))?;
    Ok(answer(&called["output"]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gits_request_is_read_up_to_the_blank_line() {
        let request = parse("protocol=https\nhost=github.com\npath=acme/app.git\n\nhost=later\n");
        assert_eq!(request["host"], "github.com");
        assert_eq!(
            input(&request),
            Some(json!({"host": "github.com", "protocol": "https", "path": "acme/app.git"}))
        );
        assert_eq!(input(&parse("protocol=https\n")), None, "no host, no question");
    }

    #[test]
    fn only_a_whole_single_line_credential_is_printed() {
        let good = json!({"username": "x-access-token", "password": "t0k"});
        assert_eq!(answer(&good), "username=x-access-token\npassword=t0k\n");
        for bad in [
            json!({}),
            json!({"username": "u"}),
            json!({"username": "u", "password": ""}),
            json!({"username": "u", "password": "t\nhost=evil.example"}),
            json!({"username": 1, "password": "t"}),
        ] {
            assert_eq!(answer(&bad), "", "{bad}");
        }
    }
}
