//! pxagent: manage Proxmox VE hosts and clusters through a key-only SSH account whose
//! sudoers allows exactly the command lines of pxagent's operation catalog.
//!
//! The binary (`src/main.rs`) is a thin wrapper around [`run`]; everything testable lives
//! here so tests can call it in-process. One folder per layer, from the ground up; a module
//! imports only from its own layer and those below it (ARCHITECTURE.md has the code map and
//! the rules; `tests/layers.rs` checks them):
//! - [`base`]     error and exit codes, the gate's wire contract, text, time, runtime, signals
//! - [`output`]   the only stdout writer: escaping, colour, units, tables
//! - [`ssh`]      the russh transport: sessions, keys, known_hosts, ~/.ssh/config
//! - [`catalog`]  the operation table everything is derived from, invocations, guest limits
//! - [`views`]    typed results and human tables of what PVE answers
//! - [`audit`]    the local hash-chained audit trail and its queries
//! - [`approval`] signed human approvals: statements, SSHSIG, nonces, pending requests
//! - [`policy`]   may it run: rules, allowlists, confirmation phrases, rate limits
//! - [`remote`]   run an invocation on a host and classify the answer
//! - [`persist`]  connections kept by a background holder for later processes
//! - [`engine`]   the one flow of an operation, guest commands with file sync
//! - [`config`]   the config file, where and how to connect, a front end's context
//! - [`host`]     the host side: sudoers render and lint, setup/revoke, preflight, the gate
//! - [`batch`]    front end: JSON Lines of requests
//! - [`mcp`]      front end: the MCP server (the only rmcp user)
//! - [`cli`]      front end: the command line (the only clap user), fleets, logging
//! - `fuzzing`    the fuzz targets' bodies (tests and the `fuzzing` feature only)

pub mod approval;
pub mod audit;
pub mod base;
pub mod batch;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod engine;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod host;
pub mod mcp;
pub mod output;
pub mod persist;
pub mod policy;
pub mod remote;
pub mod ssh;
pub mod views;

use std::ffi::OsString;

pub use base::error::{Error, Result};

/// pxagent's version (the client's in envelopes, the gate's in its answers).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Run pxagent with these arguments (program name first) and return the exit code.
pub fn run(args: Vec<OsString>) -> u8 {
    cli::run(args)
}
