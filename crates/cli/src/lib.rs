//! The two command lines' shared machinery: `open-conduit` (the operator's, over the management
//! socket) and `os` (an execution's, over its toolbelt socket).
//!
//! The binaries under `src/bin/` hold only their clap definitions and the glue from parsed
//! arguments to a [`connection::Request`] or to one of the steps here; everything else lives here:
//!
//! - [`connection`]: a socket plus a token file, re-read on every request; one request per call.
//! - [`management`] and [`toolbelt`]: the requests each surface takes (pure builders) and how each
//!   binary finds its socket and token.
//! - [`render`]: the human-readable text printed when `--json` is not given.
//! - [`report`]: failures, what they print and the exit status they end with.
//! - [`text`]: plain text from the API's JSON that [`render`] and [`report`] both print.
//! - [`mcp`]: `os mcp`, the toolbelt as a stdio MCP server.
//! - [`runs`]: unified run history, composed from several management reads.
//! - [`doctor`]: `open-conduit doctor`'s checks, offline where the daemon is down.
//! - [`daemon`]: `open-conduit daemon`, the daemon in the foreground.
//! - [`auth`], [`artifacts`] and [`config_file`]: the operator's steps that are more than one
//!   request (rotation, recovery, an artifact's raw bytes, a configuration file read or checked
//!   offline).
//! - [`service`]: `open-conduit service install --user`, a systemd user unit for the daemon.
//! - [`secrets`]: `open-conduit secrets`, the owner-only `file:` secrets written and listed.
//! - [`watch`]: the commands that wait and follow (`--wait`, `--follow`, `runs watch`).
//! - [`tui`]: `open-conduit tui`, the live terminal UI over the same requests.
//! - [`json`]: JSON command-line values and bodies with optional fields.
//! - [`xdg`]: where the XDG base directories are (the state directory, the user's systemd units).
//! - [`runtime`]: the async runtimes the command lines block on.

#![forbid(unsafe_code)]

pub mod artifacts;
pub mod auth;
pub mod config_file;
pub mod connection;
pub mod daemon;
pub mod doctor;
pub mod git_credential;
pub mod github_hold;
pub mod json;
pub mod management;
pub mod mcp;
pub mod render;
pub mod report;
pub mod runs;
pub mod runtime;
pub mod secrets;
pub mod service;
pub mod text;
pub mod toolbelt;
pub mod tui;
pub mod watch;
pub mod xdg;
