//! `open-conduit auth`'s steps that are more than one request: a rotated credential written over
//! the token file it was read from, and the owner's credential reissued with the daemon stopped.

use serde_json::{json, Value};

use crate::connection::write_token;
use crate::management::{self, Locations};
use crate::report::Failure;

/// Rotates the caller's credential and writes the replacement over the token file it was read from;
/// the answer names that file in place of the token.
pub fn rotate(locations: &Locations) -> Result<Value, Failure> {
    let connection = locations.connection()?;
    let mut answer = management::send(&connection, &management::rotate())?;
    let token = answer
        .get("token")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    write_token(connection.token_file(), &token)?;
    answer["token"] = Value::from(connection.token_file().display().to_string());
    Ok(answer)
}

/// Issues the owner a new credential into the state directory, under its lock (so only with the
/// daemon stopped).
pub fn recover(locations: &Locations, store: &conduit_daemon::StoreLocation) -> Result<Value, Failure> {
    let path =
        conduit_daemon::recover_owner(&locations.state_dir()?, store).map_err(|e| Failure::Local(e.to_string()))?;
    Ok(json!({"token_file": path.display().to_string()}))
}
