//! The SSH transport: one key-only russh connection to a Proxmox host that runs many
//! `sudo -n …` command lines, concurrently on separate channels.
//!
//! This folder is the only place that imports russh, and it uses nothing above the transport
//! (it does not know `remote`, the catalog or the engine). Everything the rest of pxagent
//! needs is expressed in plain types: a [`Target`] in, a [`Session`] that runs argv vectors,
//! an [`Captured`] of raw bytes and an exit status out, and [`crate::Error`] classes that map to
//! pxagent's exit codes (6 for host key and authentication, 7 for connection trouble).
//!
//! By job: `session` (connect, channels, timeouts, keepalive), `auth` (key files and
//! ssh-agent, public keys only), `hostkey` (the handshake's host key check), `known_hosts`
//! (the file), [`config`] (the `~/.ssh/config` reader), [`pubkey`] (one public key line, for the
//! files `setup render` puts on the host). This file keeps the plain types.
//!
//! Security decisions, each deliberate:
//! - **Host key before anything else.** The key is checked inside the handshake
//!   (`check_server_key`), so a refusal happens before a user name or key is ever sent.
//!   Unknown hosts are refused unless the policy is [`HostKeyPolicy::AcceptNew`]; a changed
//!   key, a revoked key, or a host recorded only with other key types is refused always.
//! - **Public keys only.** pxagent never calls russh's password or keyboard-interactive
//!   methods, even when the server offers them: an agent must not be able to type a password,
//!   and a password prompt over a pipe would hang a script. The server's offer is recorded
//!   (from the `none` probe every SSH client sends first) so the preflight can warn about it.
//! - **Private key files readable by group or others are refused**, as OpenSSH does
//!   ("UNPROTECTED PRIVATE KEY FILE"): such a key must be presumed leaked.
//! - **Every argument is POSIX-quoted** with `shlex`: SSH `exec` carries one string that the
//!   remote login shell splits again, so quoting is what makes the host receive exactly the
//!   catalog's argv.
//! - **No exit status means the connection was lost**, never success.
//! - **Logs** (`tracing`, target `pxagent::ssh`, DEBUG): the connection, the host key's
//!   fingerprint and verdict, the key that authenticated (its file or "ssh-agent") and each
//!   command line with its exit status and duration; never key material or stdin data.
//!
//! Layer: ssh. May import: `base`.

mod auth;

/// What every connection error that ends before a command was sent says (a channel that never
/// opened): the engine tells such a change from one whose outcome is unknown by it.
pub const NOTHING_RAN: &str = "nothing was run";

pub mod config;
mod hostkey;
mod known_hosts;
pub mod pubkey;
mod session;

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

use russh::keys::{HashAlg, PublicKey};

use crate::base::error::{Error, Result};
use crate::base::text::MAX_COMMAND_LINE;

pub use session::{MAX_CONCURRENT_CHANNELS, SETTLE_WITHIN, Session, Settled};

/// The default agent account.
pub const DEFAULT_USER: &str = "zen-agent";

/// Split `user@host:port` / `host:port` / `[v6]:port` / `host`.
pub fn split_host(spec: &str) -> Result<(Option<String>, String, Option<u16>)> {
    let bad = || {
        Error::usage(format!(
            "invalid host '{}': expected NAME, HOST, USER@HOST or USER@HOST:PORT",
            crate::base::text::printable(spec)
        ))
    };
    let (user, rest) = match spec.rsplit_once('@') {
        Some((u, r)) => (Some(u.to_string()), r),
        None => (None, spec),
    };
    let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
        let (h, after) = inner.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad())?),
            None if after.is_empty() => None,
            None => return Err(bad()),
        };
        (h.to_string(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.parse().map_err(|_| bad())?)),
            None => (rest.to_string(), None),
        }
    };
    let ok = regex::Regex::new(r"^[A-Za-z0-9._:%-]{1,253}$").expect("static regex");
    if !ok.is_match(&host) || host.starts_with('-') {
        return Err(bad());
    }
    Ok((user, host, port))
}

/// What to do with a host whose key is not in known_hosts yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// Refuse unknown hosts (OpenSSH `StrictHostKeyChecking=yes`). The default.
    Strict,
    /// Record an unknown host's key and continue (`StrictHostKeyChecking=accept-new`,
    /// pxagent's `--accept-new`). A *changed* key is still refused.
    AcceptNew,
}

/// Where and how to connect. Build one with [`Target::new`] and override fields.
#[derive(Debug, Clone)]
pub struct Target {
    /// Host name or address (already resolved from `~/.ssh/config` `HostName` if any).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Remote account (default `zen-agent`).
    pub user: String,
    /// Private key files to try, in order, before the agent's keys. [`Target::new`] fills in
    /// OpenSSH's defaults that exist (`~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`); an empty
    /// list means "agent only". A listed file that does not exist is skipped (as OpenSSH
    /// does) and named in the authentication error if no other key works.
    pub identities: Vec<PathBuf>,
    /// `IdentitiesOnly`: offer only agent keys whose public half matches one of `identities`.
    pub identities_only: bool,
    /// Whether to use ssh-agent keys at all.
    pub use_agent: bool,
    /// The agent socket; `None` means `$SSH_AUTH_SOCK`. Tests set it so they never touch the
    /// process environment.
    pub agent_socket: Option<PathBuf>,
    /// The known_hosts file to check (and, with [`HostKeyPolicy::AcceptNew`], to append to).
    pub known_hosts: PathBuf,
    /// Unknown-host policy.
    pub host_key_policy: HostKeyPolicy,
    /// Limit for TCP connect plus SSH handshake, and again for authentication.
    pub connect_timeout: Duration,
    /// Limit for each command (`--timeout`); `None` waits as long as the command runs.
    pub command_timeout: Option<Duration>,
    /// Send a keepalive after this long without a word from the host; the third such
    /// silent interval in a row ends the connection as lost (with the default 15 s: a
    /// half-open link fails within 45 s). Zero disables keepalives.
    pub keepalive: Duration,
    /// Jump hosts (`-J`, `ProxyJump`), first hop first: the connection to each is tunnelled
    /// (an SSH `direct-tcpip` channel) through the one before it, and each is checked exactly
    /// like the target — host key against its known_hosts, public keys only. Their own
    /// `jumps` are ignored. Empty: connect directly.
    pub jumps: Vec<Target>,
}

impl Target {
    /// A target with pxagent's defaults: OpenSSH's default key files that exist, the agent
    /// from `$SSH_AUTH_SOCK`, `~/.ssh/known_hosts`, strict host keys, 10 s to connect, no
    /// command timeout, a keepalive every 15 s.
    pub fn new(host: impl Into<String>, port: u16, user: impl Into<String>) -> Target {
        Target {
            host: host.into(),
            port,
            user: user.into(),
            identities: default_identities(),
            identities_only: false,
            use_agent: true,
            agent_socket: None,
            known_hosts: default_known_hosts(),
            host_key_policy: HostKeyPolicy::Strict,
            connect_timeout: Duration::from_secs(10),
            command_timeout: None,
            keepalive: Duration::from_secs(15),
            jumps: Vec::new(),
        }
    }

    /// `user@host:port`, for messages.
    pub fn display(&self) -> String {
        if self.host.contains(':') {
            format!("{}@[{}]:{}", self.user, self.host, self.port)
        } else {
            format!("{}@{}:{}", self.user, self.host, self.port)
        }
    }
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// OpenSSH's default identity files (`~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`) that exist.
pub fn default_identities() -> Vec<PathBuf> {
    let Some(home) = home_dir() else {
        return Vec::new();
    };
    ["id_ed25519", "id_ecdsa", "id_rsa"]
        .iter()
        .map(|name| home.join(".ssh").join(name))
        .filter(|p| p.exists())
        .collect()
}

/// `~/.ssh/known_hosts` (relative `.ssh/known_hosts` without `$HOME`).
pub fn default_known_hosts() -> PathBuf {
    home_dir()
        .unwrap_or_default()
        .join(".ssh")
        .join("known_hosts")
}

/// What one remote command produced. stdout and stderr are kept byte-exact and apart so the
/// caller can classify sudo's refusals and parse JSON without guessing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// Everything the command wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything the command wrote to stderr.
    pub stderr: Vec<u8>,
    /// The command's exit status (0 = success).
    pub exit_status: u32,
}

impl Captured {
    /// Whether the command exited 0.
    pub fn success(&self) -> bool {
        self.exit_status == 0
    }

    /// stdout as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stdout)
    }

    /// stderr as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stderr)
    }
}

/// A command's output with each stream kept to a maximum ([`Session::exec_bounded`]): what
/// was kept, and whether more arrived (read and dropped, so memory stays bounded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounded {
    /// The first bytes of each stream and the exit status.
    pub output: Captured,
    /// stdout was longer than the maximum.
    pub stdout_truncated: bool,
    /// stderr was longer than the maximum.
    pub stderr_truncated: bool,
}

impl Bounded {
    /// Keep at most `max` bytes of each stream of a complete output (for transports that
    /// collected everything).
    pub fn cut(mut output: Captured, max: usize) -> Bounded {
        let stdout_truncated = output.stdout.len() > max;
        let stderr_truncated = output.stderr.len() > max;
        output.stdout.truncate(max);
        output.stderr.truncate(max);
        Bounded {
            output,
            stdout_truncated,
            stderr_truncated,
        }
    }
}

/// The exact string sent in the SSH `exec` request for `argv`: each argument POSIX-quoted and
/// joined with spaces, so the remote shell's word splitting gives back `argv` unchanged.
/// Also what a dry run should show. Empty argv or a NUL byte is [`Error::Usage`] (no shell can
/// carry NUL; nothing is sent).
pub fn command_line(argv: &[String]) -> Result<String> {
    if argv.is_empty() {
        return Err(Error::usage("internal: empty remote command"));
    }
    if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
        return Err(Error::usage(format!(
            "argument {} of `{}` contains a NUL byte, which cannot be passed to a remote command",
            i, argv[0]
        )));
    }
    let line = shlex::try_join(argv.iter().map(String::as_str))
        .map_err(|e| Error::usage(format!("cannot quote remote command: {e}")))?;
    if line.len() > MAX_COMMAND_LINE {
        return Err(Error::usage(format!(
            "the command line for `{}` would be {} bytes once quoted, more than the {MAX_COMMAND_LINE} a host accepts (the kernel's limit on one argument): nothing was sent; send less data in one request",
            argv.iter().take(4).cloned().collect::<Vec<_>>().join(" "),
            line.len()
        )));
    }
    Ok(line)
}

/// Check a host key that another process's connection to `target` saw (a persistent
/// connection's holder, [`crate::persist`]), in OpenSSH form, against this process's own
/// known_hosts and host key policy, exactly as the handshake would: so a holder can never be
/// a way around the host key check. Returns the accept-new note when it recorded the key.
pub fn check_host_key_line(target: &Target, key_line: &str) -> Result<Option<String>> {
    hostkey::check_line(target, key_line)
}

/// The SHA256 fingerprints of the key files `target` would offer (see [`Target::identities`]),
/// sorted; an unprotected key file is refused as a connection would refuse it.
pub fn identity_fingerprints(target: &Target) -> Result<Vec<String>> {
    auth::file_fingerprints(target)
}

/// Whether `target` could log in with the key of this fingerprint itself (one of its key
/// files, or its ssh-agent's keys when it may use the agent): a persistent connection that
/// logged in with another key is not this caller's to use.
pub async fn could_use_key(target: &Target, fingerprint: &str) -> Result<bool> {
    auth::could_use(target, fingerprint).await
}

/// The SHA256 fingerprint of an OpenSSH public key line (`ssh-ed25519 AAAA… [comment]`), as
/// `ssh-keygen -l` prints it: `SHA256:` followed by unpadded base64.
pub fn fingerprint(openssh_public_key: &str) -> Result<String> {
    let key = PublicKey::from_openssh(openssh_public_key.trim())
        .map_err(|e| Error::usage(format!("not an OpenSSH public key: {e}")))?;
    Ok(sha256(&key))
}

fn sha256(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// `ssh-ed25519 key SHA256:…`, for messages.
fn describe(key: &PublicKey) -> String {
    format!("{} key {}", key.algorithm().as_str(), sha256(key))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn nul_and_empty_are_usage_errors() {
        let err = command_line(&args(&["sudo", "a\0b"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("NUL"));
        assert_eq!(command_line(&[]).unwrap_err().exit_code(), 2);
        // The host's limit, counted on the line as sent (after quoting).
        let at = |word: String| command_line(&args(&["sudo", "-n", &word]));
        let fits = "x".repeat(MAX_COMMAND_LINE - "sudo -n ".len());
        assert_eq!(at(fits.clone()).unwrap().len(), MAX_COMMAND_LINE);
        let e = at(format!("{fits}x")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("nothing was sent"), "{e}");
    }

    /// The quoting round-trips through real local shells (the remote login shell is one of
    /// these); the integration tests repeat this over SSH.
    #[test]
    fn quoting_round_trips_through_sh_and_bash() {
        let tricky = args(&[
            "/usr/bin/printf",
            "%s\\0",
            "plain",
            "with space",
            "it's",
            "\"double\"",
            "$(id)",
            "`id`",
            "a;b",
            "*",
            "line1\nline2",
            "",
            "~",
            "#hash",
            "back\\slash",
            "{a,b}",
            "!bang",
            "tab\there",
            "ünïcödé",
            "-n",
        ]);
        let line = command_line(&tricky).unwrap();
        for shell in ["/bin/sh", "/bin/bash"] {
            if !Path::new(shell).exists() {
                continue;
            }
            let out = std::process::Command::new(shell)
                .arg("-c")
                .arg(&line)
                .output()
                .unwrap();
            assert!(out.status.success(), "{shell}: {out:?}");
            let expected: Vec<u8> = tricky[2..]
                .iter()
                .flat_map(|a| a.bytes().chain([0]))
                .collect();
            assert_eq!(out.stdout, expected, "{shell} with {line}");
        }
    }

    #[test]
    fn fingerprint_matches_ssh_keygen_format() {
        // `ssh-keygen -lf` on this key prints exactly this fingerprint.
        let fp = fingerprint(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ c",
        )
        .unwrap();
        assert_eq!(fp, "SHA256:T7SvZ2cslqpPj6nKzitCBHHlpVF3r3MvLwmFL0fk0IE");
        assert!(fingerprint("nonsense").is_err());
    }
}
