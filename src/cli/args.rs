//! The command line: global flags (design §4), fixed commands, and one subcommand per
//! catalog op, generated from the catalog so the CLI can never drift from it.
//!
//! clap only shapes the words here; values are validated by the parameter kinds in
//! [`crate::invocation`], so every bad value gets the same one-line error and exit 2.

use clap::{Arg, ArgAction, Command};

use crate::catalog::{How, Kind, OPS, Op, Param, Risk};

/// Environment variable prefix for global flags.
pub const ENV_PREFIX: &str = "PXAGENT_";

fn global_args() -> Vec<Arg> {
    vec![
        Arg::new("host")
            .short('H')
            .long("host")
            .env("PXAGENT_HOST")
            .global(true)
            .value_name("HOST")
            .help("Host: a name from the config, user@host[:port], or an ~/.ssh/config alias"),
        Arg::new("port")
            .short('p')
            .long("port")
            .env("PXAGENT_PORT")
            .global(true)
            .value_name("PORT")
            .help("SSH port (default 22)"),
        Arg::new("user")
            .short('u')
            .long("user")
            .env("PXAGENT_USER")
            .global(true)
            .value_name("USER")
            .help("The agent account (default zen-agent)"),
        Arg::new("identity")
            .short('i')
            .long("identity")
            .env("PXAGENT_IDENTITY")
            .global(true)
            .value_name("FILE")
            .help("Private key file (default: ssh-agent, then ~/.ssh/id_*)"),
        Arg::new("known_hosts")
            .long("known-hosts")
            .env("PXAGENT_KNOWN_HOSTS")
            .global(true)
            .value_name("FILE")
            .help("known_hosts file (default ~/.ssh/known_hosts)"),
        Arg::new("jump")
            .short('J')
            .long("jump")
            .env("PXAGENT_JUMP")
            .global(true)
            .value_name("HOSTS")
            .help("Jump hosts on the way, [user@]host[:port] separated by commas (as ssh -J; `none`: connect directly); each host key is checked like the target's"),
        Arg::new("accept_new")
            .long("accept-new")
            .global(true)
            .action(ArgAction::SetTrue)
            .help("Trust and record an unknown host key (never a changed one)"),
        Arg::new("output")
            .short('o')
            .long("output")
            .env("PXAGENT_OUTPUT")
            .global(true)
            .value_name("FORMAT")
            .value_parser(["table", "json"])
            .help("Output format: table for people, json for programs"),
        Arg::new("dry_run")
            .long("dry-run")
            .global(true)
            .action(ArgAction::SetTrue)
            .help("Show the remote command, its sudoers rule and risk; send nothing"),
        // Deliberately no environment variable: a standing confirmation in the environment
        // would confirm every destructive op of a session.
        Arg::new("confirm")
            .long("confirm")
            .global(true)
            .value_name("PHRASE")
            .help("The exact confirmation phrase for a destructive op, e.g. 'yes destroy 100'"),
        // No environment variable either: an approval is for one request.
        Arg::new("approval")
            .long("approval")
            .global(true)
            .value_name("FILE")
            .help("A signed approval for an op the host policy marks `approve` (what `pxagent approve` or `ssh-keygen -Y sign` printed; - for stdin)"),
        Arg::new("policy")
            .long("policy")
            .env("PXAGENT_POLICY")
            .global(true)
            .value_name("FILE")
            .help("Policy file: pxagent's YAML policy or the MCP gateway's JSON form (narrows the config's policy: it can add refusals, never remove one)"),
        Arg::new("config")
            .long("config")
            .env("PXAGENT_CONFIG")
            .global(true)
            .value_name("FILE")
            .help("Config file (default $XDG_CONFIG_HOME/pxagent/config.yaml)"),
        Arg::new("verbose")
            .short('v')
            .long("verbose")
            .global(true)
            .action(ArgAction::Count)
            .help("More log output on stderr (repeat for more)"),
        Arg::new("no_wait")
            .long("no-wait")
            .global(true)
            .action(ArgAction::SetTrue)
            .help("Return the task's UPID as soon as it runs; a background pxagent follows it to the end"),
        Arg::new("timeout")
            .long("timeout")
            .env("PXAGENT_TIMEOUT")
            .global(true)
            .value_name("SECS")
            .help("Give up on a remote command after this many seconds"),
    ]
}

fn param_arg(p: &Param) -> Arg {
    let flag = p.name.replace('_', "-");
    let value_name = flag.to_ascii_uppercase();
    let help = if p.takes_name() {
        format!("{} — {}, or its unique name", p.help, p.kind.describe())
    } else {
        format!("{} — {}", p.help, p.kind.describe())
    };
    match p.how {
        How::Positional => Arg::new(p.name)
            .required(true)
            .value_name(value_name)
            .help(help),
        // Required options are checked by the invocation (one error path, exit 2), so that
        // a variant-only option does not become required for its siblings.
        How::Option | How::Required | How::NextId | How::BasenameOf(_) => Arg::new(p.name)
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
    }
}

/// The arguments of a command inside a guest (issue 6): the argv after `--`, stdin, and
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
            if !exec_input && !seen.contains(&p.name) {
                seen.push(p.name);
                cmd = cmd.arg(param_arg(p));
            }
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
    cmd
}

/// The whole command tree.
pub fn command() -> Command {
    let mut root = Command::new("pxagent")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Manage Proxmox VE through a key-only SSH account and a least-privilege sudoers whitelist")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .args(global_args())
        .subcommand(Command::new("catalog").about("List every operation with its risk, profiles, remote command and sudoers rule"))
        .subcommand(
            Command::new("preflight")
                .about("Prove the host's setup: key-only SSH, sudo version, the rules a profile needs (and nothing dangerous), audit logging")
                .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                    .help("The profile whose rules must be present: readonly, operator or full")),
        )
        .subcommand(
            Command::new("mcp")
                .about("Serve the catalog as Model Context Protocol tools on stdin/stdout (for AI clients)")
                .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                    .value_parser(["readonly", "operator", "full"])
                    .help("Offer only the tools of this profile: readonly, operator or full"))
                .arg(Arg::new("list_tools").long("list-tools").action(ArgAction::SetTrue)
                    .help("Print the tools this server would offer (name, risk, description; tab-separated) and exit")),
        )
        .subcommand(
            Command::new("gate")
                .about("Host side: the agent key's forced command; checks each request against the catalog and the host policy, then runs it through sudo")
                .long_about("Host side: the agent key's forced command (installed by `pxagent setup render`). \
Reads SSH_ORIGINAL_COMMAND, accepts exactly one catalog command line (or a pxagent-gate/1 envelope), \
applies the host policy (--policy, default /etc/pxagent/policy.yaml; with `approve`, signed approvals \
by the keys in --approvers), counts host rate limits, logs each decision to syslog, then runs \
`sudo -n` with that argv. Never starts a shell. Options come from the command line only.")
                .arg(Arg::new("approvers").long("approvers").value_name("FILE")
                    .help("The approvers' public keys (default /etc/pxagent/approvers)"))
                .arg(Arg::new("state_dir").long("state-dir").value_name("DIR")
                    .help("Host rate-limit counters and approval nonces (default /var/lib/pxagent/<account>)"))
                .arg(Arg::new("log_socket").long("log-socket").value_name("PATH")
                    .help("The syslog socket for the host audit (default /dev/log)")),
        )
        .subcommand(Command::new("status").about("One summary of the host or cluster: version, nodes, storages, guests by state"))
        .subcommand(
            Command::new("audit")
                .about("The local audit trail: one hash-chained JSON line per invocation")
                .subcommand_required(true)
                .subcommand(
                    Command::new("show").about("List audit records").arg(
                        Arg::new("since")
                            .long("since")
                            .value_name("WHEN")
                            .help("Only records from then on: RFC 3339, a date, or an age like 30m, 2h, 1d"),
                    ),
                )
                .subcommand(Command::new("verify").about("Check the hash chain; exit 1 naming the first broken line"))
                .subcommand(
                    Command::new("new-chain")
                        .about("Move the log aside and start a new chain linked to its head (when a broken line blocks changes, or to archive it)"),
                ),
        )
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
                    .help("The statement: a file, - for stdin, or the text itself (starting `pxagent-approval/1`)")),
        )
        .subcommand(
            Command::new("sudoers")
                .about("Render pxagent's sudoers whitelist, or lint any sudoers file")
                .subcommand_required(true)
                .subcommand(
                    Command::new("render")
                        .about("Print the sudoers file for the agent account (use --user to name it)")
                        .arg(Arg::new("profile").long("profile").value_name("PROFILE").default_value("full")
                            .help("readonly (reads), operator (+ reversible changes), full (+ confirm ops)"))
                        .arg(Arg::new("vmids").long("vmids").value_name("RANGES")
                            .help("Allow only these VM ids in every VM rule, e.g. 100-199,250"))
                        .arg(Arg::new("ctids").long("ctids").value_name("RANGES")
                            .help("Allow only these container ids in every container rule (default: --vmids)"))
                        .arg(Arg::new("ct_exec").long("ct-exec").value_name("RANGES")
                            .help("Allow `pct exec` (ct exec: root in the container) in these containers only; without it no profile allows container exec")),
                )
                .subcommand(
                    Command::new("lint")
                        .about("Report dangerous or broken rules in a sudoers file (exit 1 on errors)")
                        .arg(Arg::new("file").required(true).value_name("FILE").help("A sudoers file, or - for stdin")),
                ),
        )
        .subcommand(setup_command());

    // Group ops by their first word, then by the rest of the path.
    // Steps of another op's flow (vm exec's file sync) are no commands of their own.
    let ops: Vec<&'static Op> = OPS.iter().copied().filter(|o| !o.is_step()).collect();
    let mut tops: Vec<&str> = Vec::new();
    for op in &ops {
        if !tops.contains(&op.cli[0]) {
            tops.push(op.cli[0]);
        }
    }
    for top in tops {
        let here: Vec<&'static Op> = ops.iter().copied().filter(|o| o.cli[0] == top).collect();
        if here.iter().all(|o| o.cli.len() == 1) {
            root = root.subcommand(op_command(top, &here));
            continue;
        }
        let mut group = Command::new(top)
            .subcommand_required(true)
            .about(group_about(top));
        let mut leaves: Vec<&str> = Vec::new();
        for op in &here {
            if !leaves.contains(&op.cli[1]) {
                leaves.push(op.cli[1]);
            }
        }
        for leaf in leaves {
            let ops: Vec<&'static Op> = here.iter().copied().filter(|o| o.cli[1] == leaf).collect();
            group = group.subcommand(op_command(leaf, &ops));
        }
        root = root.subcommand(group);
    }
    root
}

/// `setup render|revoke`: the root scripts for the host (local commands, nothing is sent).
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
                    "--policy FILE (or PXAGENT_POLICY) installs FILE as the host policy (replacing the installed one, kept as .bak); \
                     without it an installed policy stays and a missing one becomes a default that allows every op.\n\
                     Review the script, then run it as root on the host: \
                     pxagent setup render --user zen-agent --pubkey agent.pub > setup.sh; less setup.sh; bash setup.sh",
                ),
        )
        .subcommand(
            Command::new("revoke")
                .about("Print the root script that revokes the agent account (--user): expire, lock, remove keys, drop-in and sudoers, end its processes")
                .args(sshd_args()),
        )
}

fn group_about(top: &str) -> &'static str {
    match top {
        "cluster" => "Cluster-wide status and resources",
        "node" => "Cluster nodes",
        "vm" => "QEMU/KVM virtual machines: status, lifecycle, snapshots",
        "ct" => "LXC containers: status, lifecycle, snapshots",
        "storage" => "Storages",
        "task" => "Proxmox tasks (UPIDs)",
        _ => "Operations",
    }
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
    fn typed(words: &[&str]) -> crate::error::Result<crate::cli::settings::Cmd> {
        use crate::cli::settings::{Settings, command as typed};
        let m = command().try_get_matches_from(words).unwrap();
        let argv = words.iter().map(std::ffi::OsString::from).collect();
        typed(&m, &Settings::from_matches(&m, argv)?)
    }

    #[test]
    fn names_filters_and_exit_code_reach_their_commands() {
        use crate::cli::settings::Cmd;
        // Issue 13: a guest's name where a VMID goes, filters on lists, --exit-code on exec.
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
