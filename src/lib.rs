//! pxagent: manage Proxmox VE hosts and clusters through a key-only SSH account whose
//! sudoers allows exactly the command lines of pxagent's operation catalog.
//!
//! The binary (`src/main.rs`) is a thin wrapper around [`run`]; everything testable lives
//! here so tests can call it in-process. Folders say the layer:
//!
//! - front ends: [`cli`] (the only clap user), [`mcp`] (the only rmcp user), [`batch`] (JSON
//!   Lines of requests), [`fleet`] (one command on several hosts);
//! - core: [`catalog`], [`invocation`], [`engine`], [`policy`], [`confirm`], [`limits`],
//!   [`audit`], [`views`], [`exec`], [`remote`], [`output`] (the only stdout writer),
//!   [`signals`] (SIGINT/SIGTERM/SIGHUP while an op runs);
//! - transport: [`ssh`] (the only russh user), [`persist`] (a connection kept by a background
//!   holder for later processes);
//! - host side: [`host`] (sudoers render and lint, preflight);
//! - signed human approvals: [`approval`] (statements, signatures, the gate's checks).

pub mod approval;
pub mod audit;
pub mod base;
pub mod batch;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod engine;
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
