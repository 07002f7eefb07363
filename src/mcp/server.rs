//! The rmcp server handler: initialize, list tools, call a tool through the engine
//! (progress notifications, cancellation, audit `via: mcp`). The only file that implements
//! rmcp's traits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::*;
use crate::audit::Via;
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::{OPS, Profile, Risk};
use crate::engine::{Engine, Started, Trail};
use crate::policy::Policy;
use crate::ssh::Target;

/// The MCP server of one stdio session.
pub struct Server {
    pub(super) policy: Policy,
    pub(super) profile: Profile,
    pub(super) link: Arc<Link>,
    pub(super) host: String,
    pub(super) account: String,
    /// The ops this server runs, as tools (the compact set runs them through `run_operation`).
    pub(super) tools: Vec<(ToolSpec, Tool)>,
    /// What `tools/list` answers.
    pub(super) listed: Vec<Tool>,
    /// The compact tool set is served.
    pub(super) compact: bool,
    /// Parameter descriptions the lean list gives once, in the instructions.
    pub(super) shared: Shared,
    /// How long a guest command may run (`--timeout`, else [`crate::engine::guest::DEFAULT_TIMEOUT`]).
    pub(super) exec_timeout: Duration,
    /// The request ids the client cancelled (noted by the [`LineTransport`]).
    pub cancels: Arc<Cancels>,
    /// Reads the host's rules for `pxagent://rules` (`None`: the local ones only).
    pub host_rules: Option<super::HostRulesFn>,
    /// The session's taint (policy `taint: after_exec`).
    pub(super) taint: crate::policy::Taint,
}

impl Server {
    /// A server for this policy, profile and host; nothing is connected yet.
    pub fn new(policy: Policy, profile: Profile, target: Target) -> Server {
        Server::with_tools(policy, profile, target, &ToolSet::PerOp(Vec::new()), false)
    }

    /// A server offering `set`, lean or (`full`) with output schemas and long descriptions.
    pub fn with_tools(
        policy: Policy,
        profile: Profile,
        target: Target,
        set: &ToolSet,
        full: bool,
    ) -> Server {
        let compact = *set == ToolSet::Compact;
        let specs: Vec<ToolSpec> = tool_specs(&policy, profile)
            .into_iter()
            .filter(|s| compact || set.lists(s))
            .collect();
        // The lean list says a description many tools share once, in the instructions.
        let shared = match compact || full {
            true => Shared::default(),
            false => Shared::of(&specs),
        };
        let tools: Vec<(ToolSpec, Tool)> = specs
            .into_iter()
            .map(|s| {
                let t = s.to_tool(full, &shared);
                (s, t)
            })
            .collect();
        let mut listed: Vec<Tool> = match (compact, full) {
            (true, _) => compact::tools(),
            (false, true) => tools.iter().map(|(_, t)| t.clone()).collect(),
            (false, false) => {
                let specs: Vec<ToolSpec> = tools.iter().map(|(s, _)| s.clone()).collect();
                super::schema::lean_tools(&specs, &shared)
            }
        };
        listed.push(health::spec(full));
        Server {
            exec_timeout: target
                .command_timeout
                .unwrap_or(crate::engine::guest::DEFAULT_TIMEOUT),
            host: target.display(),
            account: target.user.clone(),
            link: Arc::new(Link::new(target)),
            policy,
            profile,
            tools,
            listed,
            compact,
            shared,
            cancels: Arc::default(),
            host_rules: None,
            taint: Default::default(),
        }
    }

    /// Run one validated call: the engine, once more for a read whose connection had died.
    pub(super) async fn run(
        &self,
        inv: &Invocation,
        confirm: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
        started: &std::sync::Mutex<Started>,
    ) -> Result<crate::engine::Done> {
        let call = CallLink::new(&self.link);
        let first = self
            .run_once(&call, inv, confirm, trail, progress, started)
            .await;
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
        let second = self
            .run_once(&retry, inv, confirm, trail, progress, started)
            .await;
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
    /// remote steps) in [`crate::engine::guest`]; the MCP server offers them without file sync (a
    /// push or pull would read or write files of the machine the server runs on).
    pub(super) async fn run_once(
        &self,
        call: &CallLink<'_>,
        inv: &Invocation,
        confirm: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
        started: &std::sync::Mutex<Started>,
    ) -> Result<crate::engine::Done> {
        let engine = Engine {
            policy: &self.policy,
            connector: call,
            interactive: false,
            taint: Some(&self.taint),
        };
        if inv.op.risk != Risk::Exec {
            return engine
                .execute_watched(inv, confirm, trail, progress, Some(started))
                .await;
        }
        engine
            .run(inv, confirm, trail, progress, self.exec_timeout)
            .await
    }

    /// Handle `tools/call`: a compact tool, or an op's tool.
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        if request.name == health::NAME {
            return Ok(self.call_health(&args).await);
        }
        if !self.compact {
            return self.call_op(request.name.as_ref(), args, context).await;
        }
        let text = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let offered = || self.tools.iter().map(|(s, _)| s).collect::<Vec<_>>();
        let unknown = |tool: &str| {
            let err = Error::usage(format!(
                "no operation '{}' here: find_operation lists the tool names this server runs",
                crate::base::text::printable(tool)
            ));
            Ok(failure_result(&err, "", &self.host, err.to_string()))
        };
        match request.name.as_ref() {
            compact::FIND => {
                let doc = compact::find(&offered(), &text("query"));
                let n = doc["count"].clone();
                Ok(result_of(doc, format!("{n} operations"), false))
            }
            compact::DESCRIBE => {
                let tool = text("tool");
                match self.tools.iter().find(|(s, _)| s.name == tool) {
                    Some((s, _)) => Ok(result_of(
                        compact::describe(s),
                        s.description.clone(),
                        false,
                    )),
                    None => unknown(&tool),
                }
            }
            compact::RUN => {
                let tool = text("tool");
                if !self.tools.iter().any(|(s, _)| s.name == tool) {
                    return unknown(&tool);
                }
                let inner = match args.get("arguments") {
                    None | Some(Value::Null) => JsonObject::new(),
                    Some(Value::Object(o)) => o.clone(),
                    Some(_) => {
                        let err = Error::usage("`arguments` must be an object");
                        return Ok(failure_result(&err, "", &self.host, err.to_string()));
                    }
                };
                self.call_op(&tool, inner, context).await
            }
            name => self.call_op(name, args, context).await,
        }
    }

    /// Handle a call of [`health::NAME`]: its reads over the session's connection, one audit
    /// record `health`.
    async fn call_health(&self, args: &JsonObject) -> CallToolResult {
        let started = Instant::now();
        let trail = Trail {
            audited: true,
            host: Some(self.host.clone()),
            account: Some(self.account.clone()),
            via: Via::Mcp,
            ..Trail::default()
        };
        let result = async {
            let opts = health::options(args)?;
            let call = CallLink::new(&self.link);
            let remote = crate::engine::Connector::remote(&call).await;
            let remote = match remote {
                Err(e) => return Err(e),
                Ok(r) => r,
            };
            let policy = &self.policy;
            let r = crate::engine::health::report(
                &remote,
                &|op| crate::engine::health::denied_by(policy, op),
                &opts,
            )
            .await;
            if let (Err(Error::Connection(_)), Some((g, _))) = (&r, call.used()) {
                self.link.discard(g).await;
            }
            r
        }
        .await;
        let code = match &result {
            Ok(r) if !r.healthy => 5,
            Ok(_) => 0,
            Err(e) => e.exit_code(),
        };
        trail.record(
            health::NAME,
            Via::Mcp,
            result.as_ref().err(),
            code,
            started.elapsed(),
        );
        match result {
            Ok(report) => {
                let doc = crate::engine::health::document(&report, &self.host);
                let text = crate::engine::health::human(&doc["data"]);
                result_of(doc, text, false)
            }
            Err(err) => {
                let text = format!("{err}. Nothing was changed.");
                failure_result(&err, health::NAME, &self.host, text)
            }
        }
    }

    /// Handle a call of an op's tool.
    async fn call_op(
        &self,
        name: &str,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let started = Instant::now();
        let Some(op) = OPS.iter().find(|o| o.tool_name() == name && !o.is_step()) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", crate::base::text::printable(name)),
                None,
            ));
        };
        // The lean list folds a path's variants into its base's tool: the values choose. A
        // variant's switch sent as false or null is the base's call without it.
        let op = super::schema::route(op, &args);
        let args: JsonObject = args
            .into_iter()
            .filter(|(k, v)| {
                op.param(k).is_some() || !matches!(v, Value::Bool(false) | Value::Null)
            })
            .collect();
        // SEP-1303: since 2025-11-25 arguments that do not fit are a tool result the model
        // can read and correct; older sessions keep JSON-RPC invalid params. Versions are
        // dates, so they compare as text; rmcp reports the version the client asked for,
        // which is at or above the one agreed on.
        let readable_arguments = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= "2025-11-25");
        let mut trail = Trail {
            audited: true,
            host: Some(self.host.clone()),
            account: Some(self.account.clone()),
            via: Via::Mcp,
            ..Trail::default()
        };
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
        if !self.tools.iter().any(|(s, _)| std::ptr::eq(s.op, op)) {
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
            return Ok(failure_result(
                &err,
                op.id,
                &self.host,
                format!("{err}. Nothing was sent; do not retry. Tell the user if they need it."),
            ));
        }
        let (inv, confirm) = match invocation(op, &args, takes_confirm(&self.policy, op)) {
            Ok(v) => v,
            Err(err) => {
                finish(&trail, Some(&err));
                if readable_arguments {
                    let text = format!(
                        "{err}. Nothing was sent. Correct the arguments (see the tool's input schema) and call {name} again."
                    );
                    return Ok(failure_result(&err, op.id, &self.host, text));
                }
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
        let mut counter = Progress::default();
        let mut notify = |line: String| {
            let notice = counter.line(&line);
            let peer = context.peer.clone();
            let token = token.clone();
            async move {
                if let (Some(token), Some((value, total, message))) = (token, notice) {
                    let mut p = ProgressNotificationParam::new(token, value).with_message(message);
                    p.total = total;
                    let _ = peer.notify_progress(p).await;
                }
            }
        };
        let watch = std::sync::Mutex::new(Started::default());
        let outcome = {
            let mut work =
                Box::pin(self.run(&inv, confirm.as_deref(), &mut trail, &mut progress, &watch));
            let mut session_ended = false;
            let cancelled = loop {
                tokio::select! {
                    result = &mut work => break Ok(result),
                    Some(line) = lines.recv() => notify(line).await,
                    // The token fires when the client cancels this request, and when the
                    // session ends (rmcp cancels every handler after stdin closed). Only the
                    // first stops anything: a client that went away has not asked for that,
                    // so the call runs to its end and is audited as usual.
                    () = context.ct.cancelled(), if !session_ended => {
                        if self.cancels.take(&context.id) {
                            break Err(());
                        }
                        session_ended = true;
                    }
                }
            };
            match cancelled {
                Ok(result) => Ok(result),
                Err(()) => {
                    // The call may have ended just now: then its own outcome stands.
                    let done = tokio::select! {
                        biased;
                        r = &mut work => Some(r),
                        () = std::future::ready(()) => None,
                    };
                    // Dropping the call drops its command's channel: the SSH layer ends the
                    // command on the host.
                    drop(work);
                    let stopped = match &done {
                        Some(_) => super::cancel::Stopped {
                            upid: None,
                            what: "the call had ended on the host before the cancel arrived"
                                .to_string(),
                        },
                        None => self.stop_started(&inv, &watch, trail.begun.is_some()).await,
                    };
                    Err((done, stopped))
                }
            }
        };
        while let Ok(line) = lines.try_recv() {
            notify(line).await;
        }
        let result = match outcome {
            Ok(r) => r,
            Err((ended, stopped)) => {
                // The client cancelled: no answer goes out (rmcp drops it), but the audit
                // record says what was cancelled and what became of its task.
                if trail.upid.is_none() {
                    trail.upid = stopped.upid.clone();
                }
                let how = match &ended {
                    Some(Ok(_)) => " (it had completed)",
                    Some(Err(_)) => "",
                    None => " (it may or may not have completed on the host)",
                };
                let err = Error::Remote(format!(
                    "`{}` was cancelled by the client{how}: {}",
                    inv.display(),
                    stopped.what
                ));
                tracing::info!(target: "pxagent::mcp", "{name}: cancelled: {}", stopped.what);
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
                Ok(result_of(doc, text, false))
            }
            Err(err) => {
                finish(&trail, Some(&err));
                Ok(failure_result(
                    &err,
                    op.id,
                    &self.host,
                    failure_text(&err, &inv),
                ))
            }
        }
    }
}

/// A tool result: the JSON document as structured content and, as MCP asks, serialized in the
/// first text block; what a person (or the model) reads second.
pub(super) fn result_of(doc: Value, text: String, is_error: bool) -> CallToolResult {
    let blocks = vec![
        ContentBlock::text(doc.to_string()),
        ContentBlock::text(text),
    ];
    let mut r = if is_error {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    };
    r.structured_content = Some(doc);
    r
}

/// A failed call as a tool result (`isError: true`) with the failure document.
pub(super) fn failure_result(err: &Error, op: &str, host: &str, text: String) -> CallToolResult {
    result_of(failure_doc(err, op, host), text, true)
}

/// What every session is told once: how to use the tools safely (the essentials of `pxagent
/// skill`), and what the lean tool list leaves out of each tool.
pub(super) fn instructions(host: &str, compact: bool, shared: &Shared) -> String {
    let tools = if compact {
        "Find an operation with find_operation, read its arguments with describe_operation, run it with run_operation (same checks as its own tool)."
    } else {
        "One tool per operation; each is checked against the local policy, the host's gate and sudoers."
    };
    format!(
        "Manage the Proxmox VE host {host} through pxagent. {tools} \
`vmid` is the guest's id; every tool on a guest or node also takes an optional `node`, which pxagent finds itself. \
Start with status or preflight when unsure. Read-only tools change nothing. \
Confirmation: a tool whose description says `Confirm: …` runs only with the argument `confirm` set to the exact phrase the human user typed. Call without it, show the user the phrase from the refusal (error kind confirmation_required, phrase_from user), and pass their reply; a wrong one is confirmation_mismatch: ask again; never invent, correct or reuse a phrase. \
Approval: when a result has error kind approval_required, hand its approval_request text to a human approver and pass their signature back as `approval` in the same call; every tool takes `approval`; never make one up. \
Outcomes: connection_failed after a change was sent means the outcome is unknown: check with a read (vm_status, task_list) before trying again, never repeat a change blindly. policy_refused, sudo_refused and rate_limited are final for now: tell the user. invalid_input: correct the arguments as the message says.{}",
        shared.sentence()
    )
}

/// The prompt that carries the skill.
const SKILL_PROMPT: &str = "pxagent-skill";
/// The read-only resources: URI, name, description.
const RESOURCES: &[(&str, &str, &str)] = &[
    (
        "pxagent://catalog",
        "catalog",
        "The operations this server runs: tool, op id, usage, risk and the phrase each needs (JSON).",
    ),
    (
        "pxagent://rules",
        "rules",
        "The account's effective rules (JSON): this server's profile, policy and the operations it offers, denies or asks a phrase for, and under host_rules what the host admits, read as `pxagent preflight` reads it (its sudoers rules, and what its gate's policy denies).",
    ),
    (
        "pxagent://audit/tail",
        "audit tail",
        "The last 50 records of the local audit trail (JSON Lines).",
    ),
];

impl Server {
    /// A resource's text, by URI.
    fn resource_text(&self, uri: &str) -> Option<(String, &'static str)> {
        match uri {
            "pxagent://catalog" => {
                let ops: Vec<Value> = self
                    .tools
                    .iter()
                    .map(|(s, _)| {
                        json!({
                            "tool": s.name,
                            "op": s.op.id,
                            "usage": format!("pxagent {}", s.op.usage()),
                            "about": s.op.about,
                            "risk": s.op.risk.name(),
                            "phrase": s.op.confirm.map(|c| c.phrase),
                        })
                    })
                    .collect();
                Some((Value::Array(ops).to_string(), "application/json"))
            }
            "pxagent://rules" => {
                let offered: Vec<&str> = self.tools.iter().map(|(s, _)| s.op.id).collect();
                let denied: Vec<&str> = OPS
                    .iter()
                    .filter(|op| !op.is_step() && !offered.contains(&op.id))
                    .map(|op| op.id)
                    .collect();
                let phrase: Vec<&str> = self
                    .tools
                    .iter()
                    .filter(|(s, _)| s.confirm)
                    .map(|(s, _)| s.op.id)
                    .collect();
                let doc = json!({
                    "host": self.host,
                    "account": self.account,
                    "profile": self.profile.name(),
                    "policy": self.policy.source(),
                    "offered": offered,
                    "not_offered": denied,
                    "needs_phrase": phrase,
                });
                Some((doc.to_string(), "application/json"))
            }
            "pxagent://audit/tail" => {
                let text = crate::audit::default_path()
                    .and_then(|p| std::fs::read_to_string(p).ok())
                    .unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(50)..].join("\n");
                Some((tail, "application/jsonl"))
            }
            _ => None,
        }
    }
}

impl ServerHandler for Server {
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::ListPromptsResult, ErrorData> {
        Ok(rmcp::model::ListPromptsResult::with_all_items(vec![
            rmcp::model::Prompt::new(
                SKILL_PROMPT,
                Some(
                    "How to use pxagent safely: its operations, phrases, approvals, exit codes and workflows (the skill `pxagent skill` prints)",
                ),
                None,
            ),
        ]))
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::GetPromptResponse, ErrorData> {
        if request.name != SKILL_PROMPT {
            return Err(ErrorData::invalid_params(
                format!(
                    "no prompt '{}'",
                    crate::base::text::printable(&request.name)
                ),
                None,
            ));
        }
        let text = crate::catalog::skill::render(self.profile);
        Ok(
            rmcp::model::GetPromptResult::new(vec![rmcp::model::PromptMessage::new_text(
                rmcp::model::Role::User,
                text,
            )])
            .with_description("The pxagent skill")
            .into(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::ListResourcesResult, ErrorData> {
        Ok(rmcp::model::ListResourcesResult::with_all_items(
            RESOURCES
                .iter()
                .map(|(uri, name, about)| {
                    rmcp::model::Resource::new(*uri, *name).with_description(*about)
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::ReadResourceResponse, ErrorData> {
        let Some((mut text, _mime)) = self.resource_text(&request.uri) else {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource '{}'",
                    crate::base::text::printable(&request.uri)
                ),
                None,
            ));
        };
        if request.uri == "pxagent://rules"
            && let Some(read) = self.host_rules
        {
            // What the host itself admits, read as preflight reads it (one connection, the
            // server's own); a host that cannot be read says why in the document.
            let host = match self.link.get().await {
                Ok((_, remote, _)) => read(remote, self.account.clone())
                    .await
                    .unwrap_or_else(|e| json!({"error": e.to_string()})),
                Err(e) => json!({"error": e.to_string()}),
            };
            if let Ok(mut doc) = serde_json::from_str::<Value>(&text) {
                doc["host_rules"] = host;
                text = doc.to_string();
            }
        }
        Ok(
            rmcp::model::ReadResourceResult::new(vec![rmcp::model::ResourceContents::text(
                text,
                request.uri.clone(),
            )])
            .into(),
        )
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("pxagent", env!("CARGO_PKG_VERSION")))
        .with_instructions(instructions(&self.host, self.compact, &self.shared))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        self.call(request, context).await.map(Into::into)
    }
}
