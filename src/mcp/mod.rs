//! `pxagent mcp`: a Model Context Protocol server over stdio, the only module that uses rmcp.
//!
//! An MCP client (Claude Desktop, an IDE agent) gets one tool per catalog op, built from the
//! op's row at run time — name, description, input schema, annotations — so the tool list
//! can never drift from the CLI or the sudoers file. A tool call goes through exactly the
//! CLI's flow: JSON arguments become the same raw strings the CLI parses, [`Invocation::new`]
//! validates them with the kinds' regexes (the ones in sudoers), and [`Engine::execute`]
//! applies the same policy, confirmation gate, prechecks and task handling, and every call
//! leaves an audit record marked `via: mcp`.
//!
//! What the model cannot do here that a person at a terminal can: answer a confirmation
//! prompt. A confirm op runs only when the call carries `confirm` with the exact phrase, and
//! the refusal tells the model to get that phrase from its human.
//!
//! How failures reach the client (MCP distinguishes two channels):
//! - arguments that do not fit the tool (bad VMID, unknown property, a variant's missing
//!   switch) are, since protocol 2025-11-25 (SEP-1303), a tool result with `isError: true`
//!   carrying the structured error, so the model can read and correct them; a session that
//!   negotiated an older version gets a JSON-RPC *invalid params* error (-32602) instead.
//!   Either way nothing was sent. An unknown tool stays a protocol error;
//! - everything else — policy refusals, a missing or wrong phrase, rate limits, a failing
//!   precheck, a remote failure, a lost connection — is a tool result with `isError: true`
//!   whose text says what happened and what to do next, because clients show that text to
//!   the model while they often render protocol errors opaquely.
//!
//! One SSH connection serves the whole session: opened on the first call that
//! needs the host, shared by concurrent calls (each on its own channel; the session caps
//! them at 8), and dropped when a call fails with a connection error so that the next call
//! opens a fresh one. A *read* that failed on a connection opened before it is retried once
//! on a fresh connection; anything that may have changed state is never retried silently.
//!
//! On SIGTERM, SIGINT or SIGHUP the server takes no more calls, lets the calls in flight
//! finish for a few seconds, and exits 0; every command it sent has an audit record, its
//! result or `interrupted` (`shutdown`).
//!
//! Layer: mcp. May import: `audit`, `base`, `catalog`, `config`, `engine`, `output`, `policy`,
//! `remote`, `ssh`, `views`.

use rmcp::ServiceExt;

use crate::base::error::{Error, Result};
use crate::catalog::Profile;

mod args;
mod cancel;
mod compact;
mod health;
mod link;
mod progress;
mod schema;
mod server;
mod shutdown;
mod wire;

use args::failure_doc;
pub use args::{failure_text, integral, invocation, raw_values};
pub use compact::ToolSet;
use link::CallLink;
pub use link::Link;
pub use progress::Progress;
use schema::integer_range;
pub use schema::{
    Shared, ToolSpec, folded_into, input_schema, lean_tools, offered, output_schema, route,
    takes_confirm, tool_spec, tool_specs,
};
pub use server::Server;
pub use wire::{Cancels, LineTransport, MAX_LINE_BYTES};

/// Reads what the account may run on its host (the preflight's reading, which the mcp layer
/// may not import): given the connection and the account, a JSON document for the
/// `pxagent://rules` resource. The CLI passes the preflight's reader (`host::preflight::rules_json`).
pub type HostRulesFn = fn(
    crate::remote::Remote,
    String,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<serde_json::Value>> + Send>,
>;

/// How `pxagent mcp` was asked to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Offer only the tools of this profile.
    pub profile: Profile,
    /// Print the tool list (name, risk, description; tab-separated) and exit.
    pub list_tools: bool,
    /// Which tools (`--tools`).
    pub tools: ToolSet,
    /// Output schemas and the long descriptions in the tool list (`--output-schemas`).
    pub full: bool,
    /// The host's rules for `pxagent://rules` (`None`: the resource holds the local ones only).
    pub host_rules: Option<HostRulesFn>,
}

/// `pxagent mcp [--profile P] [--list-tools]`: serve MCP on stdin/stdout until the client
/// closes stdin or a signal ends it (exit 0), or print the tool list and exit.
pub fn serve(ctx: crate::config::context::Context, opts: Options) -> Result<u8> {
    let Options {
        profile,
        list_tools,
        tools,
        full,
        host_rules,
    } = opts;
    let policy = ctx.policy;
    let specs = tool_specs(&policy, profile);
    if list_tools {
        let mut text = String::new();
        for s in &specs {
            text.push_str(&format!(
                "{}\t{}\t{}\n",
                s.name,
                s.op.risk.name(),
                s.description
            ));
        }
        let h = health::spec(false);
        text.push_str(&format!(
            "{}	read	{}
",
            h.name,
            h.description.as_deref().unwrap_or_default()
        ));
        crate::output::write_raw(&text);
        return Ok(0);
    }
    // Resolve the host before serving: a server without a host would only fail every call.
    let target = crate::config::context::target_of(&ctx.connect, &ctx.config)?;
    let runtime = crate::base::runtime::runtime()?;
    let ended = runtime.block_on(async move {
        crate::output::write_stderr(&format!(
            "pxagent mcp: {} tools for {} (profile {}, policy: {}); speaking MCP on stdin/stdout\n",
            specs.len(),
            target.display(),
            profile.name(),
            policy.source()
        ));
        let mut server = Server::with_tools(policy, profile, target, &tools, full);
        server.host_rules = host_rules;
        let link = server.link.clone();
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let transport = LineTransport::new(stdin, stdout, server.cancels.clone());
        // Signals end the session gracefully: see `shutdown`.
        let service = match shutdown::Draining::new(server).serve(transport).await {
            Ok(s) => s,
            // The client went away before `initialize` (`pxagent mcp </dev/null`): nothing
            // was asked, nothing to say.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                tracing::info!(target: "pxagent::mcp", "stdin closed before initialize");
                return Ok(0);
            }
            Err(e) => return Err(Error::Internal(format!("MCP initialization failed: {e}"))),
        };
        let ended = shutdown::serve(service).await;
        link.close().await;
        ended
    });
    shutdown::shut_down(runtime);
    ended
}

#[cfg(test)]
mod tests;
