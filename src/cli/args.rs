//! The command line: global flags, fixed commands, and one subcommand per
//! catalog op, generated from the catalog so the CLI can never drift from it.
//!
//! clap only shapes the words here; values are validated by the parameter kinds in
//! [`crate::catalog::invocation`], so every bad value gets the same one-line error and exit 2.
//!
//! Flags come in two sets: [`general_args`] (`-o`, `--color`, `-v`) on every
//! command, and the host flags — [`connection_args`] and [`policy_args`], the one place to add
//! such a flag — only on commands that reach a host (each under its own help heading), plus a
//! copy on the root for `pxagent -H pve1 vm list`. Local commands have neither.

use std::ffi::OsString;

use clap::{Arg, ArgAction, Command};

use crate::catalog::{How, Kind, OPS, Op, Param, Risk};

/// Environment variable prefix for global flags.
pub const ENV_PREFIX: &str = "PXAGENT_";

/// Help heading of the flags every command takes ([`general_args`]). Every command's help lists
/// its own arguments and options first, then the host flags' headings (where it takes them),
/// then this one: clap shows the unheaded "Options" before any heading, and the headings in the
/// order their first argument was added, which puts a subcommand's own arguments before those
/// it inherits from its parents (the host flags of its group, then these from the root).
pub const GLOBAL_HEADING: &str = "Global options";

/// The flags every command takes, local or not: output format, colour, verbosity.
fn general_args() -> Vec<Arg> {
    vec![
        Arg::new("output")
            .short('o')
            .long("output")
            .env("PXAGENT_OUTPUT")
            .global(true)
            .value_name("FORMAT")
            .value_parser(["table", "json"])
            .help("Output format: table for people, json for programs"),
        Arg::new("color")
            .long("color")
            .global(true)
            .value_name("WHEN")
            .value_parser(crate::output::style::ColorChoice::NAMES)
            .help("Colour states and errors: auto (a terminal, unless NO_COLOR, TERM=dumb; CLICOLOR_FORCE forces), always, never; never in JSON"),
        Arg::new("verbose")
            .short('v')
            .long("verbose")
            .global(true)
            .action(ArgAction::Count)
            .help("More log output on stderr (repeat for more)"),
        Arg::new("no_input")
            .long("no-input")
            .env("PXAGENT_NO_INPUT")
            .global(true)
            .action(ArgAction::SetTrue)
            // PXAGENT_NO_INPUT=1 (or any value but 0, false, no, off or empty) turns it on.
            .value_parser(clap::builder::FalseyValueParser::new())
            .help("Never prompt, even at a terminal: a missing confirmation phrase is refused at once (exit 4). -o json implies it"),
    ]
    .into_iter()
    .map(|a| a.help_heading(GLOBAL_HEADING))
    .collect()
}

/// Help heading of the connection flags.
pub const CONNECTION_HEADING: &str = "Connection options";
/// Help heading of the policy flags.
pub const POLICY_HEADING: &str = "Policy options";

/// THE HOST FLAGS, part 1: how to reach the host. This is the one place to add a
/// connection flag (`--hosts`, `--persist`, `-J/--jump` …): every command that reaches a host
/// gets it, under this heading, and local commands (`catalog`, `sudoers`, `audit`, `setup`,
/// `approve`, `gate`, `completions`, `man`) neither list nor accept it; an environment
/// variable set for it never makes a local command fail. [`crate::cli::settings`] reads the
/// values with `host_string` / `host_flag`, which merge what was typed before the command
/// (`pxagent -H h vm list`) and after it (`pxagent vm list -H h`).
pub fn connection_args() -> Vec<Arg> {
    vec![
        Arg::new("host")
            .short('H')
            .long("host")
            .env("PXAGENT_HOST")
            .value_name("HOST")
            .help("Host: a name from the config, user@host[:port], or an ~/.ssh/config alias"),
        Arg::new("port")
            .short('p')
            .long("port")
            .env("PXAGENT_PORT")
            .value_name("PORT")
            .help("SSH port (default 22)"),
        Arg::new("user")
            .short('u')
            .long("user")
            .env("PXAGENT_USER")
            .value_name("USER")
            .help("The agent account (default zen-agent)"),
        Arg::new("identity")
            .short('i')
            .long("identity")
            .env("PXAGENT_IDENTITY")
            .value_name("FILE")
            .help("Private key file (default: ssh-agent, then ~/.ssh/id_*)"),
        Arg::new("known_hosts")
            .long("known-hosts")
            .env("PXAGENT_KNOWN_HOSTS")
            .value_name("FILE")
            .help("known_hosts file (default ~/.ssh/known_hosts)"),
        Arg::new("jump")
            .short('J')
            .long("jump")
            .env("PXAGENT_JUMP")
            .value_name("HOSTS")
            .help("Jump hosts on the way, [user@]host[:port] separated by commas (as ssh -J; `none`: connect directly); each host key is checked like the target's"),
        // Fleets and persistent connections: which hosts a command reaches, how
        // many at once, and whether the connection outlives the call.
        Arg::new("hosts")
            .long("hosts")
            .env("PXAGENT_HOSTS")
            .value_name("LIST|@GROUP")
            .help("Several hosts at once: names from the config or user@host[:port], comma-separated; @NAME for a config group (changes only with hosts listed by name)"),
        Arg::new("all_hosts")
            .long("all-hosts")
            .action(ArgAction::SetTrue)
            .help("Every host of the config (reads, status, batch)"),
        Arg::new("parallel")
            .long("parallel")
            .env("PXAGENT_PARALLEL")
            .value_name("N")
            .help("With --hosts: contact at most N hosts at once (default 8)"),
        Arg::new("persist")
            .long("persist")
            .env("PXAGENT_PERSIST")
            .value_name("DURATION")
            .help("Keep the SSH connection open in the background this long after the last call (30s, 10m), for repeated calls; `pxagent persist status|stop`"),
        Arg::new("accept_new")
            .long("accept-new")
            .action(ArgAction::SetTrue)
            .help("Trust and record an unknown host key (never a changed one)"),
        Arg::new("timeout")
            .long("timeout")
            .env("PXAGENT_TIMEOUT")
            .value_name("SECS")
            .help("Give up on a remote command after this many seconds"),
        Arg::new("config")
            .long("config")
            .env("PXAGENT_CONFIG")
            .value_name("FILE")
            .help("Config file (default $XDG_CONFIG_HOME/pxagent/config.yaml)"),
    ]
    .into_iter()
    .map(|a| a.help_heading(CONNECTION_HEADING))
    .collect()
}

/// THE HOST FLAGS, part 2: what local policy and confirmation get; the one place to
/// add such a flag. Catalog ops take them all; `pxagent mcp` takes `--policy`.
pub fn policy_args() -> Vec<Arg> {
    vec![
        Arg::new("policy")
            .long("policy")
            .env("PXAGENT_POLICY")
            .value_name("FILE")
            .help("Policy file: pxagent's YAML policy or the MCP gateway's JSON form (narrows the config's policy: it can add refusals, never remove one)"),
        Arg::new("dry_run")
            .long("dry-run")
            .action(ArgAction::SetTrue)
            .help("Show the remote command, its sudoers rule and risk; send nothing"),
        // Deliberately no environment variable: a standing confirmation in the environment
        // would confirm every destructive op of a session.
        Arg::new("confirm")
            .long("confirm")
            .value_name("PHRASE")
            .help("The exact confirmation phrase for a destructive op, e.g. 'yes destroy 100'"),
        // No environment variable either: an approval is for one request.
        Arg::new("approval")
            .long("approval")
            .value_name("FILE")
            .help("A signed approval for an op the host policy marks `approve` (what `pxagent approve` or `ssh-keygen -Y sign` printed; - for stdin)"),
        Arg::new("no_wait")
            .long("no-wait")
            .action(ArgAction::SetTrue)
            .help("Return the task's UPID as soon as it runs; a background pxagent follows it to the end"),
    ]
    .into_iter()
    .map(|a| a.help_heading(POLICY_HEADING))
    .collect()
}

/// Every host flag's id, for the check that a local command was given none.
pub fn host_arg_ids() -> Vec<String> {
    connection_args()
        .into_iter()
        .chain(policy_args())
        .map(|a| a.get_id().to_string())
        .collect()
}

/// Which host flags a command that reaches a host takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// The connection flags (`status`, `preflight`).
    Connection,
    /// The connection flags and `--policy` (`mcp`, `health`).
    ConnectionAndPolicyFile,
    /// The connection flags, `--policy` and `--dry-run` (`batch`: each request carries its own
    /// confirmation or approval, and runs to its end).
    ConnectionPolicyFileAndDryRun,
    /// Every host flag (catalog ops).
    All,
}

/// How `freeze` and `thaw` get their approver's signature.
fn control_sign_args() -> [Arg; 2] {
    [
        Arg::new("key").long("key").value_name("FILE")
            .help("Your approver key (an unencrypted OpenSSH private key): sign the gate's statement here"),
        Arg::new("approval").long("approval").value_name("FILE")
            .help("The statement signed elsewhere (`pxagent approve`, `ssh-keygen -Y sign -n pxagent-approval`)"),
    ]
}

/// Give `cmd` (and, as global args, its subcommands) the host flags it takes.
fn reaches_host(cmd: Command, reach: Reach) -> Command {
    let policy = policy_args().into_iter().filter(|a| match reach {
        Reach::Connection => false,
        Reach::ConnectionAndPolicyFile => a.get_id() == "policy",
        Reach::ConnectionPolicyFileAndDryRun => {
            ["policy", "dry_run"].contains(&a.get_id().as_str())
        }
        Reach::All => true,
    });
    cmd.args(
        connection_args()
            .into_iter()
            .chain(policy)
            .map(|a| a.global(true)),
    )
}

/// One parameter's argument. `required`: every op at this CLI path needs it (a variant-only
/// option is checked by the invocation instead, so it is not required for its siblings).
fn param_arg(p: &Param, required: bool) -> Arg {
    let flag = p.name.replace('_', "-");
    let value_name = flag.to_ascii_uppercase();
    let help = if p.takes_name() {
        format!("{} — {}, or its unique name", p.help, p.kind.describe())
    } else {
        format!("{} — {}", p.help, p.kind.describe())
    };
    // Public keys come from a file on the command line (an agent's MCP call sends the keys).
    if p.kind == Kind::SshKeys {
        return Arg::new(p.name)
            .long("sshkey")
            .value_name("FILE")
            .help(format!(
                "{} — a file of OpenSSH public keys, one per line (e.g. ~/.ssh/id_ed25519.pub)",
                p.help
            ));
    }
    match p.how {
        How::Positional => Arg::new(p.name)
            .required(true)
            .value_name(value_name)
            .help(help),
        How::Required => Arg::new(p.name)
            .long(flag)
            .required(required)
            .value_name(value_name)
            .help(help),
        How::Option | How::NextId | How::BasenameOf(_) => Arg::new(p.name)
            .long(flag)
            .value_name(value_name)
            .help(help),
        How::Defaulted(d) => Arg::new(p.name)
            .long(flag)
            .value_name(value_name)
            .help(format!("{help} (default {d})")),
        How::Flag => Arg::new(p.name)
            .long(flag)
            .action(ArgAction::SetTrue)
            .help(p.help),
        How::Node(_) => Arg::new(p.name)
            .long("node")
            .value_name("NODE")
            .help(p.help),
        How::Staged => unreachable!("op_command leaves staged values out"),
    }
}

/// The arguments of a command inside a guest: the argv after `--`, stdin, and
/// file sync.
fn exec_args() -> Vec<Arg> {
    vec![
        Arg::new("command")
            .num_args(1..)
            .last(true)
            .required(true)
            .allow_hyphen_values(true)
            .value_name("PROGRAM ARGS")
            .help("The program to run in the guest and its arguments, after `--` (no shell in between)"),
        Arg::new("stdin")
            .long("stdin")
            .value_name("FILE|-")
            .help("Feed this file (or pxagent's stdin: -) to the command's stdin (VMs: text, at most 64 KiB). Not a secret channel: for a VM it travels as a command argument on the host (its process list, sudo's logs); for a container through sudo's I/O log"),
        Arg::new("push")
            .long("push")
            .value_name("LOCAL:GUEST")
            .action(ArgAction::Append)
            .help("Copy a local file to an absolute guest path before the command (repeatable; VMs: at most 46080 bytes). Not a secret channel: for a VM the content travels as a command argument on the host (its process list, sudo's logs); for a container through sudo's I/O log"),
        Arg::new("mkdir")
            .long("mkdir")
            .action(ArgAction::SetTrue)
            .help("Make each --push file's guest directory first (`/bin/mkdir -p DIR`, run as a guest command: a command allowlist must admit it)"),
        Arg::new("pull")
            .long("pull")
            .value_name("GUEST:LOCAL")
            .action(ArgAction::Append)
            .help("Copy a guest file to a local path after the command exited 0 (repeatable; checksum-verified)"),
        Arg::new("force")
            .long("force")
            .action(ArgAction::SetTrue)
            .help("Overwrite existing local files when pulling"),
        Arg::new("exit_code")
            .long("exit-code")
            .action(ArgAction::SetTrue)
            .help("Exit with the guest command's own exit code once it ran (128+N when a signal killed it); pxagent's own failures keep their codes"),
    ]
}

/// The clap id of a list filter (`--node` → `filter_node`): apart from the ops' own
/// parameters, so a filter never becomes an op value.
pub fn filter_id(flag: &str) -> String {
    format!("filter_{flag}")
}

fn op_command(name: &str, ops: &[&'static Op]) -> Command {
    // The least specific op describes the command; variants are listed after it.
    let base = ops
        .iter()
        .min_by_key(|o| o.select.len())
        .expect("catalog invariant: every CLI path has an op");
    let mut long = format!(
        "{}\n\nop: {} · risk: {}",
        base.about,
        base.id,
        base.risk.name()
    );
    if let Some(c) = base.confirm {
        long.push_str(&format!("\nneeds the confirmation phrase `{}`", c.phrase));
    }
    for v in ops.iter().filter(|o| *o != base) {
        let when: Vec<String> = v
            .select
            .iter()
            .map(|s| match s {
                crate::catalog::Select::Flag(f) => format!("--{}", f.replace('_', "-")),
                crate::catalog::Select::Contains(p, needle, _) => format!("<{p}> with '{needle}'"),
            })
            .collect();
        long.push_str(&format!(
            "\nwith {}: op {} · risk {}{}",
            when.join(" and "),
            v.id,
            v.risk.name(),
            v.confirm
                .map(|c| format!(", needs `{}`", c.phrase))
                .unwrap_or_default()
        ));
    }
    let mut cmd = Command::new(name.to_string())
        .about(base.about)
        .long_about(long);
    let mut seen: Vec<&str> = Vec::new();
    // Variants add their switch; same-named params are identical (a catalog test checks).
    for op in ops {
        for p in op.params {
            // A guest command's argv and stdin come from the exec arguments below.
            let exec_input =
                op.runs_guest_command() && matches!(p.kind, Kind::GuestArgv | Kind::GuestData);
            // A sent file's size and digest are computed from it, never given.
            if !exec_input && p.given() && !seen.contains(&p.name) {
                seen.push(p.name);
                let required = ops
                    .iter()
                    .all(|o| o.param(p.name).is_some_and(|q| q.how == How::Required));
                cmd = cmd.arg(param_arg(p, required));
                // `--ip CIDR --gw ADDR`: the gateway joins the one ipconfig value.
                if p.kind == Kind::IpConfig {
                    cmd = cmd.arg(
                        Arg::new("gw")
                            .long("gw")
                            .value_name("ADDR")
                            .requires(p.name)
                            .help("cloud-init: the IPv4 gateway of --ip's network"),
                    );
                }
            }
        }
    }
    if base.node_scoped_read() {
        cmd = cmd.arg(
            Arg::new("all_nodes")
                .long("all-nodes")
                .action(ArgAction::SetTrue)
                .conflicts_with("node")
                .help("Run it on every online node of the cluster, over one connection: one result per node"),
        );
        if base.param("node").is_some_and(|p| p.how == How::Positional) {
            cmd = cmd.mut_arg("node", |a| {
                a.required(false).required_unless_present("all_nodes")
            });
        }
    }
    if base.runs_guest_command() {
        cmd = cmd.args(exec_args()).after_help(
            "Exits 0 when the command ran in the guest, whatever its exit code (JSON: data.exitcode), \
             unless --exit-code is given; rate-limited (default 10 per minute) and checked against the \
             policy's command allowlist.",
        );
    }
    if crate::views::Filter::applies_to(base.view) {
        for (name, value, help) in crate::views::Filter::FLAGS {
            cmd = cmd.arg(
                Arg::new(filter_id(name))
                    .long(name)
                    .value_name(value)
                    .help(help),
            );
        }
    }
    if base.risk == Risk::Confirm {
        cmd = cmd.after_help(
            "Destructive: runs only with the exact phrase (typed at the prompt, or --confirm).",
        );
    }
    if ops.contains(&&crate::catalog::ops::PVE_VERSION) {
        cmd = cmd
            .about("Show pxagent's version and the host's Proxmox VE version")
            .arg(
                Arg::new("client")
                    .long("client")
                    .action(ArgAction::SetTrue)
                    .help("Only pxagent's own version: no connection, no host needed"),
            );
    }
    cmd
}

/// The whole command tree.
pub fn command() -> Command {
    command_only(None)
}

/// The command tree one invocation needs, and whether it is the whole tree: when `args` name
/// a command (`vm start 100`, `gate`, after any root flags), the root, its flags and the
/// commands that are no ops, with only the ops of that word's group (none for `gate`); the
/// whole tree when they name none. Building the arguments of every op is most of a local
/// command's start-up, and of the gate's (issue 27). A caller whose parse fails parses again
/// with the whole tree: help, `--version` and errors (with their suggestions) stay as they
/// were.
pub fn command_for(args: &[OsString]) -> (Command, bool) {
    match first_word(args) {
        Some(w) => (command_only(Some(w)), false),
        None => (command(), true),
    }
}

/// The first word of `args` (after the program's name) that is neither a root flag nor a
/// root flag's value: the command's name, if it is plain text.
fn first_word(args: &[OsString]) -> Option<&str> {
    let flags: Vec<Arg> = connection_args()
        .into_iter()
        .chain(policy_args())
        .chain(general_args())
        .collect();
    let takes_value = |long: Option<&str>, short: Option<char>| {
        flags.iter().any(|a| {
            a.get_action().takes_values()
                && (long.is_some_and(|l| {
                    a.get_long() == Some(l) || a.get_all_aliases().is_some_and(|al| al.contains(&l))
                }) || short.is_some_and(|c| {
                    a.get_short() == Some(c)
                        || a.get_all_short_aliases().is_some_and(|al| al.contains(&c))
                }))
        })
    };
    let mut words = args.iter().skip(1);
    while let Some(w) = words.next() {
        let w = w.to_str()?;
        if w == "--" {
            return None;
        }
        if let Some(long) = w.strip_prefix("--") {
            if !long.contains('=') && takes_value(Some(long), None) {
                words.next();
            }
            continue;
        }
        if let Some(shorts) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            // `-o json`, `-vH host`: a value flag takes the rest of the word, or the next.
            for (i, c) in shorts.char_indices() {
                if takes_value(None, Some(c)) {
                    if i + c.len_utf8() == shorts.len() {
                        words.next();
                    }
                    break;
                }
            }
            continue;
        }
        return Some(w);
    }
    None
}

/// [`command`] with only the op group `only` (every group when `None`).
fn command_only(only: Option<&str>) -> Command {
    let mut root = Command::new("pxagent")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Manage Proxmox VE through a key-only SSH account and a least-privilege sudoers whitelist")
        .subcommand_required(true)
        .arg_required_else_help(true)
        // The host flags before the command (`pxagent -H pve1 vm list`); each command that
        // reaches a host has them too (after the command), local ones do not.
        .args(connection_args())
        .args(policy_args())
        // After the host flags, so that the root's help, too, lists its headings in the order
        // of every command's: connection, policy, global ([`GLOBAL_HEADING`]).
        .args(general_args())
        .subcommand(Command::new("catalog").about("List every operation with its risk, profiles, remote command and sudoers rule"))
        .subcommand(reaches_host(Command::new("skill")
            .about("Print a skill document for AI agents (Agent Skills SKILL.md) generated from the catalog")
            .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                .value_parser(["readonly", "operator", "full"])
                .help("Only the operations of this profile: readonly, operator or full"))
            .arg(Arg::new("from_host").long("from-host").action(ArgAction::SetTrue)
                .help("Only what the account may run on its host: its sudoers rules (and the gate's host policy), read as preflight reads them")),
            Reach::Connection))
        .subcommand(reaches_host(
            Command::new("preflight")
                .about("Prove the host's setup: key-only SSH, sudo version, the rules a profile needs (and nothing dangerous), audit logging")
                .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                    .help("The profile whose rules must be present: readonly, operator or full")),
            Reach::Connection,
        ))
        .subcommand(reaches_host(
            Command::new("mcp")
                .about("Serve the catalog as Model Context Protocol tools on stdin/stdout (for AI clients)")
                .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                    .value_parser(["readonly", "operator", "full"])
                    .help("Offer only the tools of this profile: readonly, operator or full"))
                .arg(Arg::new("list_tools").long("list-tools").action(ArgAction::SetTrue)
                    .help("Print the tools this server would offer (name, risk, description; tab-separated) and exit"))
                .arg(Arg::new("tools").long("tools").value_name("SET")
                    .help("Which tools: all (one per operation, the default), compact (find_operation, describe_operation, run_operation: every operation in three tools), or op patterns such as 'vm.*,task.*'"))
                .arg(Arg::new("output_schemas").long("output-schemas").action(ArgAction::SetTrue)
                    .help("List each tool with its output schema and long description (about 250 KB instead of under 40 KB)")),
            Reach::ConnectionAndPolicyFile,
        ))
        .subcommand(
            Command::new("gate")
                .about("Host side: the agent key's forced command; checks each request against the catalog and the host policy, then runs it through sudo")
                .long_about("Host side: the agent key's forced command (installed by `pxagent setup render`). \
Reads SSH_ORIGINAL_COMMAND, accepts exactly one catalog command line (or a pxagent-gate/1 envelope), \
applies the host policy (--policy, default /etc/pxagent/policy.yaml; with `approve`, signed approvals \
by the keys in --approvers), counts host rate limits, logs each decision to syslog, then runs \
`sudo -n` with that argv. Never starts a shell. Options come from the command line only.")
                // Only what the forced command line says counts: no environment variable.
                .arg(Arg::new("policy").long("policy").value_name("FILE")
                    .help("The host policy (default /etc/pxagent/policy.yaml)"))
                .arg(Arg::new("approvers").long("approvers").value_name("FILE")
                    .help("The approvers' public keys (default /etc/pxagent/approvers)"))
                .arg(Arg::new("state_dir").long("state-dir").value_name("DIR")
                    .help("Host rate-limit counters and issued approval statements (default /var/lib/pxagent/<account>)"))
                .arg(Arg::new("nonce_dir").long("nonce-dir").value_name("DIR")
                    .help("The host's used approvals, shared by every gated account (root-owned, sticky; default /var/lib/pxagent/.nonces)"))
                .arg(Arg::new("log_socket").long("log-socket").value_name("PATH")
                    .help("The syslog socket for the host audit (default /dev/log)"))
                .arg(Arg::new("control_dir").long("control-dir").value_name("DIR")
                    .help("The approvers' signed freezes and thaws, shared by every gated account (root-owned, sticky; default /var/lib/pxagent/.control)"))
                .arg(Arg::new("freeze").long("freeze").value_name("FILE")
                    .help("The kill switch: while this file exists (root's; its first line is the reason) only reads run (default /etc/pxagent/freeze)"))
                .arg(Arg::new("host_chain").long("host-chain").action(ArgAction::SetTrue)
                    .help("Append every record to the host audit chain too (root's /var/log/pxagent/gate.jsonl, through the helper's `audit-append`); a request whose record cannot be appended does not run"))
                .arg(Arg::new("machine_id").long("machine-id").value_name("FILE")
                    .help("A root-owned file holding the host's machine id, for a host without /etc/machine-id that must not get one (a test bed in a container; default /etc/machine-id, then /var/lib/dbus/machine-id)")),
        )
        .subcommand(reaches_host(
            Command::new("status").about("One summary of the host or cluster: version, nodes, storages, guests by state"),
            Reach::Connection,
        ))
        .subcommand(reaches_host(
            Command::new("health")
                .about("Is anything wrong? Quorum, nodes down, failed tasks, full storages, SMART, services, HA, updates: one call, exit 5 when something is")
                .long_about("Is anything wrong? One call over one connection reads the cluster's membership and \
quorum, its resources, its recent tasks and the HA manager, then each online node's disks, services and pending \
updates, and lists what it found, worst first: each finding with its severity (critical, warning, info), where it \
is, and the pxagent command that shows more. Checks the local policy denies, or the host refuses, are listed as \
not checked. Exit 0 when no finding is a warning or critical (pending updates are info), exit 5 (`unhealthy`) \
otherwise.")
                .arg(Arg::new("since").long("since").value_name("WHEN")
                    .help("Failed tasks from then on: an age (24h, 2d), a date, an RFC 3339 time or Unix seconds [default: 24h]"))
                .arg(Arg::new("storage_threshold").long("storage-threshold").value_name("PCT")
                    .help("A storage this full or fuller is a finding (percent) [default: 90]")),
            Reach::ConnectionAndPolicyFile,
        ))
        .subcommand(reaches_host(
            Command::new("batch")
                .about("Run many operations over one connection: JSON Lines requests on stdin ({\"id\":…,\"op\":\"vm.status\",\"args\":{…}}), one result line each on stdout, in input order")
                .long_about("Run many operations over one connection. Each stdin line is one request: \
{\"id\": <any JSON>, \"op\": \"vm.status\", \"args\": {\"vmid\": 101}} — `op` is a catalog op id (`pxagent catalog`), \
`args` are the op's MCP tool arguments (`confirm` carries a phrase, `approval` a signature). Each gets one line on \
stdout, in input order, as soon as it and those before it are done: {\"id\":…,\"ok\":true,\"op\":…,\"data\":…} or \
{\"id\":…,\"ok\":false,\"op\":…,\"line\":N,\"error\":{…}}. Up to 8 run at once; requests for one guest keep \
their order around a change. Policy, confirmation, limits and audit apply to each as in the CLI. \
Exit 0 when all succeeded, 2 when any line was invalid, 11 when any change's outcome is unknown, \
3/4/8 when every failure was that refusal (also 6/7/9: authentication, connection, sudo), else 1.")
                .arg(Arg::new("stop_on_error").long("stop-on-error").action(ArgAction::SetTrue)
                    .help("Run one request at a time and stop reading at the first failure")),
            Reach::ConnectionPolicyFileAndDryRun,
        ))
        .subcommand(reaches_host(
            Command::new("persist")
                .about("The persistent connections of --persist: list them or end them")
                .subcommand_required(true)
                .subcommand(Command::new("status").about("List this account's persistent connections: target, idle time, commands run"))
                .subcommand(Command::new("stop").about("End this account's persistent connections (with -H: only that host's)"))
                .subcommand(Command::new("serve").hide(true).about("Internal: the background holder of one connection")),
            Reach::Connection,
        ))
        .subcommand(
            Command::new("audit")
                .about("The local audit trail: one hash-chained JSON line per invocation")
                .subcommand_required(true)
                .subcommand(
                    Command::new("show")
                        .about("List audit records: what was asked for, of which target, and what pxagent decided")
                        .args(audit_filter_args()),
                )
                .subcommand(reaches_host(
                    Command::new("verify")
                        .about("Check the hash chain; exit 1 naming the first broken line (with --host HOST: the host's chain of gate records)")
                        .long_about("Check the local audit log's hash chain; exit 1 naming the first broken line. With --host HOST \
(typed: PXAGENT_HOST alone keeps it local), check the host audit chain instead: the gated host's root-side helper \
reads /var/log/pxagent/gate.jsonl, the gate's records hash-chained and MAC'd with a key only root reads, and names \
the first edited, removed, inserted or forged line; the head it reports is kept here, and the next check asks for \
that line's hash again, so records cut off the end or a rewritten chain are found too."),
                    Reach::Connection,
                ))
                .subcommand(
                    Command::new("new-chain")
                        .about("Move the log aside and start a new chain linked to its head (when a broken line blocks changes, or to archive it)"),
                ),
        )
        .subcommand(reaches_host(
            Command::new("freeze")
                .about("Freeze a gated host as an approver: until a signed thaw (or root), its gate runs reads only")
                .long_about("Freeze a gated host as an approver, without root: the gate answers with a statement \
(op host.freeze, your reason, the host's name and machine id), you sign it with a key listed in the \
host's approvers file, and every gated account of the host then runs reads only; each change, confirm \
and exec operation is refused with exit 3, kind `frozen`, and your reason. With --key the statement \
is signed here; without, it is printed (exit 4) for `pxagent approve` and sent with --approval. Root \
freezes with a file instead: `echo REASON > /etc/pxagent/freeze`.")
                .arg(Arg::new("reason").long("reason").required(true).value_name("TEXT")
                    .help("Why: one line everyone refused reads"))
                .args(control_sign_args()),
            Reach::Connection,
        ))
        .subcommand(reaches_host(
            Command::new("reconcile")
                .about("Find out what became of a change whose result never arrived (exit 11), and record it")
                .long_about("Find out what became of a change whose result never arrived (exit 11, outcome_unknown: \
the connection was lost after it was sent), or whose client was killed: reads the node's task list for the \
guest's task started since then and its status (ok, failed, running, or not_run when there is none), or for a \
change without a task (vm set) the guest's config (applied or not_applied), and appends a `reconcile` record \
naming the original to the audit log. Reads only; nothing is sent again.")
                .arg(Arg::new("record").required(true).value_name("SEQ")
                    .help("The audit record's number (named by the outcome_unknown error; `pxagent audit show`)")),
            Reach::Connection,
        ))
        .subcommand(reaches_host(
            Command::new("undo")
                .about("Take a change back by the inverse its audit record names, once; --list shows what can be undone")
                .long_about("Take a change back: every change's audit record names its inverse (start -> shutdown, \
suspend -> resume, snapshot -> delete it, set -> set back to the values read before, migrate -> migrate back, \
create or clone -> destroy). `pxagent undo RECORD` runs it once, as that op, through the same policy, \
confirmation phrase and approval; without RECORD, this host's last change that can be undone. A set back is \
refused as a conflict when the guest no longer holds what the change set. When the policy's snapshot_before \
took a snapshot first, --rollback rolls back to it (also offered for a change without an inverse, such as a \
resize). `pxagent undo --list` shows the last changes and how each is undone, or why it cannot be.")
                .arg(Arg::new("record").value_name("RECORD")
                    .help("The change's audit record (from `undo --list` or `audit show`); default: the last one on this host"))
                .arg(Arg::new("list").long("list").action(ArgAction::SetTrue).conflicts_with_all(["record", "rollback"])
                    .help("Show the last changes and how each is undone; send nothing"))
                .arg(Arg::new("rollback").long("rollback").action(ArgAction::SetTrue)
                    .help("Roll back to the snapshot taken before the change (policy snapshot_before)")),
            Reach::All,
        ))
        .subcommand(reaches_host(
            Command::new("grant")
                .about("Grant an agent a time-boxed window of ops on a gated host, signed by an approver; list or revoke grants")
                .long_about("Grant an agent a window of write access instead of a signature per call: the gate answers \
with a statement (op host.grant: the ops, VMID ranges, storages, end and count, the host's name and machine id, \
the account) that you sign with a key listed in the host's approvers file. Until it ends (or is revoked) the \
gate admits the requests it covers whose host policy says `approve` or `grantable`, without a per-call approval; \
each host record names the grant. Confirmation phrases still apply. `grant list` shows the grants in force, \
`grant revoke ID --key KEY` ends one at once.")
                .args_conflicts_with_subcommands(true)
                .arg(Arg::new("ops").long("ops").value_name("LIST")
                    .help("Op ids or globs, comma-separated: vm.start,vm.shutdown,vm.snapshot*"))
                .arg(Arg::new("vmids").long("vmids").value_name("RANGES")
                    .help("The guests it covers: 100-199,250 (default: any guest)"))
                .arg(Arg::new("storages").long("storages").value_name("LIST")
                    .help("The storages it covers, comma-separated (default: any)"))
                .arg(Arg::new("for").long("for").value_name("DURATION")
                    .help("How long: 30m, 2h (at most the host policy's grants.max_for, default 8h)"))
                .arg(Arg::new("max").long("max").value_name("N")
                    .help("Admit at most N requests"))
                .args(control_sign_args())
                .subcommand(Command::new("list").about("The grants of this account in force on the host"))
                .subcommand(
                    Command::new("revoke")
                        .about("End a grant at once (signed by an approver)")
                        .arg(Arg::new("id").required(true).value_name("ID").help("The grant's id, from `grant list`"))
                        .args(control_sign_args()),
                ),
            Reach::Connection,
        ))
        .subcommand(reaches_host(
            Command::new("thaw")
                .about("Lift an approver's freeze of a gated host (signed, like the freeze)")
                .long_about("Lift the approvers' freezes of a gated host: the gate answers with a statement naming \
the freezes in force (op host.thaw), you sign it with a listed key, and changes run again. A freeze \
that comes later is never lifted by this thaw. Root's freeze file is lifted only by root (rm it).")
                .args(control_sign_args()),
            Reach::Connection,
        ))
        .subcommand(
            Command::new("approve")
                .about("Sign an approval statement a host issued for an operation its policy marks `approve`")
                .long_about(
                    "Sign an approval statement a host issued for an operation its policy marks `approve`.\n\n\
                     Shows what is being approved on stderr, then prints the armored SSH signature \
                     (what `ssh-keygen -Y sign -n pxagent-approval` prints) on stdout; with --ttl, the \
                     statement with its new expiry followed by the signature. Hand that output back as \
                     the approval. Nothing is sent anywhere and nothing is logged.",
                )
                .arg(Arg::new("key").long("key").required(true).value_name("FILE")
                    .help("Your private key: an unencrypted OpenSSH key file (for a passphrase or security key, use `ssh-keygen -Y sign`)"))
                .arg(Arg::new("ttl").long("ttl").value_name("DURATION")
                    .help("Give the statement a new expiry this long from now: 30m, 1h, or seconds; at most 1h"))
                .arg(Arg::new("statement").required(true).value_name("STATEMENT")
                    .help("The statement: a file, - for stdin, or the text itself (starting `pxagent-approval/2`)")),
        )
        .subcommand(
            Command::new("sudoers")
                .about("Render pxagent's sudoers whitelist, or lint any sudoers file")
                .subcommand_required(true)
                .subcommand(
                    Command::new("render")
                        .about("Print the sudoers file for the agent account (use --user to name it)")
                        .arg(account_arg())
                        .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                            .help("readonly (reads), operator (+ reversible changes), full (+ confirm ops)"))
                        .arg(Arg::new("vmids").long("vmids").value_name("RANGES")
                            .help("Allow only these VM ids in every VM rule, e.g. 100-199,250"))
                        .arg(Arg::new("ctids").long("ctids").value_name("RANGES")
                            .help("Allow only these container ids in every container rule (default: --vmids)"))
                        .arg(Arg::new("ct_exec").long("ct-exec").value_name("RANGES")
                            .help("Allow `pct exec` (ct exec: root in the container) in these containers only; without it no profile allows container exec"))
                        .arg(unfenced_ops_arg())
                        .arg(storage_roots_arg())
                        .arg(nfs_servers_arg())
                        .arg(iso_max_used_arg()),
                )
                .subcommand(
                    Command::new("lint")
                        .about("Report dangerous or broken rules in a sudoers file (exit 1 on errors)")
                        .long_about("Report dangerous or broken rules in a sudoers file (exit 1 on errors).\n\n\
                                     Errors are rules that apply to the account --user (default zen-agent): by name, \
                                     a User_Alias, ALL, or a group it is in (from this host's group database, and \
                                     --groups); rules for other accounts and groups are reported as information.")
                        .arg(Arg::new("file").required(true).value_name("FILE").help("A sudoers file, or - for stdin"))
                        .arg(account_arg())
                        .arg(Arg::new("groups").long("groups").value_name("GROUPS")
                            .help("Count the account as a member of these groups too (comma-separated), e.g. when linting a file for another host")),
                ),
        )
        .subcommand(setup_command())
        .subcommand(
            Command::new("completions")
                .about("Print a shell completion script (generated from this command tree)")
                .long_about("Print a shell completion script, generated from the same command tree as the help.\n\n\
                    bash: pxagent completions bash > ~/.local/share/bash-completion/completions/pxagent\n\
                    zsh:  pxagent completions zsh > ~/.zfunc/_pxagent   (with fpath+=~/.zfunc before compinit)\n\
                    fish: pxagent completions fish > ~/.config/fish/completions/pxagent.fish")
                .arg(Arg::new("shell").required(true).value_name("SHELL")
                    .value_parser(clap::value_parser!(clap_complete::Shell))
                    .help("bash, zsh, fish, elvish or powershell")),
        )
        .subcommand(
            Command::new("man")
                .about("Print the manual page (roff) on stdout: pxagent's, or a command's")
                .long_about("Print the manual page (roff), generated from the same command tree as the help: \
                    `pxagent man | man -l -` reads it, `pxagent man > pxagent.1` installs it. \
                    With a command (`pxagent man vm start`), that command's own page.")
                .arg(Arg::new("command").num_args(0..).value_name("COMMAND")
                    .help("The command whose page to print (default: pxagent's)")),
        );

    // Group ops by their first word, then by the rest of the path, at any depth
    // (`vm firewall add`). Steps of another op's flow (vm exec's file sync) are no commands
    // of their own.
    let ops: Vec<&'static Op> = OPS
        .iter()
        .copied()
        .filter(|o| !o.is_step() && only.is_none_or(|w| o.cli[0] == w))
        .collect();
    for cmd in op_tree(&ops, 0) {
        root = root.subcommand(reaches_host(cmd, Reach::All));
    }
    short_help(root, false)
}

/// One line that stands for the host, policy and global options in the short help (`-h`),
/// which leaves them out so that a command's own arguments fit a screen; `--help` lists them
/// all under their headings.
const SHORT_HELP_OPTIONS: &str = "Host and output: -H HOST (or PXAGENT_HOST), -o json, --dry-run, --confirm PHRASE, --no-input; all options: --help";

/// Leave the shared options out of `-h` everywhere, and give every command that reaches a host
/// (it or a parent has `--host`) [`SHORT_HELP_OPTIONS`] after its own short help.
fn short_help(cmd: Command, inherited: bool) -> Command {
    let host = cmd
        .get_arguments()
        .find(|a| a.get_id() == "host" && a.get_help_heading() == Some(CONNECTION_HEADING));
    let reaches = inherited || host.is_some();
    // The root's host flags are its own (`pxagent -H pve1 vm list`); a command's are global,
    // so its subcommands reach the host too.
    let passes_on = inherited || host.is_some_and(|a| a.is_global_set());
    let shared: Vec<String> = cmd
        .get_arguments()
        .filter(|a| {
            let heading = a.get_help_heading();
            heading == Some(GLOBAL_HEADING)
                || heading == Some(CONNECTION_HEADING)
                || heading == Some(POLICY_HEADING)
        })
        .map(|a| a.get_id().to_string())
        .collect();
    let mut cmd = cmd;
    for id in shared {
        cmd = cmd.mut_arg(id, |a| a.hide_short_help(true));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for n in names {
        cmd = cmd.mut_subcommand(n, |c| short_help(c, passes_on));
    }
    if reaches && cmd.get_subcommands().next().is_none() {
        let own = cmd.get_after_help().map(|h| h.to_string());
        let short = match &own {
            Some(h) => format!("{h}\n\n{SHORT_HELP_OPTIONS}"),
            None => SHORT_HELP_OPTIONS.to_string(),
        };
        cmd = cmd
            .after_help(short)
            .after_long_help(own.unwrap_or_default());
    }
    cmd
}

/// `--storage-roots` of `sudoers render` and `setup render`.
fn storage_roots_arg() -> Arg {
    Arg::new("storage_roots")
        .long("storage-roots")
        .value_name("DIRS")
        .help("Directory storages (storage add-dir) only below these directories, joined by ',' (default /mnt,/srv; never /, /etc, /root, /usr, /var, /boot, /proc, /sys, /dev, /bin, /sbin, /lib*, /run, /tmp)")
}

/// `--nfs-servers` of `sudoers render` and `setup render`.
fn nfs_servers_arg() -> Arg {
    Arg::new("nfs_servers")
        .long("nfs-servers")
        .value_name("SERVERS")
        .help("The NFS servers the agent may add storages from (storage add-nfs), joined by ',': IPv4 addresses or DNS names. Without it, storage add-nfs is not rendered: a share's files are written by its server and read by root-run Proxmox code")
}

/// `--iso-max-used` of `sudoers render` and `setup render`.
fn iso_max_used_arg() -> Arg {
    Arg::new("iso_max_used")
        .long("iso-max-used")
        .value_name("PERCENT")
        .help("How full an ISO upload (iso upload) may leave a storage's file system, 1-99 (default 90): the helper refuses an image that would fill it more, and the account cannot ask for a higher limit")
}

/// `--user` of the local commands that name the agent account (`sudoers render`, `setup`).
/// It has `PXAGENT_USER` too, so the account one connects as is the one a render is for.
fn account_arg() -> Arg {
    Arg::new("user")
        .short('u')
        .long("user")
        .env("PXAGENT_USER")
        .value_name("USER")
        .help("The agent account (default zen-agent)")
}

/// `audit show`'s filters.
fn audit_filter_args() -> Vec<Arg> {
    vec![
        Arg::new("since")
            .long("since")
            .value_name("WHEN")
            .help("Only records from then on: RFC 3339, a date, or an age like 30m, 2h, 1d"),
        Arg::new("until")
            .long("until")
            .value_name("WHEN")
            .help("Only records before then (same forms as --since)"),
        Arg::new("op")
            .long("op")
            .value_name("GLOB")
            .help("Only these operations: an op id or a glob (vm.start, vm.*, *.snapshot)"),
        Arg::new("host")
            .long("host")
            .value_name("GLOB")
            .help("Only records for this host (as shown in the HOST column; a glob)"),
        Arg::new("decision")
            .long("decision")
            .value_name("DECISION")
            .value_parser(["allowed", "confirmed", "refused", "dry_run", "failed"])
            .help("Only records with this decision"),
        Arg::new("vmid")
            .long("vmid")
            .value_name("VMID")
            .help("Only records whose target is this guest"),
    ]
}

/// `setup render|revoke`: the root scripts for the host (local commands, nothing is sent).
/// `--unfenced-ops` of `sudoers render` and `setup render`.
fn unfenced_ops_arg() -> Arg {
    Arg::new("unfenced_ops")
        .long("unfenced-ops")
        .action(ArgAction::SetTrue)
        .help("With --vmids/--ctids, also allow the changes no VMID fence can restrict (storage remove, ISO and template downloads); a fenced render leaves them out without it")
}

fn setup_command() -> Command {
    let sshd_args = || {
        [
            Arg::new("sshd_config").long("sshd-config").value_name("PATH")
                .help("The config file the host's sshd reads (default /etc/ssh/sshd_config); the drop-in goes to sshd_config.d/ beside it. For test beds and unusual hosts"),
            Arg::new("sshd_pid_file").long("sshd-pid-file").value_name("PATH")
                .help("Reload sshd with SIGHUP to the pid in this file instead of through systemd. For test beds"),
        ]
    };
    Command::new("setup")
        .about("Print reviewable, idempotent root scripts that set up or revoke the gated agent account on the host")
        .subcommand_required(true)
        .subcommand(
            Command::new("render")
                .about("Print the root script that sets up the agent account (--user, default zen-agent): sudo, account, key, sshd, sudoers, host policy")
                .arg(account_arg())
                .arg(Arg::new("policy").long("policy").env("PXAGENT_POLICY").value_name("FILE")
                    .help("Install this file as the host policy (replacing the installed one, kept as .bak)"))
                .arg(Arg::new("pubkey").long("pubkey").value_name("FILE").required(true)
                    .help("The agent's OpenSSH public key (one line, no options): its only way in"))
                .arg(Arg::new("from").long("from").value_name("CIDR")
                    .help("Accept the key only from these addresses or networks, e.g. 192.0.2.0/24,2001:db8::/32"))
                .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                    .help("The sudoers profile: readonly, operator or full"))
                .arg(Arg::new("vmids").long("vmids").value_name("RANGES")
                    .help("Allow only these VM ids in every VM rule, e.g. 100-199,250"))
                .arg(Arg::new("ctids").long("ctids").value_name("RANGES")
                    .help("Allow only these container ids in every container rule (default: --vmids)"))
                .arg(Arg::new("ct_exec").long("ct-exec").value_name("RANGES")
                    .help("Allow `pct exec` in these containers only"))
                .arg(unfenced_ops_arg())
                .arg(storage_roots_arg())
                .arg(nfs_servers_arg())
                .arg(iso_max_used_arg())
                .arg(Arg::new("approvers").long("approvers").value_name("FILE")
                    .help("Install these approvers' public keys (one per line; replaces the installed file)"))
                .arg(Arg::new("gate_bin").long("gate-bin").value_name("PATH")
                    .help("Where the pxagent binary (the gate) is installed on the host (default /usr/local/bin/pxagent)"))
                .arg(Arg::new("policy_path").long("policy-path").value_name("PATH")
                    .help("Where the host policy goes (default /etc/pxagent/policy.yaml)"))
                .arg(Arg::new("approvers_path").long("approvers-path").value_name("PATH")
                    .help("Where the approvers file goes (default /etc/pxagent/approvers)"))
                .arg(Arg::new("log_socket").long("log-socket").value_name("PATH")
                    .help("The syslog socket the gate writes its audit to (default /dev/log; for test beds without journald)"))
                .args(sshd_args())
                .after_help(
                    "Without --policy an installed host policy stays and a missing one becomes a default that allows every op.\n\
                     Review the script, then run it as root on the host: \
                     pxagent setup render --user zen-agent --pubkey agent.pub > setup.sh; less setup.sh; bash setup.sh",
                ),
        )
        .subcommand(
            Command::new("revoke")
                .about("Print the root script that revokes the agent account (--user): expire, lock, remove keys, drop-in and sudoers, end its processes")
                .arg(account_arg())
                .args(sshd_args()),
        )
}

/// What each group of catalog ops is for (its `--help` line). A new group needs its line
/// here: a test fails for a group without one.
const GROUPS: &[(&str, &str)] = &[
    (
        "cluster",
        "Cluster-wide status, resources, tasks and the next free VMID",
    ),
    (
        "node",
        "Cluster nodes: list, status, Proxmox version, metrics, network",
    ),
    (
        "vm",
        "QEMU/KVM virtual machines: status, lifecycle, settings, snapshots, migration, commands inside",
    ),
    (
        "ct",
        "LXC containers: status, lifecycle, settings, snapshots, migration, commands inside",
    ),
    ("storage", "Storages: usage, content, removal"),
    (
        "task",
        "Proxmox tasks (UPIDs): status, log, list, wait, stop",
    ),
    (
        "backup",
        "Backups (vzdump) of VMs and containers: create, list, restore, prune, remove",
    ),
    ("iso", "ISO images on a storage: list, download, remove"),
    (
        "template",
        "Container templates: what Proxmox offers, download, remove",
    ),
    (
        "ha",
        "High availability: the HA manager's view of the cluster",
    ),
];

/// The commands of `ops` at word `depth` of their paths: a leaf where every op ends there, a
/// group of the next words otherwise (a path is never both).
fn op_tree(ops: &[&'static Op], depth: usize) -> Vec<Command> {
    let mut words: Vec<&str> = Vec::new();
    for op in ops {
        if !words.contains(&op.cli[depth]) {
            words.push(op.cli[depth]);
        }
    }
    words
        .into_iter()
        .map(|word| {
            let here: Vec<&'static Op> = ops
                .iter()
                .copied()
                .filter(|o| o.cli[depth] == word)
                .collect();
            if here.iter().all(|o| o.cli.len() == depth + 1) {
                return op_command(word, &here);
            }
            let path: Vec<&str> = here[0].cli[..=depth].to_vec();
            op_tree(&here, depth + 1).into_iter().fold(
                Command::new(word)
                    .subcommand_required(true)
                    .about(group_about(&path.join(" ")).unwrap_or(word)),
                Command::subcommand,
            )
        })
        .collect()
}

fn group_about(top: &str) -> Option<&'static str> {
    GROUPS.iter().find(|(g, _)| *g == top).map(|(_, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_valid() {
        command().debug_assert();
    }

    #[test]
    fn every_op_is_reachable() {
        for op in OPS.iter().filter(|o| !o.is_step()) {
            let mut argv = vec!["pxagent".to_string()];
            argv.extend(op.cli.iter().map(|s| s.to_string()));
            for p in op
                .params
                .iter()
                .filter(|p| p.how == How::Positional && p.kind != Kind::GuestArgv)
            {
                argv.push(p.kind.example().to_string());
            }
            if op.runs_guest_command() {
                argv.extend(["--", "uname", "-a"].map(String::from));
            }
            for (name, value) in crate::catalog::example_values(op) {
                let p = op.param(name).unwrap();
                match p.how {
                    How::Flag => argv.push(format!("--{}", name.replace('_', "-"))),
                    How::Required | How::Defaulted(_) => {
                        argv.push(format!("--{}", name.replace('_', "-")));
                        argv.push(value);
                    }
                    How::Positional => {
                        // Selection by value: put the selecting example in its place.
                        if let Some(pos) = argv.iter().position(|a| a == p.kind.example()) {
                            argv[pos] = value;
                        }
                    }
                    _ => {}
                }
            }
            assert!(command().try_get_matches_from(&argv).is_ok(), "{argv:?}");
            // The tree built for this argv alone parses it the same, also after root flags.
            for pre in [
                &[][..],
                &["-o", "json", "-H", "h1"][..],
                &["--output=json", "-vv"][..],
            ] {
                let mut argv = argv.clone();
                for (i, a) in pre.iter().enumerate() {
                    argv.insert(1 + i, a.to_string());
                }
                let os: Vec<OsString> = argv.iter().map(OsString::from).collect();
                let (mut tree, whole) = command_for(&os);
                assert!(!whole, "{argv:?}");
                let pruned = tree.try_get_matches_from_mut(&argv).unwrap();
                let full = command().try_get_matches_from(&argv).unwrap();
                assert_eq!(flat(&pruned), flat(&full), "{argv:?}");
            }
        }
    }

    /// What a parse found: each level's command and every argument's raw values and source.
    fn flat(m: &clap::ArgMatches) -> String {
        let mut out = String::new();
        let mut at = Some(("pxagent", m));
        while let Some((name, m)) = at {
            out.push_str(name);
            for id in m.ids() {
                let raw: Vec<String> = m
                    .get_raw(id.as_str())
                    .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
                    .unwrap_or_default();
                out.push_str(&format!(" {id}={raw:?}/{:?}", m.value_source(id.as_str())));
            }
            out.push('\n');
            at = m.subcommand();
        }
        out
    }

    #[test]
    fn the_tree_for_one_command_has_only_its_group() {
        let os = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        let names = |c: &Command| {
            c.get_subcommands()
                .map(|s| s.get_name().to_string())
                .collect::<Vec<_>>()
        };
        let (vm, _) = command_for(&os(&["pxagent", "-H", "ct", "vm", "list"]));
        assert!(names(&vm).contains(&"vm".to_string()));
        assert!(
            !names(&vm).contains(&"ct".to_string()),
            "-H's value is no command"
        );
        let (gate, whole) = command_for(&os(&["pxagent", "gate", "--policy", "p"]));
        assert!(!whole && !names(&gate).contains(&"vm".to_string()));
        assert!(names(&gate).contains(&"gate".to_string()));
        // No command: the whole tree (root help).
        for a in [
            &["pxagent"][..],
            &["pxagent", "-o", "json"],
            &["pxagent", "--", "vm"],
        ] {
            assert!(command_for(&os(a)).1, "{a:?}");
        }
    }

    #[test]
    fn exec_takes_the_guest_argv_after_double_dash_only() {
        let m = command()
            .try_get_matches_from([
                "pxagent",
                "vm",
                "exec",
                "100",
                "--push",
                "a:/tmp/a",
                "--push",
                "b:/tmp/b",
                "--timeout",
                "5",
                "--",
                "ls",
                "-la",
                "--force",
            ])
            .unwrap();
        let (_, vm) = m.subcommand().unwrap();
        let (_, exec) = vm.subcommand().unwrap();
        let words: Vec<&String> = exec.get_many::<String>("command").unwrap().collect();
        assert_eq!(words, ["ls", "-la", "--force"]);
        assert!(!exec.get_flag("force"));
        assert_eq!(exec.get_many::<String>("push").unwrap().count(), 2);
        assert_eq!(
            m.get_one::<String>("timeout").map(String::as_str),
            Some("5")
        );
        assert!(
            command()
                .try_get_matches_from(["pxagent", "vm", "exec", "100", "ls"])
                .is_err()
        );
        assert!(
            command()
                .try_get_matches_from(["pxagent", "vm", "file-write", "100"])
                .is_err(),
            "steps are no commands"
        );
    }

    #[test]
    fn globals_work_after_the_subcommand() {
        let m = command()
            .try_get_matches_from(["pxagent", "vm", "destroy", "100", "--dry-run", "-o", "json"])
            .unwrap();
        assert!(m.get_flag("dry_run"));
    }

    /// The typed command of these words (program name first).
    fn typed(words: &[&str]) -> crate::base::error::Result<crate::cli::settings::Cmd> {
        use crate::cli::settings::{Settings, command as typed};
        let mut tree = command();
        let m = tree.try_get_matches_from_mut(words).unwrap();
        let argv = words.iter().map(std::ffi::OsString::from).collect();
        typed(&m, &Settings::from_matches(&m, &tree, argv)?)
    }

    #[test]
    fn names_filters_and_exit_code_reach_their_commands() {
        use crate::cli::settings::Cmd;
        // A guest's name where a VMID goes, filters on lists, --exit-code on exec.
        match typed(&["pxagent", "vm", "status", "web"]).unwrap() {
            Cmd::Named(n, f) => {
                assert_eq!(n.op.id, "vm.status");
                assert_eq!(n.name, "web");
                assert!(f.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            typed(&["pxagent", "vm", "status", "100"]).unwrap(),
            Cmd::Op(..)
        ));
        assert_eq!(
            typed(&["pxagent", "vm", "status", "9"])
                .unwrap_err()
                .exit_code(),
            2,
            "digits are a VMID, and 9 is not one"
        );
        match typed(&[
            "pxagent", "vm", "list", "--status", "running", "--name", "web*", "--node", "pve1",
            "--tag", "prod",
        ])
        .unwrap()
        {
            Cmd::Op(inv, f) => {
                assert!(inv.values.is_empty(), "filters are no op values");
                assert_eq!(f.status.as_deref(), Some("running"));
                assert_eq!(f.name.as_deref(), Some("web*"));
                assert_eq!(f.node.as_deref(), Some("pve1"));
                assert_eq!(f.tag.as_deref(), Some("prod"));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            command()
                .try_get_matches_from(["pxagent", "vm", "status", "100", "--status", "x"])
                .is_err(),
            "only lists take filters"
        );
        let e = typed(&["pxagent", "ct", "list", "--name", "a b"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        match typed(&["pxagent", "vm", "exec", "100", "--exit-code", "--", "true"]).unwrap() {
            Cmd::Exec { exit_code, .. } => assert!(exit_code),
            other => panic!("{other:?}"),
        }
        match typed(&["pxagent", "ct", "exec", "200", "--", "true"]).unwrap() {
            Cmd::Exec { exit_code, .. } => assert!(!exit_code),
            other => panic!("{other:?}"),
        }
    }
}
