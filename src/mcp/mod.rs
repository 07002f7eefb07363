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
//!   switch) are a JSON-RPC *invalid params* error: nothing was sent and retrying with the
//!   same arguments cannot work;
//! - everything else — policy refusals, a missing or wrong phrase, rate limits, a failing
//!   precheck, a remote failure, a lost connection — is a tool result with `isError: true`
//!   whose text says what happened and what to do next, because clients show that text to
//!   the model while they often render protocol errors opaquely.
//!
//! One SSH connection serves the whole session (design §5): opened on the first call that
//! needs the host, shared by concurrent calls (each on its own channel; the session caps
//! them at 8), and dropped when a call fails with a connection error so that the next call
//! opens a fresh one. A *read* that failed on a connection opened before it is retried once
//! on a fresh connection; anything that may have changed state is never retried silently.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

use crate::audit::Via;
use crate::catalog::{self, Area, How, Kind, OPS, Op, Param, Profile, Risk, Select};
use crate::engine::{Connector, Engine, Trail};
use crate::error::{Error, Result};
use crate::invocation::Invocation;
use crate::policy::{Action, Policy};
use crate::remote::Remote;
use crate::ssh::{Session, Target};

/// How `pxagent mcp` was asked to run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Offer only the tools of this profile.
    pub profile: Profile,
    /// Print the tool list (name, risk, description; tab-separated) and exit.
    pub list_tools: bool,
}

/// `pxagent mcp [--profile P] [--list-tools]`: serve MCP on stdin/stdout until the client
/// closes stdin (exit 0), or print the tool list and exit.
pub fn serve(ctx: crate::context::Context, opts: Options) -> Result<u8> {
    let Options {
        profile,
        list_tools,
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
        crate::output::write_raw(&text);
        return Ok(0);
    }
    // Resolve the host before serving: a server without a host would only fail every call.
    let target = crate::context::target_of(&ctx.connect, &ctx.config)?;
    let runtime = crate::context::runtime()?;
    runtime.block_on(async move {
        crate::output::write_stderr(&format!(
            "pxagent mcp: {} tools for {} (profile {}, policy: {}); speaking MCP on stdin/stdout\n",
            specs.len(),
            target.display(),
            profile.name(),
            policy.source()
        ));
        let server = Server::new(policy, profile, target);
        let link = server.link.clone();
        let service = server
            .serve(rmcp::transport::stdio_pipes())
            .await
            .map_err(|e| Error::Internal(format!("MCP initialization failed: {e}")))?;
        let ended = service.waiting().await;
        link.close().await;
        match ended {
            Ok(reason) => {
                tracing::info!(target: "pxagent::mcp", "session ended ({reason:?})");
                Ok(0)
            }
            Err(e) => Err(Error::Internal(format!("MCP session failed: {e}"))),
        }
    })
}

/// One MCP tool, derived from one catalog op (independent of rmcp, for tests and docs).
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The catalog row.
    pub op: &'static Op,
    /// `vm_start`.
    pub name: String,
    /// What the model reads: what it does, its risk, what it needs.
    pub description: String,
    /// The JSON Schema of the arguments (an object schema, `additionalProperties: false`).
    pub input_schema: Value,
    /// `readOnlyHint`: the op only observes.
    pub read_only: bool,
    /// `destructiveHint`: the op may destroy data (risk `confirm`).
    pub destructive: bool,
    /// `idempotentHint`: calling it again with the same arguments has no further effect.
    /// Only reads claim it; a second `vm_start` is harmless on PVE but still a new task.
    pub idempotent: bool,
}

/// Whether an op is offered as a tool: it is a command of its own (not a step of another
/// op's flow), the profile has it, and the local policy does not refuse it whatever its
/// arguments.
pub fn offered(policy: &Policy, profile: Profile, op: &Op) -> bool {
    !op.is_step() && profile.allows_op(op) && policy.allows_listing(op)
}

/// The tools a server with this policy and profile offers, in catalog order.
pub fn tool_specs(policy: &Policy, profile: Profile) -> Vec<ToolSpec> {
    OPS.iter()
        .filter(|op| offered(policy, profile, op))
        .map(|op| tool_spec(op, takes_confirm(policy, op)))
        .collect()
}

/// Whether a call of this op may need a phrase: the catalog soft-blacklists it, or a local
/// `confirm` rule does.
fn takes_confirm(policy: &Policy, op: &Op) -> bool {
    op.confirm.is_some()
        || policy
            .rule_for(op.id)
            .is_some_and(|(_, r)| r.action == Action::Confirm)
}

/// The tool for one op. `confirm` adds the optional `confirm` property.
pub fn tool_spec(op: &'static Op, confirm: bool) -> ToolSpec {
    ToolSpec {
        op,
        name: op.tool_name(),
        description: description(op, confirm),
        input_schema: input_schema(op, confirm),
        read_only: op.risk == Risk::Read,
        destructive: op.risk == Risk::Confirm,
        idempotent: op.risk == Risk::Read,
    }
}

/// The inclusive range of a kind that travels as a JSON integer.
fn integer_range(kind: Kind) -> Option<(u64, u64)> {
    match kind {
        Kind::Vmid => Some((catalog::kind::VMID_MIN, catalog::kind::VMID_MAX)),
        Kind::Seconds => Some((0, 9999)),
        Kind::Count => Some((1, 99_999)),
        Kind::Mebibytes => Some((16, 4_194_304)),
        Kind::Cores => Some((1, 512)),
        Kind::Gibibytes => Some((1, 65_536)),
        Kind::Pid => Some((1, 9_999_999_999)),
        _ => None,
    }
}

/// The schema of one parameter's value.
fn param_schema(op: &Op, p: &Param) -> Value {
    let mut s = match p.kind {
        Kind::Flag => json!({"type": "boolean"}),
        // One argv word per element, passed to the guest as they are (no shell).
        Kind::GuestArgv => json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
        Kind::Choice(choices) => {
            let mut names: Vec<&str> = Vec::new();
            for c in choices {
                if !names.contains(&c.cli) {
                    names.push(c.cli);
                }
            }
            json!({"type": "string", "enum": names})
        }
        kind => match integer_range(kind) {
            Some((min, max)) => json!({"type": "integer", "minimum": min, "maximum": max}),
            // The kind's own regex (the one in sudoers), anchored; extra checks such as
            // reserved snapshot names are made by the server.
            None if kind.regex() == ".*" => json!({"type": "string"}),
            None => json!({"type": "string", "pattern": format!("^({})$", kind.regex())}),
        },
    };
    let mut text = match p.how {
        How::Flag => p.help.to_string(),
        _ => format!("{}: {}", p.help, p.kind.describe()),
    };
    match p.how {
        How::Defaulted(d) => {
            text.push_str(&format!(" (default {d})"));
            s["default"] = match integer_range(p.kind) {
                Some(_) => d.parse::<u64>().map(Value::from).unwrap_or(json!(d)),
                None => json!(d),
            };
        }
        How::NextId => text.push_str(" (default: the cluster's next free VMID)"),
        How::BasenameOf(of) => text.push_str(&format!(" (default: the file name in {of})")),
        _ => {}
    }
    for sel in op.select {
        match sel {
            Select::Flag(f) if *f == p.name => {
                s["const"] = json!(true);
                text.push_str(" (must be true: it selects this tool)");
            }
            Select::Contains(name, needle, _) if *name == p.name => {
                s["allOf"] = json!([{"pattern": escape_pattern(needle)}]);
                text.push_str(&format!(" (must contain '{needle}')"));
            }
            _ => {}
        }
    }
    s["description"] = json!(text);
    s
}

/// A literal as an (unanchored) JSON Schema pattern.
fn escape_pattern(lit: &str) -> String {
    let mut out = String::new();
    for c in lit.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether a parameter must be given in a call of this op.
fn required(op: &Op, p: &Param) -> bool {
    matches!(p.how, How::Positional | How::Required)
        || op
            .select
            .iter()
            .any(|s| matches!(s, Select::Flag(f) if *f == p.name))
}

/// The input schema of an op's tool.
pub fn input_schema(op: &Op, confirm: bool) -> Value {
    let mut props = Map::new();
    let mut req: Vec<&str> = Vec::new();
    for p in op.params {
        props.insert(p.name.to_string(), param_schema(op, p));
        if required(op, p) {
            req.push(p.name);
        }
    }
    if confirm {
        props.insert(
            "confirm".into(),
            json!({
                "type": "string",
                "description": "the exact confirmation phrase, typed by the human user (never made up): call without it first to learn the phrase",
            }),
        );
    }
    json!({
        "type": "object",
        "properties": props,
        "required": req,
        "additionalProperties": false,
    })
}

/// The description a model reads.
fn description(op: &Op, confirm: bool) -> String {
    let mut s = format!("{}.", op.about.trim_end_matches('.'));
    s.push_str(match op.risk {
        Risk::Read => " Read-only: changes nothing.",
        Risk::Change => " Changes state on the Proxmox host.",
        Risk::Confirm => " DESTRUCTIVE or hard to undo.",
        Risk::Exec => " Acts inside the guest, as root there; rate-limited.",
    });
    let needs: Vec<&str> = op
        .params
        .iter()
        .filter(|p| required(op, p))
        .map(|p| p.name)
        .collect();
    if !needs.is_empty() {
        s.push_str(&format!(" Needs: {}.", needs.join(", ")));
    }
    let optional: Vec<&str> = op
        .params
        .iter()
        .filter(|p| !required(op, p))
        .map(|p| p.name)
        .collect();
    if !optional.is_empty() {
        s.push_str(&format!(" Optional: {}.", optional.join(", ")));
    }
    let siblings = catalog::ops_at(op.cli);
    if siblings.len() > 1 {
        let when: Vec<String> = op
            .select
            .iter()
            .map(|sel| match sel {
                Select::Flag(f) => format!("{f}: true"),
                Select::Contains(p, needle, _) => format!("a {p} containing '{needle}'"),
            })
            .collect();
        if !when.is_empty() {
            s.push_str(&format!(" Only for {}.", when.join(" and ")));
        }
    }
    if let Some(c) = op.confirm {
        s.push_str(&format!(
            " Runs only when `confirm` is exactly `{}`; that phrase must come from the human user, never from you: call without `confirm` to get the exact phrase, ask the user to reply with it, then call again passing it as `confirm`.",
            c.phrase.replace('{', "<").replace('}', ">")
        ));
    } else if confirm {
        s.push_str(" Local policy requires a confirmation phrase from the human user: call without `confirm` to learn it, ask the user, then pass their reply as `confirm`.");
    }
    if op.runs_guest_command() {
        s.push_str(" `command` is the program and its arguments as an array of strings (no shell). Waits for the command to end and returns its exit code and output.");
    } else if matches!(op.risk, Risk::Change | Risk::Confirm) {
        s.push_str(" Waits for the Proxmox task to end.");
    }
    s
}

impl ToolSpec {
    /// The rmcp tool.
    fn to_tool(&self) -> Tool {
        let schema = match &self.input_schema {
            Value::Object(o) => o.clone(),
            _ => JsonObject::new(),
        };
        Tool::new(
            self.name.clone(),
            self.description.clone(),
            Arc::new(schema),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(self.read_only)
                .destructive(self.destructive)
                .idempotent(self.idempotent)
                .open_world(false),
        )
    }
}

/// Turn a tool call's JSON arguments into the raw strings the CLI would have parsed, plus
/// the `confirm` phrase. Integers become decimal strings (numeric strings are accepted as
/// they are); `true` becomes a present switch (`"1"`) and `false` an absent one; `null`
/// means absent. Anything else that does not fit is [`Error::Usage`].
pub fn raw_values(
    op: &'static Op,
    args: &Map<String, Value>,
    takes_confirm: bool,
) -> Result<(BTreeMap<&'static str, String>, Option<String>)> {
    let tool = op.tool_name();
    let mut raw = BTreeMap::new();
    let mut confirm = None;
    for (key, value) in args {
        if key == "confirm" && takes_confirm {
            match value {
                Value::String(s) => confirm = Some(s.clone()),
                Value::Null => {}
                _ => return Err(Error::usage(format!("{tool}: `confirm` must be a string"))),
            }
            continue;
        }
        let Some(p) = op.param(key) else {
            let mut names: Vec<&str> = op.params.iter().map(|p| p.name).collect();
            if takes_confirm {
                names.push("confirm");
            }
            return Err(Error::usage(format!(
                "{tool} takes no argument '{}'; it takes: {}",
                catalog::kind::printable(key),
                names.join(", ")
            )));
        };
        let bad =
            |what: &str| Error::usage(format!("{tool}: `{}` must be {what}, not {value}", p.name));
        match (p.kind, value) {
            (_, Value::Null) => {}
            (Kind::Flag, Value::Bool(true)) => {
                raw.insert(p.name, "1".to_string());
            }
            (Kind::Flag, Value::Bool(false)) => {}
            (Kind::Flag, _) => return Err(bad("true or false")),
            (Kind::GuestArgv, Value::Array(words)) => {
                if !words.iter().all(Value::is_string) {
                    return Err(bad("an array of strings (the program, then its arguments)"));
                }
                raw.insert(p.name, Value::Array(words.clone()).to_string());
            }
            (Kind::GuestArgv, _) => {
                return Err(bad("an array of strings (the program, then its arguments)"));
            }
            (kind, Value::Number(n)) if integer_range(kind).is_some() => match n.as_u64() {
                Some(n) => {
                    raw.insert(p.name, n.to_string());
                }
                None => return Err(bad(&p.kind.describe())),
            },
            (_, Value::String(s)) => {
                raw.insert(p.name, s.clone());
            }
            (kind, _) if integer_range(kind).is_some() => return Err(bad("an integer")),
            _ => return Err(bad("a string")),
        }
    }
    Ok((raw, confirm))
}

/// Validate a tool call into the invocation of exactly this op. Errors are
/// [`Error::Usage`] (they become MCP *invalid params*).
pub fn invocation(
    op: &'static Op,
    args: &Map<String, Value>,
    takes_confirm: bool,
) -> Result<(Invocation, Option<String>)> {
    let (raw, confirm) = raw_values(op, args, takes_confirm)?;
    let tool = op.tool_name();
    // Values that select another variant belong to that variant's tool (a container archive
    // to `backup_restore_ct`), so a call can never run a sibling op in disguise.
    if let Ok(chosen) = catalog::select(op.cli, &raw)
        && chosen != op
        && chosen.select.len() >= op.select.len()
    {
        return Err(Error::usage(format!(
            "these arguments are for {}: call that tool instead of {tool}",
            chosen.tool_name()
        )));
    }
    if !op.selected(&raw) {
        let needs: Vec<String> = op
            .select
            .iter()
            .map(|s| match s {
                Select::Flag(f) => format!("`{f}: true`"),
                Select::Contains(p, needle, _) => format!("a `{p}` containing '{needle}'"),
            })
            .collect();
        return Err(Error::usage(format!(
            "{tool} needs {}",
            needs.join(" and ")
        )));
    }
    Ok((Invocation::new(op, raw)?, confirm))
}

/// The text a model reads for a failed call: what happened, and what to do next.
pub fn failure_text(err: &Error, inv: &Invocation) -> String {
    let tool = inv.op.tool_name();
    match err {
        Error::ConfirmationRequired {
            message,
            phrase,
            hint,
        } => {
            let mut s = format!(
                "{message}\n\nNothing was sent. The phrase must come from the human user, never from you: ask the user to reply `{phrase}`; if they do, call {tool} again with the same arguments plus \"confirm\": \"{phrase}\"."
            );
            if let Some(h) = hint {
                s.push_str(&format!("\nHint: {h}."));
            }
            s
        }
        Error::Policy(m) => format!(
            "{m}. Nothing was sent. This is the local policy of this pxagent installation: do not retry; tell the user if they need it."
        ),
        Error::RateLimited(m) => format!(
            "{m}. Wait until the window resets before calling {tool} again, or tell the user the limit was reached."
        ),
        Error::Connection(m) if inv.op.risk == Risk::Read => format!(
            "{m}. The next call opens a new connection; if this keeps happening the host is unreachable: tell the user."
        ),
        Error::Connection(m) => format!(
            "{m}. `{}` may or may not have happened: do NOT repeat it blindly. Check first with {}.",
            inv.display(),
            check_with(inv)
        ),
        Error::Auth(m) => format!(
            "{m}. pxagent could not log in to the host; the user has to fix the key or known_hosts."
        ),
        Error::SudoRefused(m) => format!(
            "{m}. The host's sudoers does not allow this command; the admin should run `pxagent preflight`."
        ),
        Error::Remote(m) => format!("{m}\n\nThe operation ran on the host and failed."),
        Error::Usage(m) => format!("{m}. Nothing was changed."),
        e => e.to_string(),
    }
}

/// The read tools that tell whether an uncertain action happened.
fn check_with(inv: &Invocation) -> String {
    match (inv.op.area, inv.vmid()) {
        (Area::Vm, Some(id)) => format!("vm_status (vmid {id}) and task_list"),
        (Area::Ct, Some(id)) => format!("ct_status (vmid {id}) and task_list"),
        (_, Some(id)) => format!("task_list (vmid {id})"),
        _ => "task_list".to_string(),
    }
}

/// The `-o json` failure document, as structured content of an error result.
fn failure_doc(err: &Error, op: &str, host: &str) -> Value {
    let mut e =
        json!({"kind": err.kind(), "message": err.to_string(), "exit_code": err.exit_code()});
    if let Error::ConfirmationRequired { phrase, hint, .. } = err {
        e["phrase"] = json!(phrase);
        e["hint"] = json!(hint);
    }
    json!({"ok": false, "op": op, "host": host, "error": e})
}

/// The session's one SSH connection: opened on first use, replaced after a connection error.
pub struct Link {
    target: Target,
    current: tokio::sync::Mutex<Option<(u64, Remote)>>,
    generation: AtomicU64,
}

impl Link {
    fn new(target: Target) -> Link {
        Link {
            target,
            current: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
        }
    }

    /// The open connection, or a new one; the bool says whether this call opened it.
    async fn get(&self) -> Result<(u64, Remote, bool)> {
        // Held while connecting, so concurrent first calls share one connection.
        let mut current = self.current.lock().await;
        if let Some((generation, remote)) = &*current {
            return Ok((*generation, remote.clone(), false));
        }
        let session = Session::connect(&self.target).await?;
        if let Some(note) = session.recorded_host_key() {
            crate::output::write_stderr(&format!("pxagent mcp: {note}\n"));
        }
        let remote = Remote::new(session, self.target.display(), self.target.command_timeout);
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *current = Some((generation, remote.clone()));
        Ok((generation, remote, true))
    }

    /// Forget connection `generation` after a call on it failed with a connection error, so
    /// the next call opens a new one. A newer connection (another call already replaced it)
    /// is kept. Calls still running on the old one keep their clone until they end.
    async fn discard(&self, generation: u64) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|(g, _)| *g == generation)
            && let Some((_, old)) = current.take()
        {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), old.session.close()).await;
            });
        }
    }

    async fn close(&self) {
        if let Some((_, remote)) = self.current.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), remote.session.close()).await;
        }
    }
}

/// The [`Connector`] of one call: remembers which connection the call used.
struct CallLink<'a> {
    link: &'a Link,
    used: std::sync::Mutex<Option<(u64, bool)>>,
}

impl<'a> CallLink<'a> {
    fn new(link: &'a Link) -> CallLink<'a> {
        CallLink {
            link,
            used: std::sync::Mutex::new(None),
        }
    }

    /// The connection this call used and whether the call opened it itself.
    fn used(&self) -> Option<(u64, bool)> {
        *self.used.lock().expect("call link lock")
    }
}

impl Connector for CallLink<'_> {
    async fn remote(&self) -> Result<Remote> {
        let (generation, remote, fresh) = self.link.get().await?;
        let mut used = self.used.lock().expect("call link lock");
        // The engine may ask more than once; the first answer says whether it was fresh.
        if used.is_none_or(|(g, _)| g != generation) {
            *used = Some((generation, fresh));
        }
        Ok(remote)
    }
}

/// The MCP server of one stdio session.
pub struct Server {
    policy: Policy,
    profile: Profile,
    link: Arc<Link>,
    host: String,
    account: String,
    tools: Vec<(ToolSpec, Tool)>,
    /// How long a guest command may run (`--timeout`, else [`crate::exec::DEFAULT_TIMEOUT`]).
    exec_timeout: Duration,
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
    async fn run(
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
        second
    }

    /// One attempt over one connection. Commands inside guests have their own flow (several
    /// remote steps) in [`crate::exec`]; the MCP server offers them without file sync (a
    /// push or pull would read or write files of the machine the server runs on).
    async fn run_once(
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
    async fn call(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicyConfig, Rule};

    fn deny(ids: &[&str]) -> Policy {
        let mut cfg = PolicyConfig::default();
        for id in ids {
            cfg.ops.insert(id.to_string(), Rule::new(Action::Deny));
        }
        Policy::from_config(cfg, "test policy").unwrap()
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => panic!("not an object"),
        }
    }

    /// A sample of raw CLI values as the JSON arguments a client sends.
    fn as_args(op: &Op, raw: &BTreeMap<&'static str, String>) -> Map<String, Value> {
        raw.iter()
            .map(|(k, v)| {
                let p = op.param(k).unwrap();
                let value = match p.kind {
                    Kind::Flag => json!(true),
                    Kind::GuestArgv => serde_json::from_str(v).unwrap(),
                    Kind::Choice(cs) => {
                        // Samples hold wire values; clients send the CLI name.
                        let c = cs.iter().find(|c| c.cli == v || c.wire == v).unwrap();
                        json!(c.cli)
                    }
                    k if integer_range(k).is_some() => json!(v.parse::<u64>().unwrap()),
                    _ => json!(v),
                };
                (k.to_string(), value)
            })
            .collect()
    }

    #[test]
    fn tools_are_the_catalog_minus_denied_and_profile_excluded() {
        let policy = deny(&["vm.destroy"]);
        for profile in Profile::ALL {
            let names: Vec<String> = tool_specs(&policy, profile)
                .into_iter()
                .map(|s| s.name)
                .collect();
            let expected: Vec<String> = OPS
                .iter()
                .filter(|op| profile.allows_op(op) && !op.is_step() && op.id != "vm.destroy")
                .map(|op| op.tool_name())
                .collect();
            assert_eq!(names, expected, "{profile:?}");
        }
        let readonly = tool_specs(&policy, Profile::Readonly);
        assert!(readonly.iter().all(|s| s.op.risk == Risk::Read));
        assert!(readonly.iter().any(|s| s.name == "vm_list"));
        let full = tool_specs(&Policy::default(), Profile::Full);
        assert!(full.iter().any(|s| s.name == "vm_destroy"));
        // Variants sharing a CLI path are separate tools.
        for name in [
            "vm_snapshot",
            "vm_snapshot_vmstate",
            "backup_restore",
            "backup_restore_ct",
            "backup_restore_overwrite",
            "backup_restore_ct_overwrite",
        ] {
            assert!(full.iter().any(|s| s.name == name), "{name}");
        }
        // Names are unique and valid MCP tool names.
        let mut seen = std::collections::BTreeSet::new();
        for s in &full {
            assert!(seen.insert(s.name.clone()), "duplicate {}", s.name);
            assert!(
                s.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn read_only_policy_hides_every_non_read() {
        let cfg = PolicyConfig {
            read_only: true,
            ..PolicyConfig::default()
        };
        let policy = Policy::from_config(cfg, "test").unwrap();
        let specs = tool_specs(&policy, Profile::Full);
        assert!(!specs.is_empty());
        assert!(specs.iter().all(|s| s.op.risk == Risk::Read));
    }

    #[test]
    fn schemas_accept_samples_and_reject_bad_arguments() {
        for op in OPS {
            let spec = tool_spec(op, op.confirm.is_some());
            assert!(
                jsonschema::meta::is_valid(&spec.input_schema),
                "{}: not a valid JSON Schema",
                op.id
            );
            let v = jsonschema::validator_for(&spec.input_schema).unwrap();
            let samples = catalog::samples(op);
            assert!(!samples.is_empty(), "{}", op.id);
            for raw in &samples {
                let args = as_args(op, raw);
                let value = Value::Object(args.clone());
                let errors: Vec<String> = v.iter_errors(&value).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{} {value}: {errors:?}", op.id);
                // What the schema admits, the server admits.
                let (inv, _) = invocation(op, &args, op.confirm.is_some())
                    .unwrap_or_else(|e| panic!("{} {value}: {e}", op.id));
                assert_eq!(inv.op.id, op.id);

                let mut bad = Vec::new();
                let mut unknown = args.clone();
                unknown.insert("bogus".into(), json!(1));
                bad.push(unknown);
                if op.param("vmid").is_some() {
                    let mut a = args.clone();
                    a.insert("vmid".into(), json!(99));
                    bad.push(a);
                }
                for p in op.params.iter().filter(|p| p.kind == Kind::SnapName) {
                    let mut a = args.clone();
                    a.insert(p.name.into(), json!("; rm"));
                    bad.push(a);
                }
                for p in op.params.iter().filter(|p| required(op, p)) {
                    let mut a = args.clone();
                    a.remove(p.name);
                    bad.push(a);
                }
                for a in bad {
                    let value = Value::Object(a.clone());
                    assert!(!v.is_valid(&value), "{} schema admits {value}", op.id);
                    let e = invocation(op, &a, op.confirm.is_some()).unwrap_err();
                    assert_eq!(e.exit_code(), 2, "{} {value}: {e}", op.id);
                }
            }
        }
    }

    #[test]
    fn schema_details() {
        let start = tool_spec(catalog::find("vm.start").unwrap(), false);
        let s = &start.input_schema;
        assert_eq!(s["properties"]["vmid"]["type"], "integer");
        assert_eq!(s["properties"]["vmid"]["minimum"], 100);
        assert_eq!(s["properties"]["vmid"]["maximum"], 999_999_999);
        assert_eq!(s["required"], json!(["vmid"]));
        assert_eq!(s["additionalProperties"], false);
        assert!(s["properties"].get("confirm").is_none());
        assert!(
            s["properties"]["node"]["pattern"]
                .as_str()
                .unwrap()
                .starts_with('^')
        );

        let destroy = tool_spec(catalog::find("vm.destroy").unwrap(), true);
        assert_eq!(
            destroy.input_schema["properties"]["confirm"]["type"],
            "string"
        );
        assert_eq!(
            destroy.input_schema["properties"]["purge"]["type"],
            "boolean"
        );
        assert!(destroy.description.contains("`yes destroy <vmid>`"));
        assert!(destroy.description.contains("human"));

        let vmstate = tool_spec(catalog::find("vm.snapshot-vmstate").unwrap(), true);
        assert_eq!(
            vmstate.input_schema["required"],
            json!(["vmid", "snapshot", "vmstate"])
        );
        assert_eq!(vmstate.input_schema["properties"]["vmstate"]["const"], true);
        let resources = tool_spec(catalog::find("cluster.resources").unwrap(), false);
        assert!(resources.input_schema["properties"]["type"]["enum"].is_array());
    }

    #[test]
    fn annotations_follow_risk() {
        for op in OPS {
            let s = tool_spec(op, false);
            assert_eq!(s.read_only, op.risk == Risk::Read, "{}", op.id);
            assert_eq!(s.destructive, op.risk == Risk::Confirm, "{}", op.id);
            assert_eq!(s.idempotent, op.risk == Risk::Read, "{}", op.id);
            let t = serde_json::to_value(s.to_tool()).unwrap();
            let a = &t["annotations"];
            assert_eq!(a["readOnlyHint"], s.read_only, "{}", op.id);
            assert_eq!(a["destructiveHint"], s.destructive, "{}", op.id);
            assert_eq!(a["idempotentHint"], s.idempotent, "{}", op.id);
            assert_eq!(a["openWorldHint"], false, "{}", op.id);
        }
    }

    #[test]
    fn arguments_become_the_cli_strings() {
        let op = catalog::find("vm.destroy").unwrap();
        let (raw, confirm) = raw_values(
            op,
            &obj(json!({"vmid": 100, "purge": false, "node": null, "confirm": "yes destroy 100"})),
            true,
        )
        .unwrap();
        assert_eq!(raw.get("vmid").map(String::as_str), Some("100"));
        assert!(!raw.contains_key("purge") && !raw.contains_key("node"));
        assert_eq!(confirm.as_deref(), Some("yes destroy 100"));
        let (raw, _) = raw_values(op, &obj(json!({"vmid": "101", "purge": true})), true).unwrap();
        assert_eq!(raw.get("vmid").map(String::as_str), Some("101"));
        assert_eq!(raw.get("purge").map(String::as_str), Some("1"));
        for bad in [
            json!({"vmid": 100.5}),
            json!({"vmid": -100}),
            json!({"vmid": true}),
            json!({"vmid": 100, "purge": "yes"}),
            json!({"vmid": 100, "confirm": 1}),
        ] {
            assert!(raw_values(op, &obj(bad.clone()), true).is_err(), "{bad}");
        }
        // No `confirm` where the tool takes none.
        let start = catalog::find("vm.start").unwrap();
        assert!(raw_values(start, &obj(json!({"vmid": 100, "confirm": "x"})), false).is_err());
    }

    #[test]
    fn a_variant_tool_runs_only_its_own_op() {
        let restore = catalog::find("backup.restore").unwrap();
        let lxc = "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst";
        let e = invocation(restore, &obj(json!({"archive": lxc, "vmid": 300})), false).unwrap_err();
        assert!(e.to_string().contains("backup_restore_ct"), "{e}");
        let ct = catalog::find("backup.restore-ct").unwrap();
        assert!(invocation(ct, &obj(json!({"archive": lxc, "vmid": 300})), false).is_ok());
    }

    #[test]
    fn failures_tell_the_model_what_to_do() {
        let op = catalog::find("vm.destroy").unwrap();
        let (inv, _) = invocation(op, &obj(json!({"vmid": 100})), true).unwrap();
        let text = failure_text(&inv.refusal().unwrap(), &inv);
        assert!(text.starts_with("I won't run `vm destroy 100` without explicit confirmation"));
        assert!(
            text.contains("ask the user to reply `yes destroy 100`"),
            "{text}"
        );
        assert!(text.contains("\"confirm\": \"yes destroy 100\""), "{text}");
        assert!(text.contains("must come from the human user"), "{text}");

        let start = catalog::find("vm.start").unwrap();
        let (inv, _) = invocation(start, &obj(json!({"vmid": 102})), false).unwrap();
        let text = failure_text(&Error::Connection("lost it".into()), &inv);
        assert!(text.contains("may or may not have happened"), "{text}");
        assert!(text.contains("vm_status (vmid 102)"), "{text}");
        let status = catalog::find("vm.status").unwrap();
        let (inv, _) = invocation(status, &obj(json!({"vmid": 102})), false).unwrap();
        assert!(!failure_text(&Error::Connection("lost".into()), &inv).contains("may or may not"));
    }

    /// Send one JSON-RPC line and read lines until the answer with this id.
    async fn rpc(
        io: &mut tokio::io::BufReader<tokio::io::DuplexStream>,
        id: u64,
        method: &str,
        params: Value,
    ) -> Value {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        io.get_mut()
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let mut line = String::new();
            assert!(io.read_line(&mut line).await.unwrap() > 0, "server hung up");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    #[tokio::test]
    async fn a_client_over_a_duplex_pipe_sees_exactly_the_offered_tools() {
        use tokio::io::AsyncWriteExt;
        let policy = deny(&["vm.reboot"]);
        let expected = tool_specs(&policy, Profile::Operator);
        // Nothing listens on port 9: no call below needs the host.
        let target = Target::new("127.0.0.1", 9, "zen-agent");
        let server = Server::new(policy, Profile::Operator, target);
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        let running = tokio::spawn(async move {
            let service = server.serve(server_io).await.unwrap();
            service.waiting().await.unwrap();
        });
        let mut io = tokio::io::BufReader::new(client_io);
        let init = rpc(
            &mut io,
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
        assert_eq!(init["result"]["serverInfo"]["name"], "pxagent");
        assert_eq!(
            init["result"]["serverInfo"]["version"],
            env!("CARGO_PKG_VERSION")
        );
        assert!(init["result"]["capabilities"]["tools"].is_object());
        io.get_mut()
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();

        let list = rpc(&mut io, 2, "tools/list", json!({})).await;
        let tools = list["result"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        let want: Vec<&str> = expected.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, want);
        assert!(!names.contains(&"vm_reboot") && !names.contains(&"vm_destroy"));
        for (t, s) in tools.iter().zip(&expected) {
            assert_eq!(t["inputSchema"], s.input_schema, "{}", s.name);
            assert_eq!(t["annotations"]["readOnlyHint"], s.read_only, "{}", s.name);
            assert_eq!(
                t["annotations"]["destructiveHint"], s.destructive,
                "{}",
                s.name
            );
            assert_eq!(t["description"], s.description.as_str());
        }

        // An unknown tool is a protocol error (and not audited: it names no op).
        let unknown = rpc(
            &mut io,
            3,
            "tools/call",
            json!({"name": "qm_monitor", "arguments": {}}),
        )
        .await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

        drop(io);
        running.await.unwrap();
    }
}
