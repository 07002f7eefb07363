//! `pxagent setup render|revoke`: the root scripts that give a Proxmox host a gated agent
//! account, and take it away again. Pure: validated options in, script text out; the CLI reads
//! the files the types below are parsed from.
//!
//! What `render`'s script installs, each layer holding on its own: classic sudo;
//! the account (no password, no supplementary groups, not expired); its key in a root-owned
//! file with `restrict,from=…,command="<gate>"`; an sshd drop-in `Match User` block (key only,
//! no forwarding, no tty, `ForceCommand` the gate); the sudoers whitelist; the host policy and
//! approvers; the gate's state directory. `revoke`'s script expires the account (which
//! blocks SSH and sudo at once), removes keys, drop-in and sudoers, reloads sshd and ends
//! the account's processes. Both verify what they did and summarize what changed.
//!
//! Decisions:
//! - every value a user gave is validated here (the types below) and appears in the script as a
//!   single-quoted shell word, all in one block at the top, for review;
//! - the logic is fixed text (`common.sh`, `render.sh`, `revoke.sh` beside this file): only
//!   values and file contents vary, so one review of the logic holds for every rendering;
//! - file contents go through quoted here-documents whose delimiter no line of the content
//!   equals ([`script::heredoc_delimiter`]), so no content can end its document early;
//! - idempotent: every step compares before it writes and prints `ok` or `changed`;
//! - the test bed runs its own sshd with its own config file and pid file: `--sshd-config` and
//!   `--sshd-pid-file` name them (the drop-in goes to `sshd_config.d/` beside the config, and a
//!   config that includes no drop-in gets one `Include` line for ours, which revoke removes).
//!
//! Uses the sudoers renderer, the policy loader (to check a host policy before embedding it)
//! and `ssh::pubkey` (the only russh user parses keys); nothing here does I/O.

mod render;
mod revoke;
mod script;
#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

use crate::base::error::{Error, Result};
use crate::base::text::printable;
use crate::host::sudoers::render::{RenderOptions, validate_user};
use crate::policy::Policy;
use crate::ssh::pubkey::{PublicKeyLine, parse_public_key};

pub use render::{authorized_keys_line, default_policy, forced_command, render, sshd_dropin};
pub use revoke::revoke;
pub use script::heredoc_delimiter;

/// Where the gate (the pxagent binary) is installed on the host by default.
pub const DEFAULT_GATE: &str = "/usr/local/bin/pxagent";
/// The host policy the gate enforces, by default.
pub const DEFAULT_POLICY_PATH: &str = "/etc/pxagent/policy.yaml";
/// The approvers' public keys (signed approvals), by default.
pub const DEFAULT_APPROVERS_PATH: &str = "/etc/pxagent/approvers";
/// The sshd config of a Debian/Proxmox host.
pub const DEFAULT_SSHD_CONFIG: &str = "/etc/ssh/sshd_config";
/// The directory of the agents' authorized_keys files (root-owned, one file per account).
pub const KEYS_DIR: &str = "/etc/pxagent/keys";
/// The parent of the gate's per-account state directories.
pub const STATE_BASE: &str = "/var/lib/pxagent";

/// The host's record of used approval nonces, shared by every gated account (root-owned,
/// sticky: each account's gate adds records, none can remove another's). Its name starts with
/// a dot, which no account name does, so it cannot be an account's state directory.
pub const NONCE_DIR: &str = "/var/lib/pxagent/.nonces";
/// The approvers' signed freezes and thaws of the host, shared by every gated account like
/// [`NONCE_DIR`] (the gate's default `--control-dir`).
pub const CONTROL_DIR: &str = "/var/lib/pxagent/.control";
/// Root's kill switch: while this file exists, every gated account runs reads only (the
/// gate's default `--freeze`).
pub const FREEZE_FILE: &str = "/etc/pxagent/freeze";
/// The directory of the sudoers files.
pub const SUDOERS_DIR: &str = "/etc/sudoers.d";
/// The GECOS field of accounts that `setup render` created: such an account may be managed
/// again even with a system uid.
pub const ACCOUNT_COMMENT: &str = "pxagent agent account";

/// RSA keys below this size are refused (OpenSSH's own floor is 1024 bits since 9.1).
const MIN_RSA_BITS: u32 = 2048;

static HOST_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(/[A-Za-z0-9._+-]+)+$").expect("static regex"));

/// An absolute path on the host that the script and sshd's config lines can carry without
/// quoting: `/`-separated words of letters, digits and `._+-`, no `.` or `..` components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPath(String);

impl HostPath {
    /// Validate `value`, given with `flag` (named in the error).
    pub fn parse(flag: &str, value: &str) -> Result<HostPath> {
        let ok = value.len() <= 255
            && HOST_PATH.is_match(value)
            && value.split('/').skip(1).all(|c| c != "." && c != "..");
        if !ok {
            return Err(Error::usage(format!(
                "{flag} '{}': expected an absolute path of letters, digits and ._+- (no spaces or quotes, no . or .. parts)",
                printable(value)
            )));
        }
        Ok(HostPath(value.to_string()))
    }

    /// A built-in default (known to be valid).
    fn fixed(value: &str) -> HostPath {
        HostPath(value.to_string())
    }

    /// The path.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The directory that holds it (`/` for a file at the root).
    pub fn parent(&self) -> &str {
        match self.0.rsplit_once('/') {
            Some(("", _)) | None => "/",
            Some((dir, _)) => dir,
        }
    }
}

/// The `from="…"` list of the agent's key: addresses and CIDR networks, nothing else (no host
/// names, no negations, no wildcards).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceList(Vec<String>);

impl SourceList {
    /// Parse `--from`: a comma list of `ADDRESS` or `ADDRESS/PREFIX`, IPv4 or IPv6. A network
    /// with host bits set is refused: sshd rejects the whole key then.
    pub fn parse(value: &str) -> Result<SourceList> {
        let bad = |why: String| Error::usage(format!("--from '{}': {why}", printable(value)));
        if value.is_empty() || value.len() > 1024 {
            return Err(bad(
                "expected addresses or networks like 192.0.2.0/24,2001:db8::/32".into(),
            ));
        }
        let mut entries = Vec::new();
        for entry in value.split(',') {
            let (addr, prefix) = match entry.split_once('/') {
                Some((a, p)) => (a, Some(p)),
                None => (entry, None),
            };
            let ip: IpAddr = addr.parse().map_err(|_| {
                bad(format!(
                    "'{}' is not an IPv4 or IPv6 address or network (e.g. 192.0.2.0/24, 2001:db8::/32; no host names, no spaces)",
                    printable(entry)
                ))
            })?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let len = match prefix {
                None => max,
                Some(p) => match p.parse::<u32>() {
                    Ok(n) if n <= max && p.bytes().all(|b| b.is_ascii_digit()) => n,
                    _ => {
                        return Err(bad(format!(
                            "'{}': the prefix length must be 0-{max}",
                            printable(entry)
                        )));
                    }
                },
            };
            if host_bits(ip, max - len) != 0 {
                return Err(bad(format!(
                    "'{entry}' has host bits set after /{len} (sshd would then refuse the key from everywhere): write the network address, or /{max} for one address"
                )));
            }
            entries.push(entry.to_string());
        }
        Ok(SourceList(entries))
    }

    /// The list as `from="…"` carries it.
    pub fn joined(&self) -> String {
        self.0.join(",")
    }
}

/// The bits of `ip` below its network prefix, the lowest `host` bits.
fn host_bits(ip: IpAddr, host: u32) -> u128 {
    let value = match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let mask = match host {
        0 => 0,
        128.. => u128::MAX,
        n => (1u128 << n) - 1,
    };
    value & mask
}

/// The agent's public key: one bare OpenSSH public key, not DSA, RSA of at least 2048 bits,
/// a comment without control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentKey(PublicKeyLine);

impl AgentKey {
    /// Parse the text of `--pubkey` (`shown` names the file in errors).
    pub fn parse(text: &str, shown: &str) -> Result<AgentKey> {
        if text.contains("PRIVATE KEY") {
            return Err(Error::usage(format!(
                "--pubkey {shown} holds a private key: give its public half ({shown}.pub); the private key stays with the agent"
            )));
        }
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let line = match lines.as_slice() {
            [one] => *one,
            [] => {
                return Err(Error::usage(format!(
                    "--pubkey {shown} holds no public key (expected one line like `ssh-ed25519 AAAA… name`)"
                )));
            }
            many => {
                return Err(Error::usage(format!(
                    "--pubkey {shown} holds {} lines: give exactly one public key (one key per agent account)",
                    many.len()
                )));
            }
        };
        let key =
            parse_key_line(line).map_err(|why| Error::usage(format!("--pubkey {shown}: {why}")))?;
        Ok(AgentKey(key))
    }

    /// The key line (`ALGORITHM BASE64 [COMMENT]`).
    pub fn line(&self) -> String {
        self.0.to_line()
    }

    /// The base64 blob that identifies the key.
    pub fn blob(&self) -> &str {
        &self.0.blob
    }

    /// The SHA256 fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.0.fingerprint
    }
}

/// One key line of `--pubkey` or `--approvers`, with pxagent's rules on top of ssh-key's.
fn parse_key_line(line: &str) -> std::result::Result<PublicKeyLine, String> {
    if line.chars().any(|c| c.is_control() && c != '\t') {
        return Err("the key line holds control characters".into());
    }
    let key = parse_public_key(line).map_err(|why| {
        let first = line.split_whitespace().next().unwrap_or_default();
        let bare_key_later = line
            .split_whitespace()
            .skip(1)
            .any(|w| w.starts_with("ssh-") || w.starts_with("ecdsa-") || w.starts_with("sk-"));
        if first.contains(['=', ',', '"']) || bare_key_later {
            format!(
                "the key has authorized_keys options in front ({}): give the bare key, pxagent writes restrict,from=,command= itself",
                printable(first)
            )
        } else {
            format!("not an OpenSSH public key ({why}): expected `ssh-ed25519 AAAA… name`")
        }
    })?;
    if key.dsa {
        return Err("DSA keys are refused (OpenSSH disabled them years ago): use ed25519".into());
    }
    if let Some(bits) = key.rsa_bits
        && bits < MIN_RSA_BITS
    {
        return Err(format!(
            "this RSA key has {bits} bits; at least {MIN_RSA_BITS} are required (better: ed25519)"
        ));
    }
    Ok(key)
}

/// The approvers file: OpenSSH public keys of the people who may sign approvals, one per line;
/// empty lines and `#` comments are kept. Carriage returns are dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approvers {
    text: String,
    keys: Vec<PublicKeyLine>,
}

impl Approvers {
    /// Parse the text of `--approvers` (`shown` names the file in errors, with the line).
    pub fn parse(text: &str, shown: &str) -> Result<Approvers> {
        let mut out = String::new();
        let mut keys = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim_end_matches('\r').trim();
            if line.is_empty() || line.starts_with('#') {
                if line.chars().any(|c| c.is_control() && c != '\t') {
                    return Err(Error::usage(format!(
                        "--approvers {shown}:{}: the comment holds control characters",
                        n + 1
                    )));
                }
                out.push_str(line);
            } else {
                let key = parse_key_line(line)
                    .map_err(|why| Error::usage(format!("--approvers {shown}:{}: {why}", n + 1)))?;
                out.push_str(&key.to_line());
                keys.push(key);
            }
            out.push('\n');
        }
        Ok(Approvers { text: out, keys })
    }

    /// The file's text as it will be installed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `blob` (a key's base64) is one of the approvers.
    pub fn contains(&self, blob: &str) -> bool {
        self.keys.iter().any(|k| k.blob == blob)
    }
}

/// A host policy file's text, checked by the policy loader (YAML, or the MCP gateway's JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPolicy {
    text: String,
    source: String,
}

impl HostPolicy {
    /// Check `text` (`shown` names the file in errors) as a pxagent policy.
    pub fn parse(text: &str, shown: &str) -> Result<HostPolicy> {
        if text.contains('\0') {
            return Err(Error::usage(format!(
                "--policy {shown}: the file holds NUL bytes"
            )));
        }
        Policy::from_host_text(text, shown)?;
        let mut text = text.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        Ok(HostPolicy {
            text,
            source: shown.to_string(),
        })
    }

    /// The text as it will be installed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Where it came from (for the script's header).
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// The sshd a script configures: its config file (the drop-in goes to `sshd_config.d/` beside
/// it) and, for an sshd that systemd does not run, its pid file (reloaded with SIGHUP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sshd {
    /// `--sshd-config`.
    pub config: HostPath,
    /// `--sshd-pid-file`.
    pub pid_file: Option<HostPath>,
}

impl Default for Sshd {
    fn default() -> Sshd {
        Sshd {
            config: HostPath::fixed(DEFAULT_SSHD_CONFIG),
            pid_file: None,
        }
    }
}

impl Sshd {
    /// The drop-in file of `user`.
    pub fn dropin(&self, user: &str) -> String {
        let dir = self.config.parent();
        let dir = dir.strip_suffix('/').unwrap_or(dir);
        format!("{dir}/sshd_config.d/pxagent-{user}.conf")
    }
}

/// Everything `setup render` needs.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// The account, profile and fences (the sudoers file is rendered from these).
    pub sudoers: RenderOptions,
    /// The agent's public key.
    pub key: AgentKey,
    /// `--from`: where the key may log in from (anywhere when absent).
    pub from: Option<SourceList>,
    /// `--policy FILE`: the host policy to install (else an existing one stays, or the
    /// default is created).
    pub policy: Option<HostPolicy>,
    /// `--approvers FILE`: the approvers to install (else an existing file stays, or an empty
    /// one is created).
    pub approvers: Option<Approvers>,
    /// `--gate-bin`.
    pub gate: HostPath,
    /// `--policy-path`.
    pub policy_path: HostPath,
    /// `--approvers-path`.
    pub approvers_path: HostPath,
    /// `--log-socket`: the gate's syslog socket when it is not `/dev/log`.
    pub log_socket: Option<HostPath>,
    /// `--sshd-config`, `--sshd-pid-file`.
    pub sshd: Sshd,
}

impl SetupOptions {
    /// The defaults for this account and key: no `--from`, no policy or approvers given, the
    /// default paths.
    pub fn new(sudoers: RenderOptions, key: AgentKey) -> SetupOptions {
        SetupOptions {
            sudoers,
            key,
            from: None,
            policy: None,
            approvers: None,
            gate: HostPath::fixed(DEFAULT_GATE),
            policy_path: HostPath::fixed(DEFAULT_POLICY_PATH),
            approvers_path: HostPath::fixed(DEFAULT_APPROVERS_PATH),
            log_socket: None,
            sshd: Sshd::default(),
        }
    }

    /// The account.
    pub fn user(&self) -> &str {
        &self.sudoers.user
    }

    /// What must hold across options: the agent cannot approve its own requests, and the gate,
    /// policy and approvers are three different files.
    fn check(&self) -> Result<()> {
        if self
            .approvers
            .as_ref()
            .is_some_and(|a| a.contains(self.key.blob()))
        {
            return Err(Error::usage(
                "the agent's key (--pubkey) is also in --approvers: it could approve its own requests; approvers are people's keys",
            ));
        }
        let paths = [&self.gate, &self.policy_path, &self.approvers_path];
        for (i, a) in paths.iter().enumerate() {
            if paths[i + 1..].contains(a) {
                return Err(Error::usage(format!(
                    "{} is given for two of --gate-bin, --policy-path and --approvers-path",
                    a.as_str()
                )));
            }
        }
        Ok(())
    }
}

/// Everything `setup revoke` needs.
#[derive(Debug, Clone)]
pub struct RevokeOptions {
    /// The account.
    pub user: String,
    /// `--sshd-config`, `--sshd-pid-file`.
    pub sshd: Sshd,
}

impl RevokeOptions {
    /// Revoke `user` (validated like every account name: never root) with the default sshd.
    pub fn new(user: &str) -> Result<RevokeOptions> {
        Ok(RevokeOptions {
            user: validate_user(user)?,
            sshd: Sshd::default(),
        })
    }
}
