//! The rmcp server handler: initialize, list tools, call a tool through the engine
//! (progress notifications, audit `via: mcp`). The only file that implements rmcp's traits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use super::*;
use crate::audit::Via;
use crate::catalog::{self, OPS, Profile, Risk};
use crate::engine::{Engine, Trail};
use crate::error::{Error, Result};
use crate::invocation::Invocation;
use crate::policy::Policy;
use crate::ssh::Target;

/// The MCP server of one stdio session.
pub struct Server {
    pub(super) policy: Policy,
    pub(super) profile: Profile,
    pub(super) link: Arc<Link>,
    pub(super) host: String,
    pub(super) account: String,
    pub(super) tools: Vec<(ToolSpec, Tool)>,
    /// How long a guest command may run (`--timeout`, else [`crate::exec::DEFAULT_TIMEOUT`]).
    pub(super) exec_timeout: Duration,
}

impl Server {
    /// A server for this policy, profile and host; nothing is connected yet.
    pub fn new(policy: Policy, profile: Profile, target: Target) -> Server {
        let tools = tool_specs(&policy, profile)
            .into_iter()
            .map(|s| {
                let t = s.to_tool();
                (s, t)
            })
            .collect();
        Server {
            exec_timeout: target
                .command_timeout
                .unwrap_or(crate::exec::DEFAULT_TIMEOUT),
            host: target.display(),
            account: target.user.clone(),
            link: Arc::new(Link::new(target)),
            policy,
            profile,
            tools,
        }
    }

    /// Run one validated call: the engine, once more for a read whose connection had died.
    pub(super) async fn run(
        &self,
        inv: &Invocation,
        confirm: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<crate::engine::Done> {
        let call = CallLink::new(&self.link);
        let first = self.run_once(&call, inv, confirm, trail, progress).await;
        let Err(Error::Connection(_)) = &first else {
            return first;
        };
        let Some((generation, fresh)) = call.used() else {
            // It never got a connection: connecting itself failed.
            return first;
        };
        self.link.discard(generation).await;
        // A read on a connection that was already open may have hit a connection that died
        // while idle (sshd restarted, network blip): one retry on a fresh connection. A call
        // that may have changed state is never repeated: the model is told to check.
        if inv.op.risk != Risk::Read || fresh {
            return first;
        }
        tracing::info!(
            target: "pxagent::mcp",
            "{}: connection lost, retrying the read on a new connection",
            inv.op.tool_name()
        );
        let retry = CallLink::new(&self.link);
        let second = self.run_once(&retry, inv, confirm, trail, progress).await;
        if let (Err(Error::Connection(_)), Some((g, _))) = (&second, retry.used()) {
            self.link.discard(g).await;
        }
        // Both failures, each with its own times (a dead link's 45 s, then a connect's 10 s),
        // so the model is not told only the last one.
        match (first, second) {
            (Err(Error::Connection(lost)), Err(Error::Connection(again))) => {
                Err(Error::Connection(format!(
                    "{lost}; the read was retried on a new connection, which failed too: {again}"
                )))
            }
            (_, second) => second,
        }
    }

    /// One attempt over one connection. Commands inside guests have their own flow (several
    /// remote steps) in [`crate::exec`]; the MCP server offers them without file sync (a
    /// push or pull would read or write files of the machine the server runs on).
    pub(super) async fn run_once(
        &self,
        call: &CallLink<'_>,
        inv: &Invocation,
        confirm: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<crate::engine::Done> {
        let engine = Engine {
            policy: &self.policy,
            connector: call,
            interactive: false,
        };
        if inv.op.risk != Risk::Exec {
            return engine.execute(inv, confirm, trail, progress).await;
        }
        let data = if inv.op.runs_guest_command() {
            let value = |k: &str| inv.values.get(k).cloned();
            let req = crate::exec::Request {
                op: inv.op,
                vmid: value("vmid").unwrap_or_default(),
                node: value("node"),
                argv: catalog::kind::guest_argv(&value("command").unwrap_or_default()),
                stdin: value("input_data").map(String::into_bytes),
                push: Vec::new(),
                pull: Vec::new(),
                force: false,
                timeout: self.exec_timeout,
            };
            crate::exec::run(&engine, &req, confirm, trail).await?
        } else {
            crate::exec::exec_status(&engine, inv).await?
        };
        Ok(crate::engine::Done {
            data,
            warnings: Vec::new(),
        })
    }

    /// Handle `tools/call`.
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let started = Instant::now();
        let name = request.name.as_ref();
        let Some(op) = OPS.iter().find(|o| o.tool_name() == name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", catalog::kind::printable(name)),
                None,
            ));
        };
        let mut trail = Trail {
            audited: true,
            host: Some(self.host.clone()),
            account: Some(self.account.clone()),
            via: Via::Mcp,
            ..Trail::default()
        };
        let args = request.arguments.unwrap_or_default();
        let finish = |trail: &Trail, err: Option<&Error>| {
            let code = err.map_or(0, Error::exit_code);
            trail.record(op.id, Via::Mcp, err, code, started.elapsed());
            tracing::info!(
                target: "pxagent::mcp",
                "{name}: {} ({:.2} ms)",
                err.map_or("ok", Error::kind),
                started.elapsed().as_secs_f64() * 1000.0
            );
        };
        // Not offered is not the same as unknown: it is a refusal, and audited as one.
        if !self.tools.iter().any(|(s, _)| s.op == *op) {
            let why = if self.profile.allows(op.risk) {
                format!("the local policy ({}) denies it", self.policy.source())
            } else {
                format!(
                    "this server runs with profile {}, which has no {} ops",
                    self.profile.name(),
                    op.risk.name()
                )
            };
            let err = Error::Policy(format!("{name} is not offered: {why}"));
            finish(&trail, Some(&err));
            let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
                "{err}. Nothing was sent; do not retry. Tell the user if they need it."
            ))]);
            r.structured_content = Some(failure_doc(&err, op.id, &self.host));
            return Ok(r);
        }
        let (inv, confirm) = match invocation(op, &args, takes_confirm(&self.policy, op)) {
            Ok(v) => v,
            Err(err) => {
                finish(&trail, Some(&err));
                return Err(ErrorData::invalid_params(
                    err.to_string(),
                    Some(failure_doc(&err, op.id, &self.host)),
                ));
            }
        };

        // Task log lines go to the client as progress notifications when it asked for them
        // (it sent a progressToken); the engine's callback is synchronous, so lines travel
        // through a channel to this task, which sends them between polls of the call.
        let token = context.meta.get_progress_token();
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut progress = move |line: &str| {
            let _ = tx.send(line.to_string());
        };
        let mut sent = 0u64;
        let notify = |n: u64, line: String| {
            let peer = context.peer.clone();
            let token = token.clone();
            async move {
                if let Some(token) = token {
                    let _ = peer
                        .notify_progress(
                            ProgressNotificationParam::new(token, n as f64).with_message(line),
                        )
                        .await;
                }
            }
        };
        let outcome = {
            let work = self.run(&inv, confirm.as_deref(), &mut trail, &mut progress);
            tokio::pin!(work);
            loop {
                tokio::select! {
                    result = &mut work => break Some(result),
                    Some(line) = lines.recv() => {
                        sent += 1;
                        notify(sent, line).await;
                    }
                    // The client cancelled (notifications/cancelled). Leaving the loop drops
                    // the call's future and with it its SSH channel: russh closes the
                    // channel, sshd closes the command's pipes and (sudo runs it on a pty
                    // for I/O logging) sudo's pty is hung up, so sudo and the PVE tool get
                    // SIGHUP/EOF. A Proxmox task the tool already handed to the PVE daemons
                    // (a backup worker, say) is not stopped by that: it runs to its end and
                    // shows up in task_list. The session itself stays up.
                    () = context.ct.cancelled() => break None,
                }
            }
        };
        while let Ok(line) = lines.try_recv() {
            sent += 1;
            notify(sent, line).await;
        }
        let result = match outcome {
            Some(r) => r,
            None => {
                let err = Error::Connection(format!(
                    "`{}` was cancelled by the client; it may or may not have completed on the host",
                    inv.display()
                ));
                finish(&trail, Some(&err));
                return Err(ErrorData::internal_error(err.to_string(), None));
            }
        };
        match result {
            Ok(done) => {
                finish(&trail, None);
                let mut doc =
                    json!({"ok": true, "op": op.id, "host": self.host, "data": done.data});
                if !done.warnings.is_empty() {
                    doc["warnings"] = json!(done.warnings);
                }
                let mut text = crate::engine::human(&inv, &done.data);
                for w in &done.warnings {
                    text.push_str(&format!("\nwarning: {w}"));
                }
                let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
                r.structured_content = Some(doc);
                Ok(r)
            }
            Err(err) => {
                finish(&trail, Some(&err));
                let mut r =
                    CallToolResult::error(vec![ContentBlock::text(failure_text(&err, &inv))]);
                r.structured_content = Some(failure_doc(&err, op.id, &self.host));
                Ok(r)
            }
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("pxagent", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Manage the Proxmox VE host {} through pxagent: one tool per operation, each checked against local policy and the host's sudoers. Read tools (vm_list, vm_status, …) change nothing. A DESTRUCTIVE tool runs only with `confirm` set to the exact phrase the human user typed; never invent that phrase.",
                self.host
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools.iter().map(|(_, t)| t.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        self.call(request, context).await.map(Into::into)
    }
}
