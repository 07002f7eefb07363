//! `pxagent preflight`: prove the host's setup before anything runs (the mission's
//! "preflight"), each check pass / warn / fail with a one-line remedy.
//!
//! It is run on demand, never hidden before each op (that would double every call's round
//! trips). All its remote commands go out concurrently over the one connection.

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::catalog::pve::Tool;
use crate::catalog::{OPS, Op, Profile};
use crate::host::sudoers::lint;
use crate::remote::{self, Remote};
use crate::ssh::Captured;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Pass,
    /// Works, but should be fixed.
    Warn,
    /// Broken: pxagent will not work safely.
    Fail,
}

/// One check's report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Short id (`ssh`, `sudo-version`, `rules` …).
    pub name: &'static str,
    /// Pass, warn or fail.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it (empty on pass).
    pub remedy: String,
}

fn check(
    name: &'static str,
    status: Status,
    detail: impl Into<String>,
    remedy: impl Into<String>,
) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
        remedy: remedy.into(),
    }
}

/// Run every check over an open connection.
pub async fn run(remote: &Remote, profile: Profile, user: &str) -> Vec<Check> {
    let mut checks = vec![check(
        "ssh",
        Status::Pass,
        format!(
            "key-only login as {} works non-interactively (host key {})",
            remote.target,
            remote.session.host_key()
        ),
        "",
    )];
    checks.push(match remote.session.server_auth_methods() {
        Some(m) if m.iter().any(|x| x == "password" || x == "keyboard-interactive") => check(
            "ssh-auth-methods",
            Status::Warn,
            format!("the server still offers {} for {user} (pxagent never uses them)", m.join(", ")),
            format!("in sshd_config: Match User {user} / AuthenticationMethods publickey / PasswordAuthentication no / KbdInteractiveAuthentication no"),
        ),
        Some(m) => check("ssh-auth-methods", Status::Pass, format!("the server offers only {}", m.join(", ")), ""),
        None => check("ssh-auth-methods", Status::Fail, "the server let the account in without any authentication", "require publickey authentication in sshd_config"),
    });

    // Is a gate in front of the account? Ask it first: a gated account accepts no `id` or
    // `sudo -l`, so the gate answers those itself.
    let hello = ask_gate(remote).await;
    let (gate_checks, gated) = gate_checks(&hello, user);
    checks.extend(gate_checks);

    let tools = needed_tools(profile);
    let version_argv = crate::catalog::invocation::Invocation::new(
        &crate::catalog::ops::PVE_VERSION,
        Default::default(),
    )
    .map(|i| i.remote_argv())
    .unwrap_or_default();
    let (id, sudo_v, sudo_l, version, tool_results) = match &gated {
        Some(h) => {
            let version = remote.session.exec(&version_argv).await;
            let out = |r: &crate::base::gate_protocol::CommandResult| {
                Ok(Captured {
                    stdout: r.stdout.clone().into_bytes(),
                    stderr: r.stderr.clone().into_bytes(),
                    exit_status: r.exit_status.map(|c| c as u32).unwrap_or(255),
                })
            };
            let found = |t: &str| h.tools.iter().any(|(p, ok)| p == t && *ok);
            let tool_results: Vec<crate::Result<Captured>> = tools
                .iter()
                .map(|t| {
                    Ok(Captured {
                        stdout: Vec::new(),
                        stderr: Vec::new(),
                        exit_status: if found(t) { 0 } else { 1 },
                    })
                })
                .collect();
            let id = Ok(Captured {
                stdout: h.uid.to_string().into_bytes(),
                stderr: Vec::new(),
                exit_status: 0,
            });
            (
                id,
                out(&h.sudo_version),
                out(&h.sudo_list),
                version,
                tool_results,
            )
        }
        None => {
            let mut cmds: Vec<Vec<String>> = vec![
                words(&["id", "-u"]),
                words(&["sudo", "-V"]),
                words(&["sudo", "-n", "-l"]),
                version_argv.clone(),
            ];
            for t in &tools {
                cmds.push(words(&["test", "-x", t]));
            }
            let mut results = remote.session.exec_many(cmds).await.into_iter();
            let mut next = || {
                results
                    .next()
                    .unwrap_or_else(|| Err(crate::Error::Internal("missing result".into())))
            };
            let (id, sudo_v, sudo_l, version) = (next(), next(), next(), next());
            let tool_results: Vec<_> = tools.iter().map(|_| next()).collect();
            (id, sudo_v, sudo_l, version, tool_results)
        }
    };

    checks.push(match &id {
        Ok(o) if o.success() && o.stdout_text().trim() == "0" => check(
            "account",
            Status::Fail,
            "the account is root (uid 0)",
            "use a dedicated unprivileged account such as zen-agent",
        ),
        Ok(o) if o.success() => check(
            "account",
            Status::Pass,
            format!("{user} is unprivileged (uid {})", o.stdout_text().trim()),
            "",
        ),
        Ok(o) => check(
            "account",
            Status::Warn,
            format!("`id -u` failed: {}", o.stderr_text().trim()),
            "check the account's shell",
        ),
        Err(e) => check(
            "account",
            Status::Fail,
            e.to_string(),
            "check the connection",
        ),
    });
    checks.push(sudo_version(&sudo_v));
    let listing = sudo_l.as_ref().ok().cloned();
    checks.extend(sudo_rules(listing.as_ref(), profile, user));
    for (t, r) in tools.iter().zip(tool_results) {
        checks.push(match r {
            Ok(o) if o.success() => check("pve-tool", Status::Pass, format!("{t} exists"), ""),
            Ok(_) => check(
                "pve-tool",
                Status::Fail,
                format!("{t} does not exist or is not executable"),
                "is this a Proxmox VE 8/9 node? pxagent uses the PVE 9 paths",
            ),
            Err(e) => check(
                "pve-tool",
                Status::Fail,
                format!("{t}: {e}"),
                "check the connection",
            ),
        });
    }
    checks.push(
        match version.and_then(|o| {
            remote::classify(&o, &version_argv, &remote.target)?;
            Ok(o)
        }) {
            Ok(o) => {
                let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
                let ver = v
                    .get("version")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if ver.starts_with("8.") || ver.starts_with("9.") {
                    check("pve-version", Status::Pass, format!("Proxmox VE {ver}"), "")
                } else {
                    check(
                        "pve-version",
                        Status::Warn,
                        format!("Proxmox VE version '{ver}' is not 8.x or 9.x"),
                        "pxagent is built and tested for PVE 8 and 9",
                    )
                }
            }
            Err(e) => check(
                "pve-version",
                Status::Fail,
                format!("`pvesh get /version` failed: {e}"),
                "the read rules or the PVE tools are missing: see the checks above",
            ),
        },
    );
    checks
}

/// The gate's checks from its answer to a `hello`, and the answer when there is a gate.
fn gate_checks(
    hello: &crate::Result<Captured>,
    user: &str,
) -> (Vec<Check>, Option<crate::base::gate_protocol::Hello>) {
    use crate::base::gate_protocol::{Hello, PROTOCOL, Refusal};
    let o = match hello {
        Ok(o) => o,
        Err(e) => {
            return (
                vec![check(
                    "gate",
                    Status::Fail,
                    e.to_string(),
                    "check the connection",
                )],
                None,
            );
        }
    };
    if let Some(r) = Refusal::from_output(o.exit_status, &o.stderr_text()) {
        return (
            vec![check(
                "gate",
                Status::Fail,
                format!(
                    "a gate (pxagent {}) is in front of {user} but refused this client (pxagent {}, {PROTOCOL}): {}",
                    if r.gate.is_empty() {
                        "?"
                    } else {
                        r.gate.as_str()
                    },
                    crate::VERSION,
                    r.message
                ),
                "install the same pxagent version on the host (the gate) and here",
            )],
            None,
        );
    }
    let h: Option<Hello> = if o.exit_status == 0 {
        serde_json::from_slice(&o.stdout).ok()
    } else {
        None
    };
    let Some(h) = h else {
        return (
            vec![check(
                "gate",
                Status::Warn,
                format!(
                    "no pxagent gate in front of {user}: only sudoers holds against the agent (policy, confirmation, limits and audit are the client's)"
                ),
                "put the gate in front of the account: `pxagent setup render` (docs/host-setup.md)",
            )],
            None,
        );
    };
    let mut out = vec![check(
        "gate",
        if h.protocol == PROTOCOL {
            Status::Pass
        } else {
            Status::Fail
        },
        format!(
            "pxagent gate {} ({}) is the forced command of {} on {}",
            h.gate, h.protocol, h.account, h.host
        ),
        if h.protocol == PROTOCOL {
            String::new()
        } else {
            format!("this client speaks {PROTOCOL}: install the same pxagent version on both sides")
        },
    )];
    for (name, file, remedy) in [
        (
            "host-policy",
            &h.policy,
            "fix the host policy as root; until then the gate refuses everything",
        ),
        (
            "approvers",
            &h.approvers,
            "fix the approvers file as root (one OpenSSH public key per line)",
        ),
    ] {
        out.push(check(
            name,
            if file.ok { Status::Pass } else { Status::Fail },
            format!("{}: {}", file.path, file.detail),
            if file.ok { "" } else { remedy },
        ));
    }
    out.push(
        match h.extra.get(crate::base::gate_protocol::HELLO_FROZEN) {
            Some(f) => check(
                "frozen",
                Status::Warn,
                format!(
                    "the host is frozen by {} since {}: {}; only reads run",
                    f["by"].as_str().unwrap_or("?"),
                    f["since"].as_str().unwrap_or("?"),
                    f["reason"].as_str().unwrap_or("?")
                ),
                f["lift"].as_str().unwrap_or("").to_string(),
            ),
            None => check(
                "frozen",
                Status::Pass,
                "the host is not frozen (its kill switch is off)".to_string(),
                "",
            ),
        },
    );
    (out, Some(h))
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn needed_tools(profile: Profile) -> Vec<&'static str> {
    let mut tools: Vec<&'static str> = Vec::new();
    for op in OPS.iter().filter(|o| profile.allows_op(o)) {
        if !tools.contains(&op.tool.path()) {
            tools.push(op.tool.path());
        }
    }
    tools
}

/// Classic sudo >= 1.9.10 (regex arguments); not sudo-rs; installed at all.
pub fn sudo_version(out: &crate::Result<Captured>) -> Check {
    let name = "sudo-version";
    let o = match out {
        Ok(o) => o,
        Err(e) => return check(name, Status::Fail, e.to_string(), "check the connection"),
    };
    let text = format!("{}{}", o.stdout_text(), o.stderr_text());
    if o.exit_status == 127 || text.contains("command not found") {
        return check(
            name,
            Status::Fail,
            "sudo is not installed (stock Proxmox VE 9 ships without it)",
            "apt-get install sudo (classic sudo, not sudo-rs)",
        );
    }
    if text.to_ascii_lowercase().contains("sudo-rs") {
        return check(
            name,
            Status::Fail,
            "the host runs sudo-rs, which has neither regex rules nor I/O logs",
            "apt-get install sudo (classic sudo >= 1.9.10)",
        );
    }
    let re = Regex::new(r"Sudo version (\d+)\.(\d+)\.(\d+)").expect("static regex");
    match re.captures(&text) {
        Some(c) => {
            let v: Vec<u32> = (1..=3).map(|i| c[i].parse().unwrap_or(0)).collect();
            let found = format!("{}.{}.{}", v[0], v[1], v[2]);
            if (v[0], v[1], v[2]) >= (1, 9, 10) {
                check(name, Status::Pass, format!("classic sudo {found}"), "")
            } else {
                check(
                    name,
                    Status::Fail,
                    format!("sudo {found} is older than 1.9.10 and cannot match regex rules"),
                    "upgrade sudo (Debian 12 has 1.9.13)",
                )
            }
        }
        None => check(
            name,
            Status::Fail,
            format!(
                "cannot tell the sudo version from `sudo -V`: {}",
                text.lines().next().unwrap_or("")
            ),
            "install classic sudo >= 1.9.10",
        ),
    }
}

/// The parts of `sudo -n -l` output pxagent cares about.
#[derive(Debug, Default, PartialEq)]
pub struct SudoListing {
    /// The "Matching Defaults entries" options.
    pub defaults: Vec<String>,
    /// The "Runas and Command-specific defaults" text.
    pub command_defaults: String,
    /// Each allowed command: (runas, tags, command spec).
    pub commands: Vec<(String, Vec<String>, String)>,
}

/// Parse `sudo -n -l` output (wrapped or not; real samples in fixtures/sudo/).
pub fn parse_listing(text: &str) -> SudoListing {
    #[derive(PartialEq)]
    enum Sec {
        None,
        Defaults,
        CmdDefaults,
        Rules,
    }
    let mut sec = Sec::None;
    let mut listing = SudoListing::default();
    let mut defaults_text = String::new();
    let mut entries: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("Matching Defaults entries") {
            sec = Sec::Defaults;
            continue;
        }
        if line.starts_with("Runas and Command-specific defaults") {
            sec = Sec::CmdDefaults;
            continue;
        }
        if line.starts_with("User ") && line.contains(" may run the following commands") {
            sec = Sec::Rules;
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        match sec {
            Sec::Defaults => {
                defaults_text.push(' ');
                defaults_text.push_str(line.trim());
            }
            Sec::CmdDefaults => {
                listing.command_defaults.push(' ');
                listing.command_defaults.push_str(line.trim());
            }
            Sec::Rules => {
                // A wrapped continuation is indented by 8 spaces; an entry by 4.
                if line.starts_with("        ") {
                    if let Some(last) = entries.last_mut() {
                        last.push(' ');
                        last.push_str(line.trim());
                    }
                } else {
                    entries.push(line.trim().to_string());
                }
            }
            Sec::None => {}
        }
    }
    listing.defaults = split_list(&defaults_text);
    let tag_re = Regex::new(r"^([A-Z_]+): ").expect("static regex");
    for e in entries {
        let (runas, rest) = match e.strip_prefix('(').and_then(|r| r.split_once(") ")) {
            Some((r, rest)) => (r.to_string(), rest.to_string()),
            None => (String::new(), e.clone()),
        };
        let mut rest = rest.as_str();
        let mut tags = Vec::new();
        while let Some(c) = tag_re.captures(rest) {
            tags.push(c[1].to_string());
            rest = &rest[c[0].len()..];
        }
        // A tag inside the list (`…, NOLOG_INPUT: /usr/local/lib/pxagent/pxagent-helper …`)
        // holds for that command and the ones after it, as in sudoers.
        for cmd in lint::split_commands(rest) {
            let mut cmd = cmd.as_str();
            while let Some(c) = tag_re.captures(cmd) {
                tags.push(c[1].to_string());
                cmd = &cmd[c[0].len()..];
            }
            listing
                .commands
                .push((runas.clone(), tags.clone(), cmd.to_string()));
        }
    }
    listing
}

/// Split a Defaults list on ", " (values here never contain ", ").
fn split_list(text: &str) -> Vec<String> {
    text.split(", ")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A regex matching the op's rule as sudo lists it, whatever VMID fence, storage roots
/// (`--storage-roots`: a group of absolute paths, each with its first segment,
/// `(/mnt(…)|/srv(…))`), NFS servers (`--nfs-servers`) and ISO fill limit (`--iso-max-used`)
/// it was rendered with.
fn rule_matcher(op: &Op) -> Regex {
    const SENTINEL: &str = "PXAVMIDFENCE";
    const ROOTS: &str = "PXASTORAGEROOTS";
    const SERVERS: &str = "PXANFSSERVERS";
    const FILL: &str = "PXAFILLLIMIT";
    let rule = op.sudoers_rule_in(
        Some(SENTINEL),
        &crate::catalog::Places {
            roots_group: Some(ROOTS),
            servers_group: Some(SERVERS),
            fill_group: Some(FILL),
        },
    );
    let forms = crate::catalog::kind::storage_root_segment_forms().map(|f| regex::escape(&f));
    let root = format!(r"(?:/[A-Za-z0-9_\[\].-]+)+(?:{}|{})", forms[0], forms[1]);
    let escaped = regex::escape(&rule)
        .replace(
            &format!(r"\({SENTINEL}\)"),
            r"(?:\[1-9\]\[0-9\]\{2,8\}|\([0-9\[\]{}|-]+\))",
        )
        .replace(ROOTS, &format!(r"\((?:{root})(?:\|(?:{root}))*\)"))
        // `--nfs-servers`: a group of names and addresses, dots bracketed.
        .replace(
            SERVERS,
            r"\((?:[A-Za-z0-9\[\].-]+)(?:\|[A-Za-z0-9\[\].-]+)*\)",
        )
        // `--iso-max-used`: a group of percentages (`([1-9]|[1-8][0-9]|90)`).
        .replace(FILL, r"\([0-9\[\]|-]+\)");
    Regex::new(&format!("^{escaped}$")).expect("escaped rule is a valid regex")
}

/// Whether the listed `storage add-dir` rules (any render's roots) admit a path below one of
/// [`crate::catalog::kind::UNTRUSTED_DIRS`]: a hand-edited or old render. `None` when no such rule is listed.
fn storage_roots_check(commands: &[(String, Vec<String>, String)]) -> Option<Check> {
    // Any rule that can add a directory storage: this render's, an older one's, a hand-made one.
    let rules: Vec<&String> = commands
        .iter()
        .map(|(_, _, c)| c)
        .filter(|c| c.starts_with("/usr/bin/pvesh ") && c.contains("--type dir"))
        .collect();
    if rules.is_empty() {
        return None;
    }
    let reachable: Vec<&str> = crate::catalog::kind::UNTRUSTED_DIRS
        .iter()
        .copied()
        .filter(|d| {
            let args = format!(
                "create /storage --storage s1 --type dir --path {d}/pxagent-probe --content iso --output-format json"
            );
            rules
                .iter()
                .any(|c| lint::regex_rule_admits(c, &args) == Some(true))
        })
        .collect();
    Some(if reachable.is_empty() {
        check(
            "storage-roots",
            Status::Pass,
            "directory storages only below roots the account cannot write (no home, temporary, runtime or /mnt/pve directory)",
            "",
        )
    } else {
        check(
            "storage-roots",
            Status::Fail,
            format!(
                "sudo admits directory storages below {}: the agent account writes there (or a network share lies there), and root-run Proxmox code trusts a storage's files",
                reachable.join(", ")
            ),
            "re-render with --storage-roots naming none of them (pxagent sudoers render refuses them)",
        )
    })
}

/// Checks on the parsed `sudo -n -l`: needed rules present, nothing over-broad, audit on.
pub fn sudo_rules(out: Option<&Captured>, profile: Profile, user: &str) -> Vec<Check> {
    let Some(o) = out else {
        return vec![check(
            "sudo-rules",
            Status::Fail,
            "could not run `sudo -n -l`",
            "check the connection",
        )];
    };
    if !o.success() {
        let err = o.stderr_text();
        let why = if err.contains("a password is required") {
            format!("sudo allows {user} nothing without a password (no NOPASSWD rules)")
        } else if err.contains("command not found") {
            "sudo is not installed".to_string()
        } else {
            format!("`sudo -n -l` failed: {}", err.trim())
        };
        let remedy = format!(
            "install pxagent's rules: pxagent sudoers render --user {user} --profile {} (see the file's header)",
            profile.name()
        );
        return vec![
            check(
                "sudo-rules",
                Status::Fail,
                format!("{why}; missing every rule of profile {}", profile.name()),
                remedy.clone(),
            ),
            check(
                "audit",
                Status::Fail,
                "no sudo settings for the account",
                remedy,
            ),
        ];
    }
    let listing = parse_listing(&o.stdout_text());
    let mut checks = Vec::new();
    let expected: Vec<(&Op, Regex)> = OPS
        .iter()
        .copied()
        .filter(|op| profile.allows_op(op))
        .map(|op| (op, rule_matcher(op)))
        .collect();
    let all: Vec<Regex> = OPS.iter().copied().map(rule_matcher).collect();
    // A fenced render (some guest rule lists a fence, not the plain VMID regex) leaves out the
    // changes no fence can restrict: their absence is not a missing rule.
    let fenced = listing.commands.iter().any(|(_, _, c)| {
        OPS.iter()
            .zip(&all)
            .any(|(op, re)| op.per_guest() && re.is_match(c) && *c != op.sudoers_rule(None))
    });

    let missing: Vec<&str> = expected
        .iter()
        .filter(|(op, _)| !(fenced && crate::host::sudoers::render::unfenceable(op)))
        // A render without --nfs-servers leaves NFS storages out: the admin named no server.
        .filter(|(op, _)| !op.names_a_server())
        .filter(|(_, re)| {
            !listing.commands.iter().any(|(runas, tags, c)| {
                re.is_match(c) && runas_root(runas) && tags.iter().any(|t| t == "NOPASSWD")
            })
        })
        .map(|(op, _)| op.id)
        .collect();
    checks.push(if missing.is_empty() {
        check(
            "sudo-rules",
            Status::Pass,
            format!(
                "every rule of profile {} is present ({} ops){}",
                profile.name(),
                expected.len(),
                if fenced {
                    "; the rules are VMID-fenced: sudo refuses guests (and backups of guests) outside \
                     the fence, and changes no fence restricts unless rendered with --unfenced-ops"
                } else {
                    ""
                }
            ),
            "",
        )
    } else {
        check(
            "sudo-rules",
            Status::Fail,
            format!(
                "missing (or not `(root) NOPASSWD`) rules for: {}",
                missing.join(", ")
            ),
            format!(
                "re-render and install: pxagent sudoers render --user {user} --profile {}",
                profile.name()
            ),
        )
    });

    let mut foreign = Vec::new();
    let mut dangerous = Vec::new();
    for (_runas, _tags, c) in &listing.commands {
        let findings = lint::check_command(c);
        if lint::has_errors(&findings) || c == "ALL" {
            let why = findings
                .first()
                .map(|f| f.why.clone())
                .unwrap_or_else(|| "allows any command".into());
            dangerous.push(format!("`{c}` ({why})"));
        } else if !all.iter().any(|re| re.is_match(c))
            && *c != crate::host::sudoers::render::chain_rule()
        {
            foreign.push(format!("`{c}`"));
        }
    }
    checks.push(if dangerous.is_empty() {
        check(
            "over-broad",
            Status::Pass,
            "no over-broad or root-equivalent rule",
            "",
        )
    } else {
        check(
            "over-broad",
            Status::Fail,
            format!("root-equivalent rules: {}", dangerous.join("; ")),
            "remove them; `pxagent sudoers lint FILE` explains each",
        )
    });
    if !foreign.is_empty() {
        checks.push(check(
            "foreign-rules",
            Status::Warn,
            format!("rules pxagent did not render: {}", foreign.join(", ")),
            "remove what the agent does not need",
        ));
    }

    let has = |opt: &str| {
        listing.defaults.iter().any(|d| d == opt)
            && !listing.defaults.iter().any(|d| d == &format!("!{opt}"))
    };
    let mut missing_audit: Vec<&str> = ["log_input", "log_output"]
        .into_iter()
        .filter(|o| !has(o))
        .collect();
    // Only the helper's stdin (an ISO image, named by its SHA-256 on the logged command line)
    // goes unlogged; a tag turning logging off for anything else is a hole in the audit.
    let untagged = |tag: &str| {
        listing.commands.iter().any(|(_, tags, cmd)| {
            tags.iter()
                .rev()
                .find(|t| t.ends_with(tag))
                .map(String::as_str)
                == Some(&format!("NO{tag}"))
                && (tag == "LOG_OUTPUT" || !cmd.starts_with(&format!("{} ", Tool::Helper.path())))
        })
    };
    if listing.command_defaults.contains("!log_input")
        || listing.command_defaults.contains("!log_output")
        || untagged("LOG_INPUT")
        || untagged("LOG_OUTPUT")
    {
        missing_audit.push("(turned off for some commands)");
    }
    checks.push(if missing_audit.is_empty() {
        let iolog = listing.defaults.iter().find(|d| d.starts_with("iolog_dir=")).cloned().unwrap_or_else(|| "iolog_dir default".into());
        check("audit", Status::Pass, format!("sudo I/O logging is on ({iolog})"), "")
    } else {
        check(
            "audit",
            Status::Fail,
            format!("sudo audit logging is off: missing {}", missing_audit.join(", ")),
            format!("add `Defaults:{user} log_input, log_output, iolog_dir=/var/log/sudo-io/%{{user}}` (pxagent sudoers render has it)"),
        )
    });
    checks.extend(storage_roots_check(&listing.commands));
    checks
}

fn runas_root(runas: &str) -> bool {
    runas == "root" || runas.is_empty()
}

/// What an account may run on its host, as the preflight reads it (`pxagent skill
/// --from-host`).
#[derive(Debug, Clone)]
pub struct HostRules {
    /// The ops whose sudoers rule the account holds (`(root) NOPASSWD`), less those the host
    /// policy denies outright; steps left out.
    pub ops: Vec<&'static Op>,
    /// Whether a gate answered (its host policy was read too).
    pub gated: bool,
    /// The op ids the host policy denies outright (gated hosts).
    pub denied: Vec<String>,
}

/// Send the gate's `hello` (on an ungated account, the forced-command-less shell answers
/// something else, which [`gate_checks`] tells apart).
async fn ask_gate(remote: &Remote) -> crate::Result<Captured> {
    let hello_cmd = crate::base::gate_protocol::Envelope {
        client: format!("pxagent {}", crate::VERSION),
        hello: true,
        ..Default::default()
    }
    .to_command();
    remote.session.exec(&hello_cmd).await
}

/// Whether a gate is in front of the account and, if so, its kill switch: `None` for no gate,
/// `Some(None)` for a gate that runs changes, `Some(Some(freeze))` for a frozen host (its
/// reason, who froze it, since when, what lifts it).
pub async fn gate_freeze(remote: &Remote) -> Option<Option<serde_json::Value>> {
    let o = ask_gate(remote).await.ok()?;
    if o.exit_status != 0 {
        return None;
    }
    let h: crate::base::gate_protocol::Hello = serde_json::from_slice(&o.stdout).ok()?;
    Some(
        h.extra
            .get(crate::base::gate_protocol::HELLO_FROZEN)
            .cloned(),
    )
}

/// Read what the account may run: the gate's hello (its `sudo -n -l` and the ops its host
/// policy denies) where a gate is in front, else `sudo -n -l` itself. Fails (exit 5) when the
/// host gives no listing.
pub async fn host_rules(remote: &Remote, user: &str) -> crate::Result<HostRules> {
    let hello = ask_gate(remote).await;
    let (_, gated) = gate_checks(&hello, user);
    let (listing, denied) = match &gated {
        Some(h) => {
            let denied: Vec<String> = h
                .extra
                .get(crate::base::gate_protocol::HELLO_POLICY_DENIES)
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            if h.sudo_list.exit_status != Some(0) {
                return Err(crate::Error::Preflight(format!(
                    "the gate's `sudo -n -l` failed: {}",
                    h.sudo_list.stderr.trim()
                )));
            }
            (h.sudo_list.stdout.clone(), denied)
        }
        None => {
            let out = remote.session.exec(&words(&["sudo", "-n", "-l"])).await?;
            if !out.success() {
                return Err(crate::Error::Preflight(format!(
                    "`sudo -n -l` failed: {}",
                    out.stderr_text().trim()
                )));
            }
            (out.stdout_text().to_string(), Vec::new())
        }
    };
    Ok(HostRules {
        ops: admitted_ops(&parse_listing(&listing), &denied),
        gated: gated.is_some(),
        denied,
    })
}

/// [`host_rules`] as the JSON document the MCP resource `pxagent://rules` carries under
/// `host_rules` (the signature of `mcp::HostRulesFn`).
pub fn rules_json(
    remote: Remote,
    user: String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::Result<serde_json::Value>> + Send>> {
    Box::pin(async move {
        let r = host_rules(&remote, &user).await?;
        Ok(serde_json::json!({
            "gated": r.gated,
            "may_run": r.ops.iter().map(|op| op.id).collect::<Vec<_>>(),
            "policy_denies": r.denied,
        }))
    })
}

/// The ops (no steps) whose rule `listing` holds as `(root) NOPASSWD`, less `denied`.
pub fn admitted_ops(listing: &SudoListing, denied: &[String]) -> Vec<&'static Op> {
    OPS.iter()
        .copied()
        .filter(|op| !op.is_step() && !denied.iter().any(|d| d == op.id))
        .filter(|op| {
            let re = rule_matcher(op);
            listing.commands.iter().any(|(runas, tags, c)| {
                re.is_match(c) && runas_root(runas) && tags.iter().any(|t| t == "NOPASSWD")
            })
        })
        .collect()
}

/// Whether any check failed.
pub fn failed(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.status == Status::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::testing::fixture;

    fn ok(stdout: &str) -> Captured {
        Captured {
            stdout: stdout.as_bytes().to_vec(),
            stderr: Vec::new(),
            exit_status: 0,
        }
    }

    #[test]
    fn parses_wrapped_and_unwrapped_listings_alike() {
        let a = parse_listing(&fixture("sudo/04_recommended.stdout"));
        let b = parse_listing(&fixture(
            "sudo/19_recommended_stdout_is_pipe_no_wrap.stdout",
        ));
        assert_eq!(a.commands, b.commands);
        assert_eq!(a.commands.len(), 15);
        assert_eq!(
            a.commands[0],
            (
                "root".into(),
                vec!["NOPASSWD".into()],
                "/usr/sbin/qm ^list$".into()
            )
        );
        assert!(a.defaults.contains(&"log_input".to_string()));
        let m = parse_listing(&fixture("sudo/24_trixie_mixed.stdout"));
        assert!(m.commands.iter().any(|(r, t, c)| r == "ALL : ALL"
            && t.is_empty()
            && c == "/usr/sbin/pct ^enter [0-9]+$"));
        assert!(m.commands.iter().any(|(_, t, c)| t
            == &vec!["NOEXEC".to_string(), "NOPASSWD".to_string()]
            && c.ends_with("--no-pager -o json$")));
        assert!(m.command_defaults.contains("!log_output"));
    }

    /// A listed directory-storage rule that admits a path the account can write,
    /// or below /mnt/pve (an old or hand-edited render), fails the preflight.
    #[test]
    fn storage_roots_the_account_reaches_fail() {
        let own = crate::host::sudoers::render::RenderOptions::new("zen-agent").unwrap();
        let rule = own.rule(&crate::catalog::ops::STORAGE_ADD_DIR);
        let listed = |c: &str| vec![("root".to_string(), vec![], c.to_string())];
        let ok = storage_roots_check(&listed(&rule)).unwrap();
        assert_eq!(ok.status, Status::Pass, "{ok:?}");
        // The rule an older render wrote: any first segment below /mnt, /mnt/pve included.
        let old = "/usr/bin/pvesh ^create /storage --storage [a-z][a-z0-9_.-]{0,62}[a-z0-9] --type dir --path (/mnt|/srv)(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}){1,15} --content (iso|backup) --output-format json$";
        let c = storage_roots_check(&listed(old)).unwrap();
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.detail.contains("/mnt/pve") && !c.detail.contains("/home"),
            "{c:?}"
        );
        let home = old.replace("(/mnt|/srv)", "(/home|/srv)");
        let c = storage_roots_check(&listed(&home)).unwrap();
        assert!(c.detail.contains("/home"), "{c:?}");
        assert!(storage_roots_check(&listed("/usr/sbin/qm ^list$")).is_none());
    }

    #[test]
    fn our_own_render_passes_when_listed() {
        // Build what sudo would list for a rendered file: every rule on one line; with NFS
        // servers named and without (then there is no NFS rule, and none is missed).
        for (profile, servers) in Profile::ALL.into_iter().flat_map(|p| {
            [
                (p, vec![]),
                (p, vec!["192.0.2.30".to_string(), "nas".into()]),
            ]
        }) {
            let mut o = crate::host::sudoers::render::RenderOptions::new("zen-agent").unwrap();
            o.profile = profile;
            o.nfs_servers = servers;
            let cmds: Vec<String> = o.ops().map(|op| o.rule(op)).collect();
            let listing = format!(
                "Matching Defaults entries for zen-agent on h:\n    env_reset, log_input, log_output, iolog_dir=/var/log/sudo-io/%{{user}}\n\nUser zen-agent may run the following commands on h:\n    (root) NOPASSWD: {}\n",
                cmds.join(", ")
            );
            let checks = sudo_rules(Some(&ok(&listing)), profile, "zen-agent");
            assert!(!failed(&checks), "{profile:?}: {checks:#?}");
            assert!(
                checks.iter().all(|c| c.status == Status::Pass),
                "{checks:#?}"
            );
        }
    }

    #[test]
    fn fenced_rules_count_as_present() {
        let mut o = crate::host::sudoers::render::RenderOptions::new("zen-agent").unwrap();
        o.vmids = Some(crate::host::sudoers::ranges::Ranges::parse("--vmids", "100-199").unwrap());
        // What the render holds: a fenced file leaves out what no fence restricts.
        let cmds: Vec<String> = o
            .ops()
            .map(|op| op.sudoers_rule(o.fence_for(op).as_deref()))
            .collect();
        assert!(!o.ops().any(|op| op == &crate::catalog::ops::STORAGE_REMOVE));
        let listing = format!(
            "Matching Defaults entries for u on h:\n    log_input, log_output\n\nUser u may run the following commands on h:\n    (root) NOPASSWD: {}\n",
            cmds.join(", ")
        );
        let checks = sudo_rules(Some(&ok(&listing)), Profile::Full, "u");
        assert!(!failed(&checks), "{checks:#?}");
        assert!(format!("{checks:?}").contains("VMID-fenced"), "{checks:#?}");
        // Unfenced, the same absence is a missing rule.
        let o = crate::host::sudoers::render::RenderOptions::new("u").unwrap();
        let cmds: Vec<String> = o
            .ops()
            .filter(|op| op != &&crate::catalog::ops::STORAGE_REMOVE)
            .map(|op| op.sudoers_rule(None))
            .collect();
        let listing = format!(
            "Matching Defaults entries for u on h:\n    log_input, log_output\n\nUser u may run the following commands on h:\n    (root) NOPASSWD: {}\n",
            cmds.join(", ")
        );
        let checks = sudo_rules(Some(&ok(&listing)), Profile::Full, "u");
        let rules = checks.iter().find(|c| c.name == "sudo-rules").unwrap();
        assert_eq!(rules.status, Status::Fail, "{rules:?}");
        assert!(format!("{rules:?}").contains("storage.remove"), "{rules:?}");
    }

    #[test]
    fn rules_with_other_storage_roots_count_as_present() {
        let mut o = crate::host::sudoers::render::RenderOptions::new("u").unwrap();
        o.storage_roots = crate::host::sudoers::render::parse_storage_roots(
            "--storage-roots",
            "/data/pve.1,/srv",
        )
        .unwrap();
        let cmds: Vec<String> = o.ops().map(|op| o.rule(op)).collect();
        assert!(
            cmds.iter()
                .any(|c| c.contains("(/data/pve[.]1(/") && c.contains("|/srv(/")),
            "{cmds:?}"
        );
        let listing = format!(
            "Matching Defaults entries for u on h:\n    log_input, log_output\n\nUser u may run the following commands on h:\n    (root) NOPASSWD: {}\n",
            cmds.join(", ")
        );
        let checks = sudo_rules(Some(&ok(&listing)), Profile::Full, "u");
        assert!(!failed(&checks), "{checks:#?}");
        let rules = checks.iter().find(|c| c.name == "sudo-rules").unwrap();
        assert_eq!(rules.status, Status::Pass, "{rules:?}");
    }

    #[test]
    fn the_published_setup_fails_for_every_reason() {
        let checks = sudo_rules(
            Some(&ok(&fixture(
                "sudo/02_published_rules_fixed_defaults.stdout",
            ))),
            Profile::Readonly,
            "zen-agent",
        );
        let get = |n: &str| checks.iter().find(|c| c.name == n).unwrap();
        assert_eq!(get("sudo-rules").status, Status::Fail);
        assert_eq!(
            get("over-broad").status,
            Status::Fail,
            "{:?}",
            get("over-broad")
        );
        assert!(get("over-broad").detail.contains("/usr/sbin/qm *"));
    }

    #[test]
    fn audit_off_fails() {
        let listing = "Matching Defaults entries for u on h:\n    env_reset\n\nUser u may run the following commands on h:\n    (root) NOPASSWD: /usr/bin/pvesh ^get /version --output-format json$\n";
        let checks = sudo_rules(Some(&ok(listing)), Profile::Readonly, "u");
        let audit = checks.iter().find(|c| c.name == "audit").unwrap();
        assert_eq!(audit.status, Status::Fail);
        assert!(audit.detail.contains("log_input"));
    }

    #[test]
    fn only_the_helper_may_go_without_input_logging() {
        let listing = |rules: &str| {
            format!(
                "Matching Defaults entries for u on h:\n    log_input, log_output\n\nUser u may run the following commands on h:\n    (root) NOPASSWD: {rules}\n"
            )
        };
        let audit = |rules: &str| {
            let checks = sudo_rules(Some(&ok(&listing(rules))), Profile::Readonly, "u");
            checks.into_iter().find(|c| c.name == "audit").unwrap()
        };
        let pvesh = "/usr/bin/pvesh ^get /version --output-format json$";
        let helper = "/usr/local/lib/pxagent/pxagent-helper ^iso-receive --max-used ([1-9]|[1-8][0-9]|90) x y [1-9][0-9]{0,12} [0-9a-f]{64}$";
        assert_eq!(
            audit(&format!("{pvesh}, NOLOG_INPUT: {helper}")).status,
            Status::Pass
        );
        // The tag holds for what follows it: a PVE tool after the helper goes unlogged too.
        let a = audit(&format!("NOLOG_INPUT: {helper}, {pvesh}"));
        assert_eq!(a.status, Status::Fail, "{a:?}");
        assert_eq!(audit(&format!("NOLOG_INPUT: {pvesh}")).status, Status::Fail);
        assert_eq!(
            audit(&format!("NOLOG_OUTPUT: {helper}")).status,
            Status::Fail
        );
        assert_eq!(
            audit(&format!("NOLOG_INPUT: {helper}, LOG_INPUT: {pvesh}")).status,
            Status::Pass
        );
    }

    #[test]
    fn no_rules_at_all() {
        let out = Captured {
            stdout: vec![],
            stderr: fixture("sudo/15_only_password_rules_-n_-l.txt").into_bytes(),
            exit_status: 1,
        };
        let checks = sudo_rules(Some(&out), Profile::Full, "zen-agent");
        assert!(checks.iter().all(|c| c.status == Status::Fail));
    }

    #[test]
    fn sudo_versions() {
        let v = |s: &str, code: u32| {
            sudo_version(&Ok(Captured {
                stdout: s.as_bytes().to_vec(),
                stderr: vec![],
                exit_status: code,
            }))
            .status
        };
        assert_eq!(
            v(&fixture("sudo/18_sudo_-V_as_agent_bookworm.txt"), 0),
            Status::Pass
        );
        assert_eq!(
            v(&fixture("sudo/18b_sudo_-V_as_agent_trixie.txt"), 0),
            Status::Pass
        );
        assert_eq!(v("Sudo version 1.9.9\n", 0), Status::Fail);
        assert_eq!(v("sudo-rs 0.2.5\n", 0), Status::Fail);
        assert_eq!(v("bash: sudo: command not found\n", 127), Status::Fail);
    }
}
