//! `pxagent gate`: the agent key's forced command on the Proxmox host.
//!
//! Why it exists: an agent that can run pxagent can read its key, its config and its state,
//! so the client's policy, confirmation, limits and audit are advice, not a wall. The gate
//! moves them onto the host, where the account can reach nothing but the gate: sshd runs it for
//! every session of the account (`command=` in the root-owned authorized_keys, `ForceCommand`
//! in the `Match User` block), with the requested command in `SSH_ORIGINAL_COMMAND`.
//!
//! For each request the gate:
//! 1. reads the command line ([`crate::base::gate_protocol::parse_command`]): a plain catalog line or an
//!    envelope; an empty command (interactive login), a subsystem (sftp), extra text or
//!    anything not in pxagent's canonical quoting is refused;
//! 2. reads it back into catalog operations ([`crate::catalog::inverse`]): the line must be
//!    exactly `sudo -n` plus a command line the catalog builds, with valid values;
//! 3. loads the host policy, failing closed when it is missing, invalid, or writable by
//!    anyone but root; decides with it (deny, read_only, protect, exec allowlists, `confirm`
//!    with the phrase from the envelope, `approve` with a signed approval ([`approval`]));
//! 4. counts host rate limits in its state directory (shared by every client);
//! 5. writes the decision to the system log ([`syslog`]); an allowed request that cannot be
//!    recorded is refused;
//! 6. runs `sudo -n <argv>` (no shell, no PATH search, a clean environment) as its child with
//!    its own stdin, stdout and stderr, so the bytes and the exit status are sudo's own, and
//!    ends it when the client closes the channel ([`child`]: sshd does not pass a client's
//!    signals to a forced command).
//!
//! Refusals are one stderr line and exit 125 ([`crate::base::gate_protocol`]). The gate runs as the agent
//! account, never as root; sudoers still decides what root runs. Uses the catalog, the
//! policy, the limits and the approvals; nothing else in pxagent depends on it.

pub mod approval;
mod chain;
mod child;
mod control;
mod freeze;
mod grants;
pub mod syslog;

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::base::error::Error;
use crate::base::gate_protocol::{
    self as protocol, Envelope, GateRequest, Hello, Refusal, RefusalKind,
};
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, Op, ops};
use crate::policy::{Decision, Policy, Transfer};

/// Where the gate finds its files. The defaults are what `pxagent setup render` installs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The host policy (root-owned, not writable by anyone else).
    pub policy: PathBuf,
    /// The approvers' public keys (root-owned).
    pub approvers: PathBuf,
    /// Rate-limit counters and issued statements; default `/var/lib/pxagent/<account>`
    /// (owned by the account, 0700).
    pub state_dir: Option<PathBuf>,
    /// The host's used approval nonces, shared by every gated account (root-owned, sticky).
    pub nonce_dir: PathBuf,
    /// The syslog socket.
    pub log_socket: PathBuf,
    /// sudo.
    pub sudo: PathBuf,
    /// The kill switch: while this file exists (root's; its first line is the reason), every
    /// change, confirm and exec operation is refused, for every gated account.
    pub freeze: PathBuf,
    /// The approvers' signed freezes and thaws, shared by every gated account (root-owned,
    /// sticky, like the nonces).
    pub control_dir: PathBuf,
    /// A root-owned file holding this host's machine id, read instead of `/etc/machine-id`
    /// (then D-Bus's copy). Only for a host that has none and must not be given one, such as a
    /// test bed in a container: a real Proxmox host always has `/etc/machine-id`.
    pub machine_id: Option<PathBuf>,
    /// `--host-chain`: hand every record to the root-side helper too, which appends it to the
    /// host audit chain (`helper/src/chain.rs`); a request whose record cannot be appended does
    /// not run.
    pub host_chain: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            policy: PathBuf::from("/etc/pxagent/policy.yaml"),
            approvers: PathBuf::from("/etc/pxagent/approvers"),
            state_dir: None,
            nonce_dir: PathBuf::from(crate::host::setup::NONCE_DIR),
            log_socket: PathBuf::from("/dev/log"),
            sudo: PathBuf::from("/usr/bin/sudo"),
            freeze: PathBuf::from(freeze::FREEZE_FILE),
            control_dir: PathBuf::from(freeze::CONTROL_DIR),
            machine_id: None,
            host_chain: false,
        }
    }
}

/// The environment the tools run in: sudo resets it anyway; nothing of the client's passes.
const PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// Facts about this request that do not come from the client.
struct RequestFacts {
    account: String,
    uid: u32,
    host: String,
    /// `/etc/machine-id` (or D-Bus's copy, or the file `--machine-id` names), when the host
    /// has one: what tells this host from another of the same name. `Err` says why there is
    /// none.
    machine_id: Result<String, String>,
    /// `SSH_CONNECTION`'s first word: the client's address.
    client: String,
    /// The SSH connection of this request (`SSH_CONNECTION`); without one, only that its
    /// port is likely 22 and nothing of its addresses.
    ssh: crate::catalog::firewall::SshPath,
    now: u64,
}

impl RequestFacts {
    fn read(opts: &Options) -> RequestFacts {
        let uid = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(u32::MAX);
        let account = account_name(uid).unwrap_or_else(|| format!("uid {uid}"));
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        let machine_id = read_machine_id(opts.machine_id.as_deref(), uid);
        let connection = std::env::var("SSH_CONNECTION").ok();
        let client = connection
            .as_deref()
            .and_then(|c| c.split(' ').next().map(str::to_string))
            .unwrap_or_else(|| "local".into());
        let ssh = connection
            .as_deref()
            .and_then(crate::catalog::firewall::SshPath::from_ssh_connection)
            .unwrap_or(crate::catalog::firewall::SshPath {
                client: None,
                server: None,
                port: 22,
            });
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        RequestFacts {
            account,
            uid,
            host,
            machine_id,
            client,
            ssh,
            now,
        }
    }

    fn state_dir(&self, opts: &Options) -> PathBuf {
        opts.state_dir
            .clone()
            .unwrap_or_else(|| Path::new("/var/lib/pxagent").join(&self.account))
    }
}

/// This host's machine id: from `named` (the gate's `--machine-id`, which must be a trusted
/// file, since an id the account could change would let it pass off one host's approvals as
/// another's), else from `/etc/machine-id`, else from D-Bus's copy. `Err` says what is missing.
fn read_machine_id(named: Option<&Path>, uid: u32) -> Result<String, String> {
    let read = |p: &Path| -> Option<String> {
        let id = std::fs::read_to_string(p).ok()?.trim().to_string();
        crate::approval::valid_machine_id(&id).then_some(id)
    };
    if let Some(p) = named {
        trusted_file(p, uid)?;
        return read(p).ok_or_else(|| {
            format!(
                "the machine id file {} (the gate's --machine-id) does not hold 32 lower-case hex digits",
                p.display()
            )
        });
    }
    ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| read(Path::new(p)))
        .ok_or_else(|| "this host has no machine id (/etc/machine-id)".to_string())
}

/// The names this host's resolver answers without DNS: every name in `/etc/hosts` (on a PVE
/// node its own name and its cluster's, by PVE's install rule) and the host's own name. A
/// download from one of them reaches inside the host's network.
fn local_names(hostname: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_to_string("/etc/hosts")
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.split_whitespace().skip(1).map(str::to_ascii_lowercase))
        .collect();
    if !hostname.is_empty() {
        names.push(hostname.to_ascii_lowercase());
    }
    names
}

/// The account name of `uid` from /etc/passwd.
fn account_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let id = f.nth(1)?;
        (id.parse() == Ok(uid)).then(|| name.to_string())
    })
}

/// What the gate decided.
enum Verdict {
    /// Describe the gate (a `hello` envelope).
    Hello(Box<Hello>),
    /// The answer to one of the gate's own requests (a `control` envelope).
    Answer(Value),
    /// Run `sudo -n` with these words.
    Run(Vec<String>),
    /// Refuse.
    Refuse(Box<Refusal>),
}

/// Serve one request; returns the exit status (sudo's own when it ran sudo).
pub fn run(opts: &Options) -> u8 {
    let ctx = RequestFacts::read(opts);
    let raw = std::env::var_os("SSH_ORIGINAL_COMMAND");
    let line = raw.as_ref().map(|r| r.to_str().ok_or(r.as_encoded_bytes()));
    let mut audit = json!({
        "account": ctx.account,
        "client": ctx.client,
        // This request's id on the host: each request is a gate process of its own.
        "request": format!("{}-{}", ctx.now, std::process::id()),
    });
    // No input may panic the gate into running something or into leaving no record: a panic
    // anywhere in the decision is a refusal, recorded like any other, and nothing runs.
    std::panic::set_hook(Box::new(|_| {}));
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match line {
        Some(Err(bytes)) => {
            audit["command"] = json!(escape_bytes(bytes));
            audit["command_not_utf8"] = json!(true);
            Verdict::Refuse(Box::new(Refusal::new(
                RefusalKind::BadRequest,
                "the command line is not UTF-8: pxagent's catalog lines and envelopes are",
            )))
        }
        Some(Ok(l)) => decide(opts, &ctx, Some(l), &mut audit),
        None => decide(opts, &ctx, None, &mut audit),
    }));
    let verdict = decided.unwrap_or_else(|_| {
        audit["panic"] = json!(true);
        Verdict::Refuse(Box::new(Refusal::new(
            RefusalKind::NotAllowed,
            "the gate failed on this request (a bug in pxagent: please report it), so nothing ran"
                .to_string(),
        )))
    });
    match verdict {
        Verdict::Hello(h) => {
            audit["decision"] = json!("hello");
            let _ = syslog::record(&opts.log_socket, true, &audit);
            crate::output::write_stdout(&serde_json::to_string(&h).unwrap_or_default());
            0
        }
        Verdict::Answer(v) => {
            // What the control request did is already done and recorded (the record is
            // written before it counts): a lost log line cannot undo a freeze.
            let _ = chain::append(opts, &mut audit);
            let _ = syslog::record(&opts.log_socket, true, &audit);
            crate::output::write_stdout(&v.to_string());
            0
        }
        Verdict::Refuse(r) => {
            refuse(opts, &mut audit, &r);
            protocol::REFUSED_EXIT as u8
        }
        Verdict::Run(words) => {
            audit["decision"] = json!("allowed");
            if let Err(e) = chain::append(opts, &mut audit) {
                let r = Refusal::new(
                    RefusalKind::AuditUnavailable,
                    format!(
                        "the gate cannot append its record to the host audit chain ({e}), so nothing runs"
                    ),
                );
                audit["chain_error"] = json!(e);
                let _ = syslog::record(&opts.log_socket, false, &audit);
                crate::output::write_stderr(&format!("{}\n", r.to_line()));
                return protocol::REFUSED_EXIT as u8;
            }
            if let Err(e) = syslog::record(&opts.log_socket, true, &audit) {
                let r = Refusal::new(
                    RefusalKind::AuditUnavailable,
                    format!(
                        "the gate cannot write its audit record ({e}), so nothing runs; the host's syslog (journald or rsyslog) must listen on {}",
                        opts.log_socket.display()
                    ),
                );
                crate::output::write_stderr(&format!("{}\n", r.to_line()));
                return protocol::REFUSED_EXIT as u8;
            }
            let spawned = Command::new(&opts.sudo)
                .args(&words[1..])
                .env_clear()
                .env("PATH", PATH)
                .spawn();
            let mut sudo = match spawned {
                Ok(c) => c,
                Err(err) => {
                    // Say it the way a shell would, so the client's "sudo is not installed"
                    // diagnosis applies.
                    crate::output::write_stderr(&format!(
                        "pxagent gate: {}: command not found ({err})\n",
                        opts.sudo.display()
                    ));
                    return 127;
                }
            };
            let (out, err) = (std::io::stdout(), std::io::stderr());
            match child::supervise(&mut sudo, &[out.as_fd(), err.as_fd()]) {
                Ok(o) => {
                    if o.hung_up {
                        audit["decision"] = json!("ended");
                        audit["reason"] = json!(
                            "the client closed the channel before sudo ended: sudo got SIGTERM (SIGKILL after the grace)"
                        );
                        audit["status"] = json!(child::describe(o.status));
                        let _ = syslog::record(&opts.log_socket, true, &audit);
                    }
                    child::exit_like(o.status)
                }
                Err(e) => {
                    crate::output::write_stderr(&format!(
                        "pxagent gate: lost track of sudo: {e}\n"
                    ));
                    let _ = sudo.wait();
                    protocol::REFUSED_EXIT as u8
                }
            }
        }
    }
}

/// Bytes that are not UTF-8 as text: the valid parts as they are, every other byte `\xNN`.
fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Log and print a refusal.
fn refuse(opts: &Options, audit: &mut Value, r: &Refusal) {
    audit["decision"] = json!("refused");
    audit["kind"] = json!(r.kind.name());
    audit["reason"] = json!(r.message);
    if let Some(why) = &r.reason {
        audit["approval_check"] = json!(why);
    }
    // A refusal that cannot be logged is still a refusal: nothing ran.
    let _ = chain::append(opts, audit);
    let _ = syslog::record(&opts.log_socket, false, audit);
    crate::output::write_stderr(&format!("{}\n", r.to_line()));
}

fn decide(opts: &Options, ctx: &RequestFacts, line: Option<&str>, audit: &mut Value) -> Verdict {
    let request = match protocol::parse_command(line) {
        Ok(r) => r,
        Err(r) => {
            // Recorded whole: the record cuts a long line itself, with its length and hash.
            audit["command"] = json!(line);
            return Verdict::Refuse(r);
        }
    };
    let (words, envelope) = match request {
        GateRequest::Plain(words) => (words, Envelope::default()),
        GateRequest::Envelope(env) if env.hello => {
            audit["client_version"] = syslog::free_text(&env.client);
            return Verdict::Hello(Box::new(hello(opts, ctx)));
        }
        GateRequest::Envelope(env) if env.control.is_some() => {
            audit["client_version"] = syslog::free_text(&env.client);
            // A grant's actions are the grants module's; a freeze, a thaw or anything unknown
            // the kill switch's.
            let grant = env
                .control
                .as_ref()
                .is_some_and(|c| matches!(c.action.as_str(), "grant" | "grants" | "revoke"));
            let answer = if grant {
                grants::control(opts, ctx, &env, audit)
            } else {
                freeze::control(opts, ctx, &env, audit)
            };
            return match answer {
                Ok(v) => Verdict::Answer(v),
                Err(r) => Verdict::Refuse(r),
            };
        }
        GateRequest::Envelope(mut env) => {
            audit["client_version"] = syslog::free_text(&env.client);
            (env.argv.take().unwrap_or_default(), *env)
        }
    };
    audit["argv"] = json!(words);
    match check(opts, ctx, &words, &envelope, audit) {
        Ok(()) => Verdict::Run(words),
        Err(r) => Verdict::Refuse(Box::new(*r)),
    }
}

/// Everything between reading the words and running them.
fn check(
    opts: &Options,
    ctx: &RequestFacts,
    words: &[String],
    envelope: &Envelope,
    audit: &mut Value,
) -> Result<(), Box<Refusal>> {
    let refusal = |kind: RefusalKind, msg: String| Box::new(Refusal::new(kind, msg));
    let tool_argv = match words {
        [sudo, n, rest @ ..] if sudo == "sudo" && n == "-n" && !rest.is_empty() => rest,
        _ => {
            return Err(refusal(
                RefusalKind::NotAllowed,
                format!(
                    "`{}` is refused: this account runs only pxagent's catalog operations (`sudo -n /absolute/tool args…`)",
                    crate::base::text::printable(&crate::base::text::quote_argv(words))
                ),
            ));
        }
    };
    let found = catalog::inverse::parse_argv(tool_argv).map_err(|e| {
        refusal(
            RefusalKind::NotAllowed,
            format!(
                "`{}` is refused: {e}",
                crate::base::text::printable(&crate::base::text::quote_argv(tool_argv))
            ),
        )
    })?;
    let invs: Vec<Invocation> = found
        .into_iter()
        .map(|(op, values)| Invocation {
            op,
            values,
            keep_type: None,
            attach: Default::default(),
        })
        .collect();
    let first = &invs[0];
    audit["op"] = json!(first.op.id);
    if invs.len() > 1 {
        audit["also"] = json!(invs[1..].iter().map(|i| i.op.id).collect::<Vec<_>>());
    }
    audit["params"] = json!(first.values);
    let with_op = |mut r: Box<Refusal>| {
        r.op = Some(first.op.id.to_string());
        r
    };

    // The kill switch comes before everything else: a frozen host runs reads only.
    if let Some(change) = invs.iter().find(|i| i.op.risk != catalog::Risk::Read)
        && let Some(frozen) = freeze::state(opts, ctx)
    {
        audit["frozen"] = frozen.to_json();
        let mut r = refusal(RefusalKind::Frozen, frozen.refusal(&change.display()));
        r.op = Some(change.op.id.to_string());
        return Err(r);
    }
    let policy =
        load_policy(opts, ctx).map_err(|m| with_op(refusal(RefusalKind::PolicyUnavailable, m)))?;
    let tags = if invs.iter().any(|i| policy.wants_tags(&sync_step(i).0)) {
        Some(guest_tags(opts).map_err(|m| {
            with_op(refusal(
                RefusalKind::PolicyRefused,
                format!("host policy protects tags, and the gate cannot read guest tags: {m}"),
            ))
        })?)
    } else {
        None
    };
    // Several ops may send the same line: it must pass as each of them (strictest verdict).
    let host_names = local_names(&ctx.host);
    let mut confirm: Option<String> = None;
    // The op whose rule asks for an approval is the one its statement names (a line several
    // ops send is approved as the op the host policy's rule is about).
    let mut approve: Option<(&Invocation, String, bool)> = None;
    for inv in &invs {
        let policy_refused = |e: Error| {
            with_op(refusal(
                RefusalKind::PolicyRefused,
                host_words(&e.to_string()),
            ))
        };
        // A step of a guest command's flow (a file write or read, a checksum) is judged as
        // that command's op — a `deny` or `protect` of vm.exec covers its file writes — and
        // as a transfer under its `push`/`pull` paths instead of its command allowlist.
        let (judged, transfer) = sync_step(inv);
        // Downloads never from the host's own names; NFS storages only on servers the host
        // policy names.
        policy
            .check_destinations(inv, Some(&host_names))
            .map_err(policy_refused)?;
        // A node or cluster rule never cuts off the connection this request came over,
        // unless the host policy says it may.
        policy
            .check_ssh_path(inv, &ctx.ssh)
            .map_err(policy_refused)?;
        let decision = policy
            .check(&judged, tags.as_ref())
            .map_err(policy_refused)?;
        match transfer {
            Some((dirs, path)) => {
                let mut last = Ok(());
                for dir in dirs {
                    last = policy.check_transfer(judged.op, *dir, &path);
                    if last.is_ok() {
                        break;
                    }
                }
                last.map_err(policy_refused)?;
            }
            None if inv.op.runs_guest_command() => {
                if let Some(cmd) = inv.values.get("command") {
                    let argv = crate::catalog::kind::guest_argv(cmd);
                    policy.check_command(inv, &argv).map_err(policy_refused)?;
                }
            }
            None => {}
        }
        // Only for a line the policy admits: the host read costs a tool run.
        path_apart(opts, inv).map_err(with_op)?;
        if policy.wants_storage_config(inv) {
            let config = host_read(opts, &ops::STORAGE_CONFIG).map_err(|m| {
                with_op(refusal(
                    RefusalKind::PolicyUnavailable,
                    format!("the gate cannot read the storage configuration: {m}"),
                ))
            })?;
            policy
                .check_storage_trust(inv, &config)
                .map_err(policy_refused)?;
        }
        match decision {
            Decision::Allow => {}
            Decision::Confirm(c) => confirm = Some(c.phrase),
            Decision::Approve {
                rule,
                reason,
                grant_only,
            } if approve.is_none() || (grant_only && approve.as_ref().is_some_and(|a| !a.2)) => {
                let rule = match reason {
                    Some(r) => format!("{r} ({rule})"),
                    None => rule,
                };
                approve = Some((inv, rule, grant_only));
            }
            Decision::Approve { .. } => {}
        }
    }
    if let Some(phrase) = confirm
        && envelope.confirm.as_deref() != Some(phrase.as_str())
    {
        let mut r = refusal(
            RefusalKind::ConfirmationRequired,
            format!(
                "the host policy wants confirmation for `{}`: reply `{phrase}` if you want it to run",
                first.display()
            ),
        );
        r.phrase = Some(phrase);
        return Err(with_op(r));
    }
    let state = ctx.state_dir(opts);
    // A grant in force admits what it covers without a per-call approval; a `grantable`
    // op runs only so.
    let granted = match &approve {
        Some((inv, _, _)) if envelope.approval.is_none() => grants::admit(opts, ctx, &state, inv)
            .map_err(|e| {
            with_op(refusal(
                RefusalKind::PolicyUnavailable,
                format!("the gate cannot count this grant's uses: {e}"),
            ))
        })?,
        _ => None,
    };
    if let Some(g) = granted {
        audit["grant"] = json!(g.id);
        audit["approver"] = json!(g.approver);
    } else if let Some((inv, rule, true)) = &approve {
        return Err(with_op(refusal(
            RefusalKind::PolicyRefused,
            format!(
                "the host policy runs `{}` only inside an approver's grant ({rule}), and no grant of this account in force covers it; nothing ran. An approver grants a window: `pxagent grant --key KEY --ops {} --vmids RANGES --for 2h`",
                inv.display(),
                inv.op.id
            ),
        )));
    } else if let Some((inv, rule, _)) = approve {
        let subject = approval::Subject::of(inv);
        let accepted = approval::check(
            opts,
            ctx,
            &state,
            &subject,
            envelope.approval.as_deref(),
            &rule,
        )
        .map_err(|mut r| {
            r.op = Some(inv.op.id.to_string());
            r
        })?;
        audit["approver"] = json!(accepted.approver);
        if inv.op != first.op {
            audit["approved_as"] = json!(inv.op.id);
        }
    }
    // Every request that reaches a guest counts, a transfer step too: under the limits of
    // the guest command's op it belongs to (a file write counts as vm.exec).
    for inv in &invs {
        admit(&policy, &state, sync_step(inv).0.op, ctx.now).map_err(|e| {
            let mut r = refusal(
                match e {
                    Error::RateLimited { .. } => RefusalKind::RateLimited,
                    _ => RefusalKind::PolicyUnavailable,
                },
                host_words(&e.to_string()),
            );
            if let Error::RateLimited { retry_after, .. } = e {
                r.retry_after = retry_after;
            }
            with_op(r)
        })?;
    }
    // Last, so that a refused call never counts: identical calls and the account's budget,
    // in a sliding window, across every client.
    let judged = invs
        .iter()
        .find(|i| i.op.risk != catalog::Risk::Read)
        .unwrap_or(first);
    let caps = policy.caps_for(judged);
    match crate::policy::limits::admit_sliding(&state.join("caps.json"), &caps, ctx.now) {
        Ok(Ok(())) => {}
        Ok(Err(full)) => {
            use crate::policy::limits::CapKind;
            let (kind, msg) = match full.cap.kind {
                CapKind::Runaway => (
                    RefusalKind::Runaway,
                    format!(
                        "`{}` came {} times in the last {}s, the most the host policy's `runaway` cap allows for one identical call: an agent in a loop? Nothing ran; it fits again in {}s",
                        judged.display(),
                        full.cap.max,
                        full.cap.window,
                        full.retry_after
                    ),
                ),
                CapKind::Budget => (
                    RefusalKind::Budget,
                    format!(
                        "this account's budget of {} change, confirm and exec operations per {}s (host policy `budget`) is used up; `{}` did not run; the next fits in {}s",
                        full.cap.max,
                        full.cap.window,
                        judged.display(),
                        full.retry_after
                    ),
                ),
            };
            audit["cap"] = json!(full.cap.key);
            let mut r = refusal(kind, msg);
            r.retry_after = Some(full.retry_after);
            return Err(with_op(r));
        }
        Err(e) => {
            return Err(with_op(refusal(
                RefusalKind::PolicyUnavailable,
                format!("the gate cannot count this call against the host policy's caps: {e}"),
            )));
        }
    }
    Ok(())
}

/// For a step of a guest command's flow: the invocation to judge it as (the guest command's
/// op, same guest), and the transfer it makes (the directions it may count as, the guest
/// path). Anything else is judged as itself.
type Step = (Invocation, Option<(&'static [Transfer], String)>);

fn sync_step(inv: &Invocation) -> Step {
    const PUSH: &[Transfer] = &[Transfer::Push];
    const PULL: &[Transfer] = &[Transfer::Pull];
    const EITHER: &[Transfer] = &[Transfer::Push, Transfer::Pull];
    let as_op = |op: &'static Op| Invocation {
        op,
        values: inv.values.clone(),
        keep_type: None,
        attach: Default::default(),
    };
    let file = inv.values.get("file").cloned().unwrap_or_default();
    if inv.op == &ops::VM_FILE_WRITE {
        return (as_op(&ops::VM_EXEC), Some((PUSH, file)));
    }
    if inv.op == &ops::VM_FILE_READ {
        return (as_op(&ops::VM_EXEC), Some((PULL, file)));
    }
    if inv.op.runs_guest_command()
        && let Some(cmd) = inv.values.get("command")
    {
        let argv = crate::catalog::kind::guest_argv(cmd);
        if let [program, path] = argv.as_slice() {
            let dirs = match program.as_str() {
                crate::catalog::guest::TEE if inv.op == &ops::CT_EXEC => Some(PUSH),
                crate::catalog::guest::CAT if inv.op == &ops::CT_EXEC => Some(PULL),
                crate::catalog::guest::SHA256SUM => Some(EITHER),
                _ => None,
            };
            if let Some(d) = dirs {
                return (inv.clone(), Some((d, path.clone())));
            }
        }
    }
    (inv.clone(), None)
}

/// Policy messages name "policy"; on the host they are the host's.
fn host_words(msg: &str) -> String {
    msg.replacen("policy refuses", "host policy refuses", 1)
        .replacen("local policy", "host policy", 1)
}

/// Count the op against its host limits.
fn admit(policy: &Policy, state: &Path, op: &'static Op, now: u64) -> crate::Result<()> {
    let limits = policy.limits_for(op);
    if limits.is_empty() {
        return Ok(());
    }
    crate::policy::limits::admit_at(
        &state.join("limits.json"),
        op,
        &limits,
        now,
        policy.limits_source(op).as_deref(),
    )
}

/// Load the host policy, refusing one that someone other than root could have written.
fn load_policy(opts: &Options, ctx: &RequestFacts) -> Result<Policy, String> {
    trusted_file(&opts.policy, ctx.uid)?;
    Policy::from_host_file(&opts.policy).map_err(|e| {
        format!(
            "the host policy is invalid, so the gate refuses everything: {e}; fix {} (as root)",
            opts.policy.display()
        )
    })
}

/// A file the gate may trust: it exists, and neither it nor any directory above it — along
/// the path as given and along the path it resolves to through symlinks — can be written by
/// the account, its group or others (only by root). A directory others may write is accepted
/// only with the sticky bit (as `/tmp`): there nobody but root can replace root's entry, and
/// that entry is checked in its own turn.
pub(crate) fn trusted_file(path: &Path, uid: u32) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| {
        format!(
            "the gate cannot read {} ({e}), so it refuses everything; install it as root (see `pxagent setup render`)",
            path.display()
        )
    })?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file, so the gate cannot trust it and refuses everything; install it as root (see `pxagent setup render`)",
            path.display()
        ));
    }
    let resolved = std::fs::canonicalize(path).map_err(|e| {
        format!(
            "the gate cannot resolve {} ({e}), so it refuses everything",
            path.display()
        )
    })?;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    // Every directory on both paths, then the file itself (its target).
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in [&absolute, &resolved] {
        for d in p.ancestors().skip(1) {
            if !dirs.iter().any(|x| x == d) {
                dirs.push(d.to_path_buf());
            }
        }
    }
    let mut checks: Vec<(PathBuf, bool)> = dirs.into_iter().map(|d| (d, true)).collect();
    checks.push((resolved.clone(), false));
    for (what, is_dir) in checks {
        // A directory on the path as given may itself be a symlink: judge where it leads,
        // and the directory holding the link (also on the list).
        let Ok(m) = std::fs::metadata(&what) else {
            continue;
        };
        let sticky = is_dir && m.mode() & 0o1000 != 0;
        let why = if m.uid() == uid {
            Some("is owned by the agent account")
        } else if m.mode() & 0o020 != 0 && !sticky {
            Some("is writable by its group")
        } else if m.mode() & 0o002 != 0 && !sticky {
            Some("is writable by others")
        } else if m.uid() != 0 {
            Some("is not owned by root")
        } else {
            None
        };
        if let Some(why) = why {
            let via = if resolved != absolute {
                format!(" (which resolves to {})", resolved.display())
            } else {
                String::new()
            };
            return Err(format!(
                "{} {why}, so the gate cannot trust {}{via} and refuses everything; fix it as root: chown root:root and chmod go-w",
                what.display(),
                path.display()
            ));
        }
    }
    Ok(())
}

/// Run one command as the gate does (sudo, clean environment) and collect its output.
fn run_collect(program: &Path, args: &[String]) -> protocol::CommandResult {
    match Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", PATH)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) => protocol::CommandResult {
            exit_status: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        },
        Err(e) => protocol::CommandResult {
            exit_status: None,
            stdout: String::new(),
            stderr: format!("cannot run {}: {e}", program.display()),
        },
    }
}

/// What a parameterless catalog read answers, run with the catalog's own line (so the
/// account's sudoers admits it as it admits the client's).
fn host_read(opts: &Options, op: &'static Op) -> Result<Value, String> {
    let inv = Invocation::new(op, BTreeMap::new()).map_err(|e| e.to_string())?;
    let argv = inv.remote_argv();
    let out = run_collect(&opts.sudo, &argv[1..]);
    if out.exit_status != Some(0) {
        return Err(format!(
            "`{}` failed: {}",
            argv.join(" "),
            out.stderr.trim()
        ));
    }
    serde_json::from_str(&out.stdout)
        .map_err(|e| format!("`{}` did not answer JSON: {e}", argv.join(" ")))
}

/// The guests' tags, read with the catalog's own `/cluster/resources` line.
fn guest_tags(opts: &Options) -> Result<crate::policy::GuestTags, String> {
    let resources = host_read(opts, &ops::CLUSTER_RESOURCES)?;
    Ok(crate::policy::GuestTags::from_resources(&resources))
}

/// A directory storage's path must lie apart from every storage's path: the gate
/// reads the storage configuration itself, since the client's reading is the agent's.
fn path_apart(opts: &Options, inv: &Invocation) -> Result<(), Box<Refusal>> {
    let paths = inv.op.prechecks.iter().filter_map(|c| match c {
        catalog::Precheck::PathApart(param) => inv.values.get(*param),
        _ => None,
    });
    let mut config = None;
    for path in paths {
        if config.is_none() {
            config = Some(host_read(opts, &ops::STORAGE_CONFIG).map_err(|m| {
                Box::new(Refusal::new(
                    RefusalKind::PolicyUnavailable,
                    format!("the gate cannot read the storage configuration to check {path}: {m}"),
                ))
            })?);
        }
        let config = config.as_ref().expect("read above");
        if let Some((id, theirs)) = catalog::kind::overlapping_storage(path, config) {
            return Err(Box::new(Refusal::new(
                RefusalKind::NotAllowed,
                catalog::kind::overlap_message(path, &id, &theirs),
            )));
        }
    }
    Ok(())
}

/// The answer to a `hello`: who the gate is and what the account can do (the preflight reads
/// it instead of running `id`, `sudo -V` and `sudo -n -l`, which the gate does not accept as
/// commands).
fn hello(opts: &Options, ctx: &RequestFacts) -> Hello {
    let mut extra = serde_json::Map::new();
    let policy = match load_policy(opts, ctx) {
        Ok(p) => {
            // The ops the host policy denies outright, whatever their values: `skill
            // --from-host` leaves them out of what the account may run.
            let denied: Vec<&str> = ops::OPS
                .iter()
                .filter(|op| !p.allows_listing(op))
                .map(|op| op.id)
                .collect();
            extra.insert(protocol::HELLO_POLICY_DENIES.into(), json!(denied));
            protocol::FileState {
                path: opts.policy.display().to_string(),
                ok: true,
                detail: format!(
                    "loaded ({})",
                    if p.read_only() { "read_only" } else { "rules" }
                ),
            }
        }
        Err(m) => protocol::FileState {
            path: opts.policy.display().to_string(),
            ok: false,
            detail: m,
        },
    };
    if let Some(f) = freeze::state(opts, ctx) {
        extra.insert(protocol::HELLO_FROZEN.into(), f.to_json());
    }
    let approvers = approval::describe(&opts.approvers, ctx.uid);
    let tools: Vec<(String, bool)> = catalog::pve::Tool::ALL
        .iter()
        .map(|t| {
            let p = t.path();
            let ok = std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0);
            (p.to_string(), ok)
        })
        .collect();
    Hello {
        protocol: protocol::PROTOCOL.to_string(),
        gate: crate::VERSION.to_string(),
        host: ctx.host.clone(),
        account: ctx.account.clone(),
        uid: ctx.uid,
        policy,
        approvers,
        sudo_version: run_collect(&opts.sudo, &["-V".to_string()]),
        sudo_list: run_collect(&opts.sudo, &["-n".to_string(), "-l".to_string()]),
        tools,
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine id named by `--machine-id` is read only from a trusted file that holds one;
    /// anything else says why, and never falls back to another file.
    #[test]
    fn a_named_machine_id_must_be_trusted_and_valid() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = dir.path().join("machine-id");
        let id = "0123456789abcdef0123456789abcdef";
        std::fs::write(&f, format!("{id}\n")).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        if me == 0 {
            assert_eq!(read_machine_id(Some(&f), 4242).unwrap(), id);
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
            let e = read_machine_id(Some(&f), 4242).unwrap_err();
            assert!(e.contains("writable by"), "{e}");
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
            std::fs::write(&f, "0123456789ABCDEF0123456789ABCDEF\n").unwrap();
            let e = read_machine_id(Some(&f), 4242).unwrap_err();
            assert!(
                e.contains("--machine-id") && e.contains("32 lower-case hex"),
                "{e}"
            );
        }
        // The account's own file is never its host's identity.
        assert!(read_machine_id(Some(&f), me).is_err());
        assert!(read_machine_id(Some(&dir.path().join("missing")), 4242).is_err());
    }

    #[test]
    fn files_writable_by_others_are_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("policy.yaml");
        std::fs::write(&f, "ops: {}\n").unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        // Owned by whoever runs the test: when that is root, a foreign uid must pass and the
        // owner's own uid must not; otherwise "not owned by root" refuses.
        let e = trusted_file(&f, me).unwrap_err();
        assert!(e.contains("owned by the agent account"), "{e}");
        if me == 0 {
            trusted_file(&f, 4242).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o664)).unwrap();
            assert!(trusted_file(&f, 4242).unwrap_err().contains("group"));
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o646)).unwrap();
            assert!(trusted_file(&f, 4242).unwrap_err().contains("others"));
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o757)).unwrap();
            let e = trusted_file(&f, 4242).unwrap_err();
            assert!(
                e.contains("writable by others") && e.contains(&dir.path().display().to_string()),
                "{e}"
            );
        } else {
            assert!(
                trusted_file(&f, 4242)
                    .unwrap_err()
                    .contains("not owned by root")
            );
        }
        assert!(trusted_file(&dir.path().join("missing"), 4242).is_err());
    }

    #[test]
    fn symlinks_are_followed_and_every_directory_above_the_target_is_checked() {
        use std::os::unix::fs::PermissionsExt;
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        if me != 0 {
            // Without root every file here is the tester's, which refuses it anyway.
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("p");
            std::fs::write(&f, "").unwrap();
            assert!(trusted_file(&f, 4242).is_err());
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(dir.path(), 0o755);
        let safe = dir.path().join("etc");
        let open = dir.path().join("open");
        let deep = open.join("deeper");
        std::fs::create_dir_all(&safe).unwrap();
        std::fs::create_dir_all(&deep).unwrap();
        mode(&safe, 0o755);
        mode(&open, 0o777);
        mode(&deep, 0o755);
        let target = deep.join("policy.yaml");
        std::fs::write(&target, "ops: {}\n").unwrap();
        mode(&target, 0o644);
        let link = safe.join("policy.yaml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // The link's own directory is fine; a directory above its target is not.
        let e = trusted_file(&link, 4242).unwrap_err();
        assert!(
            e.contains(&open.display().to_string()) && e.contains("writable by"),
            "{e}"
        );
        assert!(e.contains("resolves to"), "{e}");
        // Owned by the account, two levels above the target.
        mode(&open, 0o755);
        std::os::unix::fs::chown(&open, Some(4242), None).unwrap();
        let e = trusted_file(&link, 4242).unwrap_err();
        assert!(e.contains("owned by the agent account"), "{e}");
        std::os::unix::fs::chown(&open, Some(0), None).unwrap();
        trusted_file(&link, 4242).unwrap();
        // A sticky directory others may write is like /tmp: its root-owned entries stand.
        mode(&open, 0o1777);
        trusted_file(&link, 4242).unwrap();
        // A directory symlink on the path as given is judged by where it leads too.
        let dlink = dir.path().join("dlink");
        std::os::unix::fs::symlink(&deep, &dlink).unwrap();
        mode(&deep, 0o757);
        let e = trusted_file(&dlink.join("policy.yaml"), 4242).unwrap_err();
        assert!(e.contains("writable by others"), "{e}");
        mode(&deep, 0o755);
        // A target that is not a regular file.
        let to_dir = safe.join("dir.yaml");
        std::os::unix::fs::symlink(&deep, &to_dir).unwrap();
        assert!(
            trusted_file(&to_dir, 4242)
                .unwrap_err()
                .contains("not a regular file")
        );
    }

    #[test]
    fn sync_steps_are_judged_as_their_guest_command_and_as_transfers() {
        let inv = |op: &'static Op, kv: &[(&'static str, &str)]| Invocation {
            op,
            values: kv.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            keep_type: None,
            attach: Default::default(),
        };
        let w = inv(&ops::VM_FILE_WRITE, &[("vmid", "100"), ("file", "/tmp/a")]);
        let (judged, t) = sync_step(&w);
        assert_eq!(judged.op, &ops::VM_EXEC);
        assert_eq!(
            t.map(|(d, p)| (d.to_vec(), p)),
            Some((vec![Transfer::Push], "/tmp/a".into()))
        );
        let tee = inv(
            &ops::CT_EXEC,
            &[("vmid", "200"), ("command", r#"["/usr/bin/tee","/tmp/b"]"#)],
        );
        assert_eq!(
            sync_step(&tee).1.map(|(d, _)| d.to_vec()),
            Some(vec![Transfer::Push])
        );
        let sum = inv(
            &ops::VM_EXEC,
            &[
                ("vmid", "100"),
                ("command", r#"["/usr/bin/sha256sum","/tmp/b"]"#),
            ],
        );
        assert_eq!(sync_step(&sum).1.map(|(d, _)| d.len()), Some(2));
        // A tee with more words, or a tee through the VM guest agent, is an ordinary command.
        let other = inv(
            &ops::CT_EXEC,
            &[
                ("vmid", "200"),
                ("command", r#"["/usr/bin/tee","-a","/x"]"#),
            ],
        );
        assert!(sync_step(&other).1.is_none());
        let vm_tee = inv(
            &ops::VM_EXEC,
            &[("vmid", "100"), ("command", r#"["/usr/bin/tee","/x"]"#)],
        );
        assert!(sync_step(&vm_tee).1.is_none());
    }

    #[test]
    fn host_policy_takes_approve_and_client_policy_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.yaml");
        std::fs::write(&f, "ops:\n  vm.destroy: approve\n").unwrap();
        let host = Policy::from_host_file(&f).unwrap();
        let inv = Invocation::new(
            &ops::VM_DESTROY,
            [("vmid", "100".to_string()), ("node", "pve1".to_string())].into(),
        )
        .unwrap();
        assert!(matches!(
            host.check(&inv, None),
            Ok(Decision::Approve { .. })
        ));
        let e = Policy::from_file(&f).unwrap_err();
        assert!(e.to_string().contains("host policy"), "{e}");
    }
}
