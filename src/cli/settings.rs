//! The second step of parsing (ripgrep's `LowArgs` → `HiArgs`): clap's matches become typed
//! [`Settings`] and one [`Cmd`], once, here. Everything after this point works on these types;
//! no other module sees an `ArgMatches`.
//!
//! Values that the catalog's parameter kinds own (VMIDs, names, …) are validated by
//! [`Invocation::new`], so every bad value gets the same one-line error and exit 2.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::ArgMatches;

use crate::base::error::{Error, Result};
use crate::catalog::invocation::{Invocation, Named};
use crate::catalog::{self, How, Kind, Op, Profile};
use crate::config::context::{self, ConnectArgs};
use crate::engine::guest::GuestRequest;
use crate::host::setup::{
    AgentKey, Approvers, HostPath, HostPolicy, RevokeOptions, SetupOptions, SourceList, Sshd,
};
use crate::host::sudoers::ranges::Ranges;
use crate::host::sudoers::render::RenderOptions;
use crate::output::Format;
use crate::views::Filter;

/// The global flags, typed.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The words pxagent was started with (program name first), for `--no-wait`'s follower.
    pub argv: Vec<OsString>,
    /// `-o`.
    pub format: Format,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--confirm`.
    pub confirm: Option<String>,
    /// `--approval FILE` (`-`: stdin).
    pub approval: Option<PathBuf>,
    /// `--policy`.
    pub policy: Option<String>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `-v` count.
    pub verbose: u8,
    /// Never prompt (`--no-input`, `PXAGENT_NO_INPUT`, or `-o json`): a missing phrase is
    /// refused at once, terminal or not.
    pub no_input: bool,
    /// `--color`.
    pub color: crate::output::style::ColorChoice,
    /// `--no-wait`.
    pub no_wait: bool,
    /// How to reach the host.
    pub connect: ConnectArgs,
    /// `--hosts LIST|@GROUP` (fleets).
    pub hosts: Option<String>,
    /// `--all-hosts`.
    pub all_hosts: bool,
    /// `--parallel N`: hosts contacted at once.
    pub parallel: usize,
}

/// The command to run, with its own arguments typed.
#[derive(Debug)]
pub enum Cmd {
    /// `pxagent catalog`.
    Catalog,
    /// `pxagent skill [--profile P] [--from-host]`: with `from_host`, narrowed to what the
    /// account may run on its host.
    Skill {
        /// The profile.
        profile: Profile,
        /// Read the host's rules first.
        from_host: bool,
    },
    /// `pxagent preflight [--profile P]`.
    Preflight(Profile),
    /// `pxagent status`.
    Status,
    /// `pxagent health [--since T] [--storage-threshold PCT]`.
    Health(crate::engine::health::Options),
    /// `pxagent audit show [filters]`.
    AuditShow(crate::audit::query::Filter),
    /// `pxagent audit verify`.
    /// `audit verify`: the local chain, or with `-H/--host` typed the host's chain of gate
    /// records.
    AuditVerify {
        /// `--host` was typed: verify the host audit chain.
        host: bool,
    },
    /// `pxagent audit new-chain`.
    AuditNewChain,
    /// `pxagent sudoers render …`.
    SudoersRender(RenderOptions),
    /// `pxagent sudoers lint FILE|- [--groups G,…]`, for the account `--user`.
    SudoersLint {
        /// The file, or `-` for stdin.
        file: String,
        /// The account the findings are for.
        user: String,
        /// Groups to count as the account's besides the host's group database.
        groups: Vec<String>,
    },
    /// `pxagent approve --key FILE [--ttl DURATION] STATEMENT`.
    Approve {
        /// The signer's private key file.
        key: PathBuf,
        /// A new lifetime for the statement, from now (at most [`crate::approval::MAX_TTL`]).
        ttl: Option<Duration>,
        /// A file, `-` for stdin, or the statement text itself.
        statement: String,
    },
    /// `pxagent reconcile SEQ`: what became of the change of audit record SEQ.
    Reconcile(u64),
    /// `pxagent freeze --reason TEXT`, `pxagent thaw`, `pxagent grant …`, `grant list`,
    /// `grant revoke ID`: requests to the gate itself, signed with `--key` or `--approval`.
    Control {
        /// `freeze` or `thaw`.
        action: &'static str,
        /// A freeze's reason.
        reason: Option<String>,
        /// The approver's private key, to sign the gate's statement here.
        key: Option<PathBuf>,
        /// A signature made elsewhere.
        approval: Option<PathBuf>,
        /// A grant's scope or the grant to revoke, as the envelope carries it.
        grant: Option<crate::base::gate_protocol::Control>,
    },
    /// `pxagent setup render …`.
    SetupRender(Box<SetupOptions>),
    /// `pxagent setup revoke …`.
    SetupRevoke(RevokeOptions),
    /// `pxagent mcp [--profile P] [--list-tools]`.
    Mcp {
        /// The profile whose tools are offered.
        profile: Profile,
        /// Print the tool list and exit.
        list_tools: bool,
        /// Which tools (`--tools`).
        tools: crate::mcp::ToolSet,
        /// Output schemas and long descriptions (`--output-schemas`).
        full: bool,
    },
    /// `pxagent batch [--stop-on-error]`.
    Batch {
        /// Run one at a time and stop at the first failure.
        stop_on_error: bool,
    },
    /// `pxagent persist status`.
    PersistStatus,
    /// `pxagent persist stop`.
    PersistStop,
    /// `pxagent persist serve` (internal: the holder itself).
    PersistServe,
    /// `pxagent gate …` (host side).
    Gate(crate::host::gate::Options),
    /// `pxagent version [--client]`: pxagent's version, and (without `--client`) the host's.
    Version {
        /// `--client`: nothing is sent, no host needed.
        client_only: bool,
        /// The read of the host's version.
        inv: Invocation,
    },
    /// `pxagent undo [RECORD] [--rollback]`, `undo --list`.
    Undo {
        /// The audit record to undo; `None`: this host's last change that can be.
        record: Option<u64>,
        /// `--list`: show what can be undone, send nothing.
        list: bool,
        /// `--rollback`: roll back to the snapshot taken before it instead.
        rollback: bool,
    },
    /// `pxagent completions SHELL`.
    Completions(clap_complete::Shell),
    /// `pxagent man [COMMAND…]`.
    Man(Vec<String>),
    /// A catalog op (not a guest command), with the list filters of its command line.
    Op(Invocation, Filter),
    /// A node-scoped read on every online node (`--all-nodes`).
    AllNodes(Box<AllNodes>),
    /// A catalog op whose guest was given by name (`vm status web`): looked up on the host
    /// first, then run as [`Cmd::Op`].
    Named(Box<Named>, Filter),
    /// A command inside a guest (`vm exec`, `ct exec`).
    Exec {
        /// The request (its `vmid` may still be a guest's name).
        req: Box<GuestRequest>,
        /// `--exit-code`: exit with the guest command's own exit code once it ran.
        exit_code: bool,
    },
}

impl Cmd {
    /// The name an invocation is recorded and reported under (an op id, or the command's
    /// dotted path).
    pub fn name(&self) -> &'static str {
        match self {
            Cmd::Catalog => "catalog",
            Cmd::Skill { .. } => "skill",
            Cmd::Preflight(_) => "preflight",
            Cmd::Status => "status",
            Cmd::Health(_) => "health",
            Cmd::AuditShow(_) => "audit.show",
            Cmd::AuditVerify { host: false } => "audit.verify",
            Cmd::AuditVerify { host: true } => "audit.verify-host",
            Cmd::AuditNewChain => "audit.new-chain",
            Cmd::SudoersRender(_) => "sudoers.render",
            Cmd::SudoersLint { .. } => "sudoers.lint",
            Cmd::Approve { .. } => "approve",
            Cmd::Reconcile(_) => "reconcile",
            Cmd::Undo { list: true, .. } => "undo.list",
            Cmd::Undo { .. } => "undo",
            Cmd::Control {
                action: "grants", ..
            } => "grant.list",
            Cmd::Control {
                action: "revoke", ..
            } => "grant.revoke",
            Cmd::Control { action, .. } => action,
            Cmd::SetupRender(_) => "setup.render",
            Cmd::SetupRevoke(_) => "setup.revoke",
            Cmd::Mcp { .. } => "mcp",
            Cmd::Gate(_) => "gate",
            Cmd::Batch { .. } => "batch",
            Cmd::PersistStatus => "persist.status",
            Cmd::PersistStop => "persist.stop",
            Cmd::PersistServe => "persist.serve",
            Cmd::Version {
                client_only: true, ..
            } => "version",
            Cmd::Version { inv, .. } => inv.op.id,
            Cmd::Completions(_) => "completions",
            Cmd::Man(_) => "man",
            Cmd::Op(inv, _) => inv.op.id,
            Cmd::AllNodes(a) => a.op.id,
            Cmd::Named(named, _) => named.op.id,
            Cmd::Exec { req, .. } => req.op.id,
        }
    }
}

fn string(m: &ArgMatches, k: &str) -> Option<String> {
    m.try_get_one::<String>(k).ok().flatten().cloned()
}

fn strings(m: &ArgMatches, k: &str) -> Vec<String> {
    m.try_get_many::<String>(k)
        .ok()
        .flatten()
        .map(|v| v.cloned().collect())
        .unwrap_or_default()
}

/// The matches of the command that runs: the deepest subcommand.
fn leaf(m: &ArgMatches) -> &ArgMatches {
    let mut at = m;
    while let Some((_, sub)) = at.subcommand() {
        at = sub;
    }
    at
}

/// The command's words (`sudoers render`), for messages.
fn path_words(m: &ArgMatches) -> String {
    let mut words = Vec::new();
    let mut at = m;
    while let Some((name, sub)) = at.subcommand() {
        words.push(name);
        at = sub;
    }
    words.join(" ")
}

/// The command that runs, in the (built) command tree that parsed `m`.
fn leaf_command<'a>(cmd: &'a clap::Command, m: &ArgMatches) -> &'a clap::Command {
    let (mut c, mut at) = (cmd, m);
    while let Some((name, sub)) = at.subcommand() {
        match c.find_subcommand(name) {
            Some(s) => c = s,
            None => break,
        }
        at = sub;
    }
    c
}

/// Whether a command takes this argument. Asked of the command tree, not of the matches:
/// clap checks argument ids against matches only in debug builds.
fn defines(c: &clap::Command, id: &str) -> bool {
    c.get_arguments().any(|a| a.get_id() == id)
}

/// A host flag's value (see [`super::args::connection_args`]): typed after the command beats
/// typed before it, which beats the environment. A command that does not take the flag gets
/// `None`, whatever the environment says.
fn host_string(
    root: &ArgMatches,
    leaf: &ArgMatches,
    cmd: &clap::Command,
    id: &str,
) -> Option<String> {
    use clap::parser::ValueSource;
    if !defines(cmd, id) {
        return None;
    }
    let typed = |m: &ArgMatches| m.value_source(id) == Some(ValueSource::CommandLine);
    if typed(leaf) || !typed(root) {
        string(leaf, id).or_else(|| string(root, id))
    } else {
        string(root, id)
    }
}

/// Where a host flag's value came from (as [`host_string`] picks it): typed on the command
/// line (before or after the command), or from its environment variable.
fn host_source(
    root: &ArgMatches,
    leaf: &ArgMatches,
    cmd: &clap::Command,
    id: &str,
) -> Option<clap::parser::ValueSource> {
    use clap::parser::ValueSource;
    if !defines(cmd, id) {
        return None;
    }
    let typed = |m: &ArgMatches| m.value_source(id) == Some(ValueSource::CommandLine);
    if typed(leaf) || typed(root) {
        return Some(ValueSource::CommandLine);
    }
    leaf.value_source(id).or_else(|| root.value_source(id))
}

/// A host switch: given before or after the command (only where the command takes it).
fn host_flag(root: &ArgMatches, leaf: &ArgMatches, cmd: &clap::Command, id: &str) -> bool {
    let on = |m: &ArgMatches| m.try_get_one::<bool>(id).ok().flatten() == Some(&true);
    defines(cmd, id) && (on(leaf) || on(root))
}

/// A local command reaches no host: a host flag typed before it is a usage error naming it
/// (its environment variable is simply not read).
fn refuse_foreign_host_flags(root: &ArgMatches, cmd: &clap::Command) -> Result<()> {
    use clap::parser::ValueSource;
    for id in super::args::host_arg_ids() {
        if root.value_source(&id) == Some(ValueSource::CommandLine) && !defines(cmd, &id) {
            let flag = format!("--{}", id.replace('_', "-"));
            return Err(Error::usage(format!(
                "`pxagent {}` does not take {flag}: it {}",
                path_words(root),
                if super::args::connection_args()
                    .iter()
                    .any(|a| a.get_id() == id.as_str())
                {
                    "reaches no host (connection flags belong to commands that do)"
                } else {
                    "sends no operation (policy and confirmation flags belong to catalog operations)"
                }
            )));
        }
    }
    Ok(())
}

impl Settings {
    /// Type the global flags: the general ones from the root, the host flags merged from
    /// before and after the command (only those the command takes). `tree` is the command
    /// tree that parsed `m`.
    pub fn from_matches(
        m: &ArgMatches,
        tree: &clap::Command,
        argv: Vec<OsString>,
    ) -> Result<Settings> {
        let l = leaf(m);
        let c = leaf_command(tree, m);
        refuse_foreign_host_flags(m, c)?;
        // `version --client` reaches no host: its host settings (from the environment, say)
        // are not read, so none of them can fail it.
        let local = l.try_get_one::<bool>("client").ok().flatten() == Some(&true);
        let get = |id: &str| (!local).then(|| host_string(m, l, c, id)).flatten();
        let timeout = get("timeout")
            .map(|s| context::parse_seconds("--timeout", &s))
            .transpose()?;
        // clap folds `PXAGENT_*` into the flags; the connection precedence needs them apart: a
        // value typed on the command line, and one that came from the environment.
        use clap::parser::ValueSource;
        let from = |id: &str, src: ValueSource| {
            (!local && host_source(m, l, c, id) == Some(src))
                .then(|| host_string(m, l, c, id))
                .flatten()
        };
        let typed = |id: &str| from(id, ValueSource::CommandLine);
        let env = |id: &str| from(id, ValueSource::EnvVariable);
        let port = |v: Option<String>| v.map(|p| context::parse_port(&p)).transpose();
        // `-H` typed beside `--hosts` is a contradiction; a PXAGENT_HOST in the environment
        // only names the default host, which a fleet replaces.
        let fleet = get("hosts").is_some() || host_flag(m, l, c, "all_hosts");
        if fleet && typed("host").is_some() {
            return Err(Error::usage(
                "give either -H HOST or --hosts/--all-hosts, not both",
            ));
        }
        Ok(Settings {
            argv,
            format: string(m, "output")
                .and_then(|s| Format::parse(&s))
                .unwrap_or(Format::Table),
            dry_run: host_flag(m, l, c, "dry_run"),
            confirm: get("confirm"),
            approval: get("approval").map(PathBuf::from),
            policy: get("policy"),
            config: get("config").map(PathBuf::from),
            verbose: m.get_count("verbose"),
            no_input: m.get_flag("no_input")
                || string(m, "output").and_then(|s| Format::parse(&s)) == Some(Format::Json),
            color: string(m, "color")
                .and_then(|c| crate::output::style::ColorChoice::parse(&c))
                .unwrap_or_default(),
            no_wait: host_flag(m, l, c, "no_wait"),
            connect: ConnectArgs {
                host: typed("host"),
                port: port(typed("port"))?,
                user: typed("user"),
                identity: typed("identity").map(PathBuf::from),
                known_hosts: typed("known_hosts").map(PathBuf::from),
                accept_new: host_flag(m, l, c, "accept_new"),
                timeout,
                env: context::EnvArgs {
                    host: env("host"),
                    port: port(env("port"))?,
                    user: env("user"),
                    identity: env("identity").map(PathBuf::from),
                    known_hosts: env("known_hosts").map(PathBuf::from),
                },
                jump: get("jump"),
                persist: get("persist")
                    .map(|p| crate::persist::parse_persist(&p))
                    .transpose()?,
            },
            hosts: get("hosts"),
            all_hosts: !local && host_flag(m, l, c, "all_hosts"),
            parallel: get("parallel")
                .map(|p| crate::cli::fleet::parse_parallel(&p))
                .transpose()?
                .unwrap_or(crate::cli::fleet::DEFAULT_PARALLEL),
        })
    }
}

/// Type the command. `path` errors (no subcommand) are usage errors.
pub fn command(m: &ArgMatches, s: &Settings) -> Result<Cmd> {
    let Some((top, sub)) = m.subcommand() else {
        return Err(Error::usage("no command given"));
    };
    let profile =
        |a: &ArgMatches| Profile::parse(string(a, "profile").as_deref().unwrap_or("full"));
    Ok(match (top, sub.subcommand()) {
        ("catalog", _) => Cmd::Catalog,
        ("skill", _) => Cmd::Skill {
            profile: profile(sub)?,
            from_host: sub.get_flag("from_host"),
        },
        ("preflight", _) => Cmd::Preflight(profile(sub)?),
        ("status", _) => Cmd::Status,
        ("health", _) => Cmd::Health(health_options(sub)?),
        ("mcp", _) => Cmd::Mcp {
            profile: profile(sub)?,
            list_tools: sub.get_flag("list_tools"),
            tools: crate::mcp::ToolSet::parse(string(sub, "tools").as_deref().unwrap_or("all"))
                .map_err(Error::usage)?,
            full: sub.get_flag("output_schemas"),
        },
        ("gate", _) => Cmd::Gate(gate_options(m, sub)?),
        ("batch", _) => Cmd::Batch {
            stop_on_error: sub.get_flag("stop_on_error"),
        },
        ("persist", Some(("status", _))) => Cmd::PersistStatus,
        ("persist", Some(("stop", _))) => Cmd::PersistStop,
        ("persist", Some(("serve", _))) => Cmd::PersistServe,
        ("persist", _) => return Err(Error::usage("expected `persist status` or `persist stop`")),
        ("completions", _) => Cmd::Completions(
            sub.get_one::<clap_complete::Shell>("shell")
                .copied()
                .ok_or_else(|| {
                    Error::usage("completions needs a shell: bash, zsh, fish, elvish or powershell")
                })?,
        ),
        ("man", _) => Cmd::Man(strings(sub, "command")),
        ("audit", Some(("show", a))) => Cmd::AuditShow(crate::audit::query::Filter::parse(
            crate::audit::query::FilterArgs {
                since: string(a, "since"),
                until: string(a, "until"),
                op: string(a, "op"),
                host: string(a, "host"),
                decision: string(a, "decision"),
                vmid: string(a, "vmid"),
            },
            std::time::SystemTime::now(),
        )?),
        // Only a typed --host: PXAGENT_HOST in the environment keeps `audit verify` local.
        ("audit", Some(("verify", v))) => Cmd::AuditVerify {
            host: v.try_contains_id("host").unwrap_or(false)
                && v.value_source("host") == Some(clap::parser::ValueSource::CommandLine),
        },
        ("audit", Some(("new-chain", _))) => Cmd::AuditNewChain,
        ("audit", _) => {
            return Err(Error::usage(
                "expected `audit show`, `audit verify` or `audit new-chain`",
            ));
        }
        (action @ ("freeze" | "thaw"), _) => Cmd::Control {
            action: if action == "freeze" { "freeze" } else { "thaw" },
            reason: string(sub, "reason"),
            key: string(sub, "key").map(PathBuf::from),
            approval: string(sub, "approval").map(PathBuf::from),
            grant: None,
        },
        ("reconcile", _) => Cmd::Reconcile(
            string(sub, "record")
                .and_then(|r| r.parse::<u64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| Error::usage("reconcile takes an audit record's number (`pxagent audit show` lists them; the outcome_unknown error names it)"))?,
        ),
        ("undo", _) => Cmd::Undo {
            record: match string(sub, "record") {
                None => None,
                Some(r) => Some(r.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    Error::usage("undo takes an audit record's number (`pxagent undo --list` shows them)")
                })?),
            },
            list: sub.get_flag("list"),
            rollback: sub.get_flag("rollback"),
        },
        ("grant", Some(("list", _))) => Cmd::Control {
            action: "grants",
            reason: None,
            key: None,
            approval: None,
            grant: None,
        },
        ("grant", Some(("revoke", r))) => Cmd::Control {
            action: "revoke",
            reason: None,
            key: string(r, "key").map(PathBuf::from),
            approval: string(r, "approval").map(PathBuf::from),
            grant: Some(crate::base::gate_protocol::Control {
                action: "revoke".into(),
                id: string(r, "id"),
                ..Default::default()
            }),
        },
        ("grant", _) => Cmd::Control {
            action: "grant",
            reason: None,
            key: string(sub, "key").map(PathBuf::from),
            approval: string(sub, "approval").map(PathBuf::from),
            grant: Some(grant_scope(sub)?),
        },
        ("approve", _) => Cmd::Approve {
            key: PathBuf::from(string(sub, "key").unwrap_or_default()),
            ttl: string(sub, "ttl").map(|t| approve_ttl(&t)).transpose()?,
            statement: string(sub, "statement").unwrap_or_else(|| "-".into()),
        },
        ("sudoers", Some(("render", r))) => Cmd::SudoersRender(render_options(s, r)?),
        ("sudoers", Some(("lint", l))) => Cmd::SudoersLint {
            file: string(l, "file").unwrap_or_else(|| "-".into()),
            user: s
                .connect
                .named_user()
                .unwrap_or(crate::ssh::DEFAULT_USER)
                .to_string(),
            groups: string(l, "groups")
                .map(|g| {
                    g.split(',')
                        .map(|x| x.trim().to_string())
                        .filter(|x| !x.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        },
        ("sudoers", _) => {
            return Err(Error::usage("expected `sudoers render` or `sudoers lint`"));
        }
        ("setup", Some(("render", r))) => Cmd::SetupRender(Box::new(setup_options(s, r)?)),
        ("setup", Some(("revoke", r))) => Cmd::SetupRevoke(revoke_options(s, r)?),
        ("setup", _) => return Err(Error::usage("expected `setup render` or `setup revoke`")),
        (_, second) => {
            // A catalog op: its path is one word or more (`vm firewall add`).
            let (mut path, mut leaf): (Vec<&str>, &ArgMatches) = match second {
                Some((second, leaf)) => (vec![top, second], leaf),
                None => (vec![top], sub),
            };
            while let Some((word, next)) = leaf.subcommand() {
                path.push(word);
                leaf = next;
            }
            let ops = catalog::ops_at(&path);
            match ops.iter().find(|o| o.runs_guest_command()) {
                Some(op) => Cmd::Exec {
                    req: Box::new(exec_request(op, leaf, s)?),
                    exit_code: leaf.try_get_one::<bool>("exit_code").ok().flatten() == Some(&true),
                },
                None if ops.contains(&&catalog::ops::PVE_VERSION) => Cmd::Version {
                    client_only: leaf.get_flag("client"),
                    inv: invocation(&path, leaf)?,
                },
                None if leaf.try_get_one::<bool>("all_nodes").ok().flatten() == Some(&true) => {
                    Cmd::AllNodes(Box::new(all_nodes(&path, leaf)?))
                }
                None => {
                    let filter = filter(leaf)?;
                    match named(&path, leaf)? {
                        Some(n) => Cmd::Named(Box::new(n), filter),
                        None => Cmd::Op(invocation(&path, leaf)?, filter),
                    }
                }
            }
        }
    })
}

/// The gate's files. Only values typed on the command line count: the forced command names
/// them, and nothing from the environment (which a client may partly set) may move them.
fn gate_options(root: &ArgMatches, g: &ArgMatches) -> Result<crate::host::gate::Options> {
    use clap::parser::ValueSource;
    let typed = |m: &ArgMatches, k: &str| -> Option<PathBuf> {
        (m.value_source(k) == Some(ValueSource::CommandLine))
            .then(|| string(m, k).map(PathBuf::from))
            .flatten()
    };
    let mut o = crate::host::gate::Options::default();
    if let Some(p) = typed(g, "policy").or_else(|| typed(root, "policy")) {
        o.policy = p;
    }
    if let Some(p) = typed(g, "approvers") {
        o.approvers = p;
    }
    o.state_dir = typed(g, "state_dir");
    if let Some(p) = typed(g, "nonce_dir") {
        o.nonce_dir = p;
    }
    if let Some(p) = typed(g, "log_socket") {
        o.log_socket = p;
    }
    if let Some(p) = typed(g, "freeze") {
        o.freeze = p;
    }
    if let Some(p) = typed(g, "control_dir") {
        o.control_dir = p;
    }
    o.machine_id = typed(g, "machine_id");
    // Like the paths: only when the forced command says so.
    o.host_chain =
        g.value_source("host_chain") == Some(ValueSource::CommandLine) && g.get_flag("host_chain");
    for p in [
        Some(&o.freeze),
        Some(&o.control_dir),
        Some(&o.policy),
        Some(&o.approvers),
        o.state_dir.as_ref(),
        Some(&o.nonce_dir),
        Some(&o.log_socket),
        o.machine_id.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        if !p.is_absolute() {
            return Err(Error::usage(format!(
                "gate: {} is not an absolute path",
                p.display()
            )));
        }
    }
    Ok(o)
}

/// `grant --ops … --for …`: the scope, with the end computed here (the statement the approver
/// signs names it, so the gate's first answer and the signed request agree).
fn grant_scope(m: &ArgMatches) -> Result<crate::base::gate_protocol::Control> {
    let ops = string(m, "ops").ok_or_else(|| {
        Error::usage("grant: --ops is required (vm.start,vm.snapshot*); `grant list` lists, `grant revoke ID` ends one")
    })?;
    let length =
        string(m, "for").ok_or_else(|| Error::usage("grant: --for is required (30m, 2h)"))?;
    let secs = crate::base::time::parse_duration(&length)
        .map(|d| d.as_secs())
        .filter(|s| *s > 0)
        .ok_or_else(|| {
            Error::usage(format!(
                "invalid --for '{}': a duration such as 30m or 2h",
                crate::base::text::printable(&length)
            ))
        })?;
    let max = string(m, "max")
        .map(|v| {
            v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::usage(format!(
                    "invalid --max '{}': a count of 1 or more",
                    crate::base::text::printable(&v)
                ))
            })
        })
        .transpose()?;
    Ok(crate::base::gate_protocol::Control {
        action: "grant".into(),
        ops: Some(ops),
        vmids: string(m, "vmids"),
        storages: string(m, "storages"),
        until: Some(crate::base::time::now_secs() + secs),
        max,
        ..Default::default()
    })
}

/// `approve --ttl`: a duration of at most [`crate::approval::MAX_TTL`].
fn approve_ttl(text: &str) -> Result<Duration> {
    use crate::approval::MAX_TTL;
    use crate::base::time;
    let ttl = time::parse_duration(text).ok_or_else(|| {
        Error::usage(format!(
            "invalid --ttl '{}': expected a duration such as 30m, 1h or 600 (seconds)",
            crate::base::text::printable(text)
        ))
    })?;
    if ttl > MAX_TTL {
        return Err(Error::usage(format!(
            "--ttl {}: an approval lasts at most {}",
            text.trim(),
            time::describe_duration(MAX_TTL)
        )));
    }
    Ok(ttl)
}

fn render_options(s: &Settings, r: &ArgMatches) -> Result<RenderOptions> {
    let user = s.connect.named_user().unwrap_or(crate::ssh::DEFAULT_USER);
    let mut opts = RenderOptions::new(user)?;
    if let Some(p) = string(r, "profile") {
        opts.profile = Profile::parse(&p)?;
    }
    if let Some(v) = string(r, "vmids") {
        opts.vmids = Some(Ranges::parse("--vmids", &v)?);
    }
    if let Some(v) = string(r, "ctids") {
        opts.ctids = Some(Ranges::parse("--ctids", &v)?);
    }
    if let Some(v) = string(r, "ct_exec") {
        opts.ct_exec = Some(Ranges::parse("--ct-exec", &v)?);
    }
    opts.unfenced_ops = r.get_flag("unfenced_ops");
    if let Some(v) = string(r, "storage_roots") {
        opts.storage_roots =
            crate::host::sudoers::render::parse_storage_roots("--storage-roots", &v)?;
    }
    if let Some(v) = string(r, "nfs_servers") {
        opts.nfs_servers = crate::host::sudoers::render::parse_nfs_servers("--nfs-servers", &v)?;
    }
    if let Some(v) = string(r, "iso_max_used") {
        opts.iso_max_used = crate::catalog::Kind::FillPercent
            .parse("--iso-max-used", &v)?
            .parse()
            .map_err(|_| Error::usage(format!("--iso-max-used {v}: a percentage, 1-99")))?;
    }
    Ok(opts)
}

/// A text file named on the command line (exit 2 when it cannot be read).
fn read_text(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.into(),
        source,
    })
}

/// The sshd options of both `setup` scripts.
fn sshd_options(r: &ArgMatches) -> Result<Sshd> {
    let mut sshd = Sshd::default();
    if let Some(p) = string(r, "sshd_config") {
        sshd.config = HostPath::parse("--sshd-config", &p)?;
    }
    if let Some(p) = string(r, "sshd_pid_file") {
        sshd.pid_file = Some(HostPath::parse("--sshd-pid-file", &p)?);
    }
    Ok(sshd)
}

/// `setup render`: the account and sudoers options as for `sudoers render`, the files read and
/// checked now. The host policy is the global `--policy` (or `PXAGENT_POLICY`).
fn setup_options(s: &Settings, r: &ArgMatches) -> Result<SetupOptions> {
    let sudoers = render_options(s, r)?;
    let pubkey = string(r, "pubkey").ok_or_else(|| Error::usage("--pubkey FILE is required"))?;
    let key = AgentKey::parse(&read_text(&pubkey)?, &pubkey)?;
    let mut o = SetupOptions::new(sudoers, key);
    if let Some(f) = string(r, "from") {
        o.from = Some(SourceList::parse(&f)?);
    }
    if let Some(p) = &s.policy {
        o.policy = Some(HostPolicy::parse(&read_text(p)?, p)?);
    }
    if let Some(a) = string(r, "approvers") {
        o.approvers = Some(Approvers::parse(&read_text(&a)?, &a)?);
    }
    if let Some(p) = string(r, "gate_bin") {
        o.gate = HostPath::parse("--gate-bin", &p)?;
    }
    if let Some(p) = string(r, "policy_path") {
        o.policy_path = HostPath::parse("--policy-path", &p)?;
    }
    if let Some(p) = string(r, "approvers_path") {
        o.approvers_path = HostPath::parse("--approvers-path", &p)?;
    }
    if let Some(p) = string(r, "log_socket") {
        o.log_socket = Some(HostPath::parse("--log-socket", &p)?);
    }
    o.sshd = sshd_options(r)?;
    Ok(o)
}

fn revoke_options(s: &Settings, r: &ArgMatches) -> Result<RevokeOptions> {
    let mut o = RevokeOptions::new(s.connect.named_user().unwrap_or(crate::ssh::DEFAULT_USER))?;
    o.sshd = sshd_options(r)?;
    Ok(o)
}

/// The list filters of an op's command line (`--node`, `--status`, `--tag`, `--name`; only
/// list views have them).
fn filter(m: &ArgMatches) -> Result<Filter> {
    let get = |flag: &str| string(m, &crate::cli::args::filter_id(flag));
    Filter::parse(get("node"), get("status"), get("tag"), get("name"))
}

/// The op at `path` when its guest was given by name instead of VMID.
fn named(path: &[&str], m: &ArgMatches) -> Result<Option<Named>> {
    let mut raw = raw_values(path, m);
    cli_forms(path, m, &mut raw)?;
    let op = catalog::select(path, &raw)?;
    raw.retain(|k, _| op.param(k).is_some());
    Named::from_raw(op, &raw)
}

/// An op's invocation from the matches of its subcommand (`path` is the CLI path). Every
/// parameter any op at this path has is collected (the CLI merged them), then the values
/// choose the op (e.g. `vm snapshot --vmstate`, a qemu or lxc archive).
pub fn invocation(path: &[&str], m: &ArgMatches) -> Result<Invocation> {
    let mut raw = raw_values(path, m);
    cli_forms(path, m, &mut raw)?;
    let op = catalog::select(path, &raw)?;
    raw.retain(|k, _| op.param(k).is_some());
    Invocation::new(op, raw)
}

/// A node-scoped read to run on every online node: the op and its other values, checked now
/// with a stand-in node (so a bad value is exit 2 before anything is sent).
#[derive(Debug, Clone)]
pub struct AllNodes {
    pub op: &'static Op,
    /// Its values but the node.
    pub raw: BTreeMap<&'static str, String>,
    pub filter: Filter,
}

impl AllNodes {
    /// The invocation for one node.
    pub fn on(&self, node: &str) -> Result<Invocation> {
        let mut raw = self.raw.clone();
        raw.insert("node", node.to_string());
        Invocation::new(self.op, raw)
    }
}

fn all_nodes(path: &[&str], m: &ArgMatches) -> Result<AllNodes> {
    let mut raw = raw_values(path, m);
    cli_forms(path, m, &mut raw)?;
    let op = catalog::select(path, &raw)?;
    raw.retain(|k, _| op.param(k).is_some() && *k != "node");
    let a = AllNodes {
        op,
        raw,
        filter: filter(m)?,
    };
    a.on("pve1")?;
    Ok(a)
}

/// Every value given for a parameter of any op at `path`, unvalidated.
fn raw_values(path: &[&str], m: &ArgMatches) -> BTreeMap<&'static str, String> {
    let mut raw: BTreeMap<&'static str, String> = BTreeMap::new();
    for op in catalog::ops_at(path) {
        for p in op.params {
            match p.how {
                How::Flag => {
                    if m.try_get_one::<bool>(p.name).ok().flatten() == Some(&true) {
                        raw.insert(p.name, "1".into());
                    }
                }
                _ => {
                    if let Some(v) = string(m, p.name) {
                        raw.insert(p.name, v);
                    }
                }
            }
        }
    }
    raw
}

/// The CLI's own forms of two values: `--sshkey FILE` (the keys are read here, at most
/// 64 KiB of a regular file) and `--ip CIDR --gw ADDR` (one ipconfig value).
fn cli_forms(
    path: &[&str],
    m: &ArgMatches,
    raw: &mut BTreeMap<&'static str, String>,
) -> Result<()> {
    for op in catalog::ops_at(path) {
        for p in op.params {
            match p.kind {
                Kind::SshKeys => {
                    if let Some(file) = string(m, p.name) {
                        raw.insert(p.name, read_key_file(&file)?);
                    }
                }
                Kind::IpConfig => {
                    if let (Some(ip), Some(gw)) = (string(m, p.name), string(m, "gw")) {
                        raw.insert(p.name, format!("{ip},gw={gw}"));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// A public key file: a regular file of at most 64 KiB, as text.
fn read_key_file(file: &str) -> Result<String> {
    let fail = |source| Error::ReadFile {
        path: file.into(),
        source,
    };
    let meta = std::fs::metadata(file).map_err(fail)?;
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return Err(Error::usage(format!(
            "--sshkey {}: expected a public key file (a regular file of at most 64 KiB)",
            crate::base::text::printable(file)
        )));
    }
    let bytes = std::fs::read(file).map_err(fail)?;
    String::from_utf8(bytes).map_err(|_| {
        Error::usage(format!(
            "--sshkey {}: not a text file of public keys",
            crate::base::text::printable(file)
        ))
    })
}

/// A guest command's request: the argv after `--`, stdin (read now: a file or `-`), file
/// sync, and the wait (`--timeout`, else [`crate::engine::guest::DEFAULT_TIMEOUT`]).
fn exec_request(op: &'static Op, leaf: &ArgMatches, s: &Settings) -> Result<GuestRequest> {
    let stdin = match string(leaf, "stdin") {
        None => None,
        Some(f) if f == "-" => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map_err(|source| {
                Error::ReadFile {
                    path: "-".into(),
                    source,
                }
            })?;
            Some(buf)
        }
        Some(f) => Some(std::fs::read(&f).map_err(|source| Error::ReadFile {
            path: f.into(),
            source,
        })?),
    };
    Ok(GuestRequest {
        op,
        vmid: string(leaf, "vmid").unwrap_or_default(),
        node: string(leaf, "node"),
        argv: strings(leaf, "command"),
        stdin,
        push: strings(leaf, "push")
            .iter()
            .map(|p| GuestRequest::parse_push(p))
            .collect::<Result<_>>()?,
        pull: strings(leaf, "pull")
            .iter()
            .map(|p| GuestRequest::parse_pull(p))
            .collect::<Result<_>>()?,
        force: leaf.try_get_one::<bool>("force").ok().flatten() == Some(&true),
        mkdir: leaf.try_get_one::<bool>("mkdir").ok().flatten() == Some(&true),
        timeout: s
            .connect
            .timeout
            .unwrap_or(crate::engine::guest::DEFAULT_TIMEOUT),
    })
}
/// `health`'s options: `--since` (Unix seconds, a time, or how long ago: `24h`; default a day) and
/// `--storage-threshold` (1-100, default 90).
fn health_options(sub: &ArgMatches) -> Result<crate::engine::health::Options> {
    crate::engine::health::Options::parse(
        string(sub, "since").as_deref(),
        string(sub, "storage_threshold").as_deref(),
    )
}
