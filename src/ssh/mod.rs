//! The SSH transport: one key-only russh connection to a Proxmox host that runs many
//! `sudo -n …` command lines, concurrently on separate channels (design §3, §5, §9).
//!
//! This is the only module that imports russh. Everything the rest of pxagent needs is
//! expressed in plain types: a [`Target`] in, a [`Session`] that runs argv vectors, an
//! [`Output`] of raw bytes and an exit status out, and [`crate::Error`] classes that map to the
//! exit codes of design §4 (6 for host key and authentication, 7 for connection trouble).
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

pub mod config;
mod known_hosts;

use std::borrow::Cow;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::client;
use russh::keys::agent::client::AgentClient;
use russh::keys::{Algorithm, HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey};
use russh::{ChannelMsg, Disconnect, Preferred, Sig};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::error::{Error, Result};

/// At most this many channels run at once on one connection. OpenSSH's sshd allows
/// `MaxSessions 10` by default; staying at 8 leaves room for the host's own tools (and a
/// second pxagent) without hitting "open failed: administratively prohibited".
pub const MAX_CONCURRENT_CHANNELS: usize = 8;

/// How long a timed-out command gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// How often a refused channel open is retried (about 5 s in total, see `open_channel`).
const OPEN_RETRIES: u32 = 14;

/// Missed keepalive replies after which the connection counts as lost.
const KEEPALIVE_MAX: usize = 3;

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
    /// Remote account (design default `zen-agent`).
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
    /// Send a keepalive after this long without traffic; after 3 unanswered ones the
    /// connection is lost. Zero disables keepalives.
    pub keepalive: Duration,
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
pub struct Output {
    /// Everything the command wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything the command wrote to stderr.
    pub stderr: Vec<u8>,
    /// The command's exit status (0 = success).
    pub exit_status: u32,
}

impl Output {
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
    shlex::try_join(argv.iter().map(String::as_str))
        .map_err(|e| Error::usage(format!("cannot quote remote command: {e}")))
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

/// One authenticated connection. Cheap to clone (all clones share the connection); `Send +
/// Sync`, so the MCP server and `status` can run commands from several tasks at once.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    handle: client::Handle<Verifier>,
    /// Caps concurrent channels at [`MAX_CONCURRENT_CHANNELS`].
    slots: Semaphore,
    target: String,
    command_timeout: Option<Duration>,
    auth_methods: Option<Vec<String>>,
    host_key: String,
    recorded_host_key: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("target", &self.inner.target)
            .field("host_key", &self.inner.host_key)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Connects, verifies the host key against known_hosts (before any authentication), and
    /// authenticates with public keys only: the key files first, then the agent's keys.
    ///
    /// Errors: [`Error::Auth`] for host key and authentication refusals (exit 6),
    /// [`Error::Connection`] for refused/unreachable/timed-out connections and failed
    /// handshakes (exit 7), [`Error::ReadFile`] for a key file or known_hosts file that
    /// exists but cannot be read (exit 2, nothing sent: files are read before connecting).
    pub async fn connect(target: &Target) -> Result<Session> {
        let keys = load_identities(&target.identities)?;
        let entries = known_hosts::read(&target.known_hosts).map_err(|source| Error::ReadFile {
            path: target.known_hosts.clone(),
            source,
        })?;
        let who = target.display();

        // Ask for the host key types already on record first, as OpenSSH does, so a host with
        // several keys presents the one we can check.
        let known = known_hosts::known_algorithms(&entries, &target.host, target.port);
        let mut key_algs: Vec<Algorithm> = Preferred::DEFAULT.key.to_vec();
        key_algs.sort_by_key(|a| !known.iter().any(|k| known_hosts::same_family(a, k)));

        let config = Arc::new(client::Config {
            preferred: Preferred {
                key: Cow::Owned(key_algs),
                ..Preferred::DEFAULT
            },
            keepalive_interval: (!target.keepalive.is_zero()).then_some(target.keepalive),
            keepalive_max: KEEPALIVE_MAX,
            // One small request per command: Nagle's algorithm would add a delayed-ACK wait
            // to every round trip (design §9).
            nodelay: true,
            ..Default::default()
        });
        let outcome = Arc::new(Mutex::new(HostKeyOutcome::default()));
        let verifier = Verifier {
            host: target.host.clone(),
            port: target.port,
            user: target.user.clone(),
            known_hosts: target.known_hosts.clone(),
            policy: target.host_key_policy,
            entries,
            outcome: outcome.clone(),
        };

        let host_port = (target.host.as_str(), target.port);
        let handshake = async {
            let stream = tokio::net::TcpStream::connect(host_port)
                .await
                .map_err(|e| {
                    Error::Connection(format!(
                        "cannot connect to {}:{}: {e}",
                        target.host, target.port
                    ))
                })?;
            // russh applies `Config::nodelay` only in `client::connect`, not to a stream we
            // open ourselves: without this, Nagle's algorithm delays every channel open by
            // ~40 ms (measured with scripts/bench.sh and strace).
            stream.set_nodelay(true).map_err(|e| {
                Error::Connection(format!(
                    "cannot set TCP_NODELAY on {}:{}: {e}",
                    target.host, target.port
                ))
            })?;
            client::connect_stream(config, stream, verifier)
                .await
                .map_err(|e| match e {
                    HandlerError::HostKey(e) => e,
                    HandlerError::Ssh(e) => Error::Connection(format!(
                        "SSH handshake with {}:{} failed: {e}",
                        target.host, target.port
                    )),
                })
        };
        let mut handle = tokio::time::timeout(target.connect_timeout, handshake)
            .await
            .map_err(|_| {
                Error::Connection(format!(
                    "connecting to {}:{} timed out after {}s (TCP connect and SSH handshake)",
                    target.host,
                    target.port,
                    target.connect_timeout.as_secs_f64()
                ))
            })??;

        let auth = tokio::time::timeout(
            target.connect_timeout,
            authenticate(&mut handle, target, &keys),
        )
        .await
        .map_err(|_| {
            Error::Connection(format!(
                "authentication as {who} timed out after {}s",
                target.connect_timeout.as_secs_f64()
            ))
        })?;
        let auth_methods = match auth {
            Ok(methods) => methods,
            Err(e) => {
                let _ = handle.disconnect(Disconnect::ByApplication, "", "en").await;
                return Err(e);
            }
        };
        let outcome = std::mem::take(&mut *outcome.lock().expect("host key outcome lock"));
        Ok(Session {
            inner: Arc::new(Inner {
                handle,
                slots: Semaphore::new(MAX_CONCURRENT_CHANNELS),
                target: who,
                command_timeout: target.command_timeout,
                auth_methods,
                host_key: outcome.presented,
                recorded_host_key: outcome.recorded,
            }),
        })
    }

    /// Runs one command on its own channel. `argv[0]` is the first word (for pxagent:
    /// `["sudo", "-n", "/usr/bin/pvesh", "get", …]`); see [`command_line`] for the quoting.
    ///
    /// A non-zero exit status is *not* an error here: it is returned in [`Output`] for the
    /// caller to classify (sudo refusal, PVE error…). Errors: [`Error::Usage`] for NUL bytes;
    /// [`Error::Connection`] when the command timed out (the remote process is sent SIGTERM,
    /// then SIGKILL, and the channel is closed) or the connection was lost before an exit
    /// status arrived; [`Error::Remote`] when the command was killed by a signal.
    ///
    /// The command timeout counts from the moment the command gets one of the
    /// [`MAX_CONCURRENT_CHANNELS`] slots, so waiting behind other commands does not eat it.
    pub async fn exec(&self, argv: &[String]) -> Result<Output> {
        self.exec_streaming(argv, &mut |_| {}).await
    }

    /// Like [`Session::exec`], and hands every chunk of stdout to `on_stdout` as it arrives
    /// (a Proxmox task prints its log while it runs). The returned [`Output`] still holds
    /// everything.
    pub async fn exec_streaming(
        &self,
        argv: &[String],
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Output> {
        let command = command_line(argv)?;
        let _slot = self
            .inner
            .slots
            .acquire()
            .await
            .map_err(|_| Error::Internal("channel semaphore closed".into()))?;
        // Name the command in messages by its first words (`sudo -n /usr/bin/pvesh get …`).
        let label: String = argv.iter().take(5).cloned().collect::<Vec<_>>().join(" ");
        self.run(&command, &label, on_stdout, None).await
    }

    /// Like [`Session::exec`], and writes `input` to the command's stdin, then EOF. The
    /// input is written while the output is read, so a command that echoes (`tee`) cannot
    /// stall on a full window. A command that exits without reading all of it is not an
    /// error here: its exit status tells.
    pub async fn exec_with_stdin(&self, argv: &[String], input: &[u8]) -> Result<Output> {
        let command = command_line(argv)?;
        let _slot = self
            .inner
            .slots
            .acquire()
            .await
            .map_err(|_| Error::Internal("channel semaphore closed".into()))?;
        let label: String = argv.iter().take(5).cloned().collect::<Vec<_>>().join(" ");
        self.run(&command, &label, &mut |_| {}, Some(input)).await
    }

    /// Runs several commands concurrently over this one connection, at most
    /// [`MAX_CONCURRENT_CHANNELS`] at a time; results come back in input order. Dropping the
    /// returned future cancels the commands that have not finished.
    pub async fn exec_many(&self, cmds: Vec<Vec<String>>) -> Vec<Result<Output>> {
        let mut set = tokio::task::JoinSet::new();
        let count = cmds.len();
        for (i, argv) in cmds.into_iter().enumerate() {
            let session = self.clone();
            set.spawn(async move { (i, session.exec(&argv).await) });
        }
        let mut results: Vec<Option<Result<Output>>> = (0..count).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            if let Ok((i, result)) = joined {
                results[i] = Some(result);
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Internal("exec task panicked".into()))))
            .collect()
    }

    /// The authentication methods the server offered for this user (e.g. `publickey`,
    /// `password`, `keyboard-interactive`), from the initial `none` probe; `None` if the server
    /// accepted `none` outright. The preflight warns when password methods are still offered.
    pub fn server_auth_methods(&self) -> Option<Vec<String>> {
        self.inner.auth_methods.clone()
    }

    /// Whether the connection is gone (the MCP server drops a dead one before reusing it).
    pub fn is_closed(&self) -> bool {
        self.inner.handle.is_closed()
    }

    /// The server's host key as `ssh-ed25519 key SHA256:…`.
    pub fn host_key(&self) -> &str {
        &self.inner.host_key
    }

    /// With [`HostKeyPolicy::AcceptNew`], a note when this connection recorded a new host key
    /// (`"added [host]:port ssh-ed25519 key SHA256:… to PATH"`), for the CLI to show.
    pub fn recorded_host_key(&self) -> Option<&str> {
        self.inner.recorded_host_key.as_deref()
    }

    /// Closes the connection (for every clone of this session).
    pub async fn close(self) {
        let _ = self
            .inner
            .handle
            .disconnect(Disconnect::ByApplication, "", "en")
            .await;
    }

    async fn run(
        &self,
        command: &str,
        argv0: &str,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
        input: Option<&[u8]>,
    ) -> Result<Output> {
        let deadline = self.inner.command_timeout.map(|t| Instant::now() + t);
        let timed_out = || {
            Error::Connection(format!(
                "`{argv0} …` on {} timed out after {}s; the remote command was signalled and \
                 its channel closed",
                self.inner.target,
                self.inner.command_timeout.unwrap_or_default().as_secs_f64()
            ))
        };
        let mut channel = match until(deadline, self.open_channel()).await {
            None => return Err(timed_out()),
            Some(Ok(channel)) => channel,
            Some(Err(russh::Error::ChannelOpenFailure(reason))) => {
                return Err(Error::Connection(format!(
                    "{} refused to open a channel for `{argv0} …` ({reason:?}); nothing was run",
                    self.inner.target
                )));
            }
            Some(Err(e)) => return Err(self.lost(argv0, &e.to_string())),
        };
        if let Err(e) = channel.exec(true, command).await {
            return Err(self.lost(argv0, &e.to_string()));
        }
        let mut out = Output::default();
        let mut status = None;
        let mut signal = None;
        let mut writer =
            input.map(|data| Box::pin(write_then_eof(channel.make_writer(), data.to_vec())));
        loop {
            let next = match writer.as_mut() {
                Some(w) => tokio::select! {
                    _ = w => {
                        writer = None;
                        continue;
                    }
                    m = until(deadline, channel.wait()) => m,
                },
                None => until(deadline, channel.wait()).await,
            };
            let msg = match next {
                None => {
                    abort(&mut channel).await;
                    return Err(timed_out());
                }
                Some(None) => break,
                Some(Some(msg)) => msg,
            };
            match msg {
                ChannelMsg::Data { data } => {
                    on_stdout(&data);
                    out.stdout.extend_from_slice(&data);
                }
                // Extended data type 1 is SSH_EXTENDED_DATA_STDERR (RFC 4254 §5.2).
                ChannelMsg::ExtendedData { data, ext: 1 } => out.stderr.extend_from_slice(&data),
                ChannelMsg::ExitStatus { exit_status } => status = Some(exit_status),
                ChannelMsg::ExitSignal {
                    signal_name,
                    core_dumped,
                    error_message,
                    ..
                } => signal = Some((signal_name, core_dumped, error_message)),
                ChannelMsg::Failure => {
                    let _ = channel.close().await;
                    return Err(Error::Connection(format!(
                        "{} refused to run `{argv0} …` (exec request failed)",
                        self.inner.target
                    )));
                }
                ChannelMsg::Close => break,
                _ => {}
            }
        }
        if let Some(exit_status) = status {
            out.exit_status = exit_status;
            return Ok(out);
        }
        if let Some((sig, core, message)) = signal {
            let stderr = out.stderr_text();
            let stderr = stderr.trim();
            let skip = stderr.chars().count().saturating_sub(400);
            let tail: String = stderr.chars().skip(skip).collect();
            return Err(Error::Remote(format!(
                "`{argv0} …` on {} was killed by signal {}{}{}{}",
                self.inner.target,
                sig_name(&sig),
                if core { " (core dumped)" } else { "" },
                if message.is_empty() {
                    String::new()
                } else {
                    format!(": {message}")
                },
                if tail.is_empty() {
                    String::new()
                } else {
                    format!("; stderr: {tail}")
                },
            )));
        }
        Err(self.lost(argv0, "the channel closed without an exit status"))
    }

    /// Opens a session channel, retrying briefly when sshd refuses it. sshd frees a finished
    /// session only after its own cleanup pass, so right after several commands end it can
    /// still count them against `MaxSessions` and answer "no more sessions" although fewer
    /// than [`MAX_CONCURRENT_CHANNELS`] are running. Retrying an *open* is always safe:
    /// nothing has been executed yet.
    async fn open_channel(&self) -> std::result::Result<russh::Channel<client::Msg>, russh::Error> {
        let mut delay = Duration::from_millis(10);
        let mut attempts = 0;
        loop {
            match self.inner.handle.channel_open_session().await {
                Err(russh::Error::ChannelOpenFailure(_)) if attempts < OPEN_RETRIES => {
                    attempts += 1;
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_millis(500));
                }
                other => return other,
            }
        }
    }

    fn lost(&self, argv0: &str, why: &str) -> Error {
        Error::Connection(format!(
            "lost the connection to {} while running `{argv0} …` ({why}); the command may or \
             may not have completed",
            self.inner.target
        ))
    }
}

fn sig_name(sig: &Sig) -> String {
    match sig {
        Sig::ABRT => "ABRT".into(),
        Sig::ALRM => "ALRM".into(),
        Sig::FPE => "FPE".into(),
        Sig::HUP => "HUP".into(),
        Sig::ILL => "ILL".into(),
        Sig::INT => "INT".into(),
        Sig::KILL => "KILL".into(),
        Sig::PIPE => "PIPE".into(),
        Sig::QUIT => "QUIT".into(),
        Sig::SEGV => "SEGV".into(),
        Sig::TERM => "TERM".into(),
        Sig::USR1 => "USR1".into(),
        Sig::Custom(s) => s.clone(),
    }
}

/// Writes all of `data` to a channel's stdin, then EOF. Errors (the command exited and the
/// channel closed) end the writing quietly: the exit status tells what happened.
async fn write_then_eof(mut w: impl tokio::io::AsyncWrite + Unpin, data: Vec<u8>) {
    use std::pin::Pin;
    let mut off = 0;
    while off < data.len() {
        match std::future::poll_fn(|cx| Pin::new(&mut w).poll_write(cx, &data[off..])).await {
            Ok(0) | Err(_) => return,
            Ok(n) => off += n,
        }
    }
    let _ = std::future::poll_fn(|cx| Pin::new(&mut w).poll_shutdown(cx)).await;
}

/// Runs `f` until `deadline`; `None` if the deadline passed first.
async fn until<F: std::future::Future>(deadline: Option<Instant>, f: F) -> Option<F::Output> {
    match deadline {
        None => Some(f.await),
        Some(d) => tokio::time::timeout_at(d, f).await.ok(),
    }
}

/// Stops a timed-out command. Closing the channel alone does not stop a process that neither
/// reads stdin nor writes (sshd does not signal non-tty sessions on close), so first ask sshd
/// to signal the process group (RFC 4254 §6.9; OpenSSH honours it except for ForceCommand
/// sessions): TERM, a grace period, then KILL; then EOF and close.
async fn abort(channel: &mut russh::Channel<client::Msg>) {
    let _ = channel.signal(Sig::TERM).await;
    let ended = tokio::time::timeout(KILL_GRACE, async {
        while let Some(msg) = channel.wait().await {
            if matches!(
                msg,
                ChannelMsg::ExitStatus { .. } | ChannelMsg::ExitSignal { .. } | ChannelMsg::Close
            ) {
                return;
            }
        }
    })
    .await
    .is_ok();
    if !ended {
        let _ = channel.signal(Sig::KILL).await;
    }
    let _ = channel.eof().await;
    let _ = channel.close().await;
}

// ---------------------------------------------------------------------------------------------
// Keys and authentication

/// A key file, loaded before connecting so permission and path problems fail before any
/// network traffic.
enum KeyFile {
    Ready {
        path: PathBuf,
        key: Arc<PrivateKey>,
    },
    /// Passphrase-protected: usable only through the agent. The public half is readable
    /// without the passphrase (OpenSSH format), which lets us prefer that key in the agent.
    Encrypted {
        path: PathBuf,
        public: Option<PublicKey>,
    },
    /// The file does not exist. Skipped, as OpenSSH skips a missing `IdentityFile` (a
    /// `Host *` block often names keys that only some machines have); the authentication
    /// error names it if nothing else worked.
    Missing {
        path: PathBuf,
    },
}

impl KeyFile {
    fn public(&self) -> Option<PublicKey> {
        match self {
            KeyFile::Ready { key, .. } => Some(key.public_key().clone()),
            KeyFile::Encrypted { public, .. } => public.clone(),
            KeyFile::Missing { .. } => None,
        }
    }
}

fn load_identities(paths: &[PathBuf]) -> Result<Vec<KeyFile>> {
    paths.iter().map(|p| load_identity(p)).collect()
}

fn load_identity(path: &Path) -> Result<KeyFile> {
    let read_err = |source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(KeyFile::Missing {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(read_err(e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    // OpenSSH refuses only files owned by the caller; pxagent refuses any such file, because
    // a key that others can read must be presumed leaked whoever owns it.
    if mode & 0o077 != 0 {
        return Err(Error::Auth(format!(
            "WARNING: UNPROTECTED PRIVATE KEY FILE! Permissions {mode:04o} for '{}' are too \
             open: a private key must not be readable by group or others. Refusing to use it \
             (as OpenSSH does); fix with `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    match russh::keys::decode_secret_key(&text, None) {
        Ok(key) => Ok(KeyFile::Ready {
            path: path.to_path_buf(),
            key: Arc::new(key),
        }),
        Err(russh::keys::Error::KeyIsEncrypted) => Ok(KeyFile::Encrypted {
            path: path.to_path_buf(),
            public: PrivateKey::from_openssh(&text)
                .ok()
                .map(|k| k.public_key().clone())
                .or_else(|| {
                    let mut pubpath = path.as_os_str().to_owned();
                    pubpath.push(".pub");
                    russh::keys::load_public_key(PathBuf::from(pubpath)).ok()
                }),
        }),
        Err(e) => Err(Error::Auth(format!(
            "cannot use private key {}: {e}",
            path.display()
        ))),
    }
}

/// Public-key authentication; returns the methods the server offered in its `none` reply.
async fn authenticate(
    handle: &mut client::Handle<Verifier>,
    target: &Target,
    keys: &[KeyFile],
) -> Result<Option<Vec<String>>> {
    let who = target.display();
    let lost = |e: &dyn std::fmt::Display| {
        Error::Auth(format!(
            "authentication as {who} failed: the server closed the connection ({e}); too many \
             keys tried (sshd MaxAuthTries), or the account is not allowed to log in"
        ))
    };

    // The `none` probe is what every SSH client sends first; its failure lists the methods
    // the server would accept. It never counts against MaxAuthTries.
    let offered = match handle
        .authenticate_none(&target.user)
        .await
        .map_err(|e| lost(&e))?
    {
        client::AuthResult::Success => return Ok(None),
        client::AuthResult::Failure {
            remaining_methods, ..
        } => remaining_methods
            .iter()
            .map(|m| <&str>::from(m).to_string())
            .collect::<Vec<_>>(),
    };
    if !offered.is_empty() && !offered.iter().any(|m| m == "publickey") {
        return Err(Error::Auth(format!(
            "{who}: the server does not offer public-key authentication for this user (it \
             offers: {}); pxagent never uses passwords",
            offered.join(", ")
        )));
    }

    let mut tried: Vec<String> = Vec::new();
    let mut tried_keys: Vec<PublicKey> = Vec::new();
    let mut encrypted: Vec<&Path> = Vec::new();
    let mut missing: Vec<String> = Vec::new();

    for key in keys {
        match key {
            KeyFile::Encrypted { path, .. } => encrypted.push(path),
            KeyFile::Missing { path } => missing.push(path.display().to_string()),
            KeyFile::Ready { path, key } => {
                let hash = rsa_hash(handle, &key.algorithm()).await;
                let with_alg = PrivateKeyWithHashAlg::new(key.clone(), hash);
                let result = handle
                    .authenticate_publickey(&target.user, with_alg)
                    .await
                    .map_err(|e| lost(&e))?;
                if result.success() {
                    return Ok(Some(offered));
                }
                tried.push(format!("{} ({})", path.display(), sha256(key.public_key())));
                tried_keys.push(key.public_key().clone());
            }
        }
    }

    let mut agent_note = None;
    if target.use_agent {
        let socket = target
            .agent_socket
            .clone()
            .or_else(|| std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from));
        match socket {
            None => agent_note = Some("no ssh-agent (SSH_AUTH_SOCK is not set)".to_string()),
            Some(socket) => match agent_login(handle, target, keys, &tried_keys, &socket).await {
                Ok(AgentOutcome::Success) => return Ok(Some(offered)),
                Ok(AgentOutcome::Failed(agent_tried)) => {
                    if agent_tried.is_empty() {
                        agent_note = Some(format!(
                            "ssh-agent at {} offered no usable key",
                            socket.display()
                        ));
                    }
                    tried.extend(agent_tried);
                }
                Err(AgentError::Unreachable(e)) => {
                    agent_note = Some(format!(
                        "ssh-agent at {} is unreachable: {e}",
                        socket.display()
                    ))
                }
                Err(AgentError::Lost(e)) => return Err(lost(&e)),
            },
        }
    }

    let mut msg =
        format!("authentication as {who} failed (public key only; pxagent never uses passwords). ");
    if tried.is_empty() {
        msg.push_str("No key was offered");
    } else {
        msg.push_str(&format!("Keys tried: {}", tried.join(", ")));
    }
    if !missing.is_empty() {
        msg.push_str(&format!(
            "; identity file(s) not found: {}",
            missing.join(", ")
        ));
    }
    if let Some(note) = agent_note {
        msg.push_str(&format!("; {note}"));
    }
    msg.push('.');
    if !encrypted.is_empty() {
        let list: Vec<String> = encrypted.iter().map(|p| p.display().to_string()).collect();
        msg.push_str(&format!(
            " The key {} is passphrase-protected and pxagent does not prompt for passphrases: \
             load it into ssh-agent with `ssh-add {}` (and make sure SSH_AUTH_SOCK is set).",
            list.join(", "),
            list.join(" ")
        ));
    } else if tried.is_empty() {
        msg.push_str(" Give a key with -i/--identity or load one into ssh-agent.");
    } else {
        msg.push_str(&format!(
            " Check that the public key is in ~{}/.ssh/authorized_keys on the host (`pxagent \
             setup render` prints the setup).",
            target.user
        ));
    }
    Err(Error::Auth(msg))
}

/// For RSA keys, the best signature hash the server supports (rsa-sha2-512/256); `None`
/// otherwise or when the server does not say.
async fn rsa_hash(handle: &client::Handle<Verifier>, alg: &Algorithm) -> Option<HashAlg> {
    if !matches!(alg, Algorithm::Rsa { .. }) {
        return None;
    }
    handle
        .best_supported_rsa_hash()
        .await
        .ok()
        .flatten()
        .flatten()
}

enum AgentOutcome {
    Success,
    Failed(Vec<String>),
}

enum AgentError {
    Unreachable(String),
    Lost(String),
}

async fn agent_login(
    handle: &mut client::Handle<Verifier>,
    target: &Target,
    keys: &[KeyFile],
    already_tried: &[PublicKey],
    socket: &Path,
) -> std::result::Result<AgentOutcome, AgentError> {
    let mut agent = AgentClient::connect_uds(socket)
        .await
        .map_err(|e| AgentError::Unreachable(e.to_string()))?;
    let identities = agent
        .request_identities()
        .await
        .map_err(|e| AgentError::Unreachable(e.to_string()))?;
    let file_keys: Vec<PublicKey> = keys.iter().filter_map(KeyFile::public).collect();
    let matches_file = |k: &PublicKey| file_keys.iter().any(|f| f.key_data() == k.key_data());

    // Plain keys only: agent-held certificates would need a CA on the host, which pxagent's
    // setup does not use.
    let mut candidates: Vec<(PublicKey, String)> = identities
        .iter()
        .filter_map(|id| match id {
            russh::keys::agent::AgentIdentity::PublicKey { key, comment } => {
                Some((key.clone(), comment.clone()))
            }
            russh::keys::agent::AgentIdentity::Certificate { .. } => None,
        })
        .filter(|(k, _)| !already_tried.iter().any(|t| t.key_data() == k.key_data()))
        .filter(|(k, _)| !target.identities_only || matches_file(k))
        .collect();
    // Keys that match a named identity file first (OpenSSH orders them the same way).
    candidates.sort_by_key(|(k, _)| !matches_file(k));

    let mut tried = Vec::new();
    for (key, comment) in candidates {
        let hash = rsa_hash(handle, &key.algorithm()).await;
        let result = handle
            .authenticate_publickey_with(&target.user, key.clone(), hash, &mut agent)
            .await;
        match result {
            Ok(r) if r.success() => return Ok(AgentOutcome::Success),
            Ok(_) => {}
            // The agent refused to sign (locked, confirmation denied): try the next key.
            Err(russh::AgentAuthError::Key(_)) => {}
            Err(russh::AgentAuthError::Send(e)) => return Err(AgentError::Lost(e.to_string())),
        }
        let name = if comment.is_empty() {
            "ssh-agent key".to_string()
        } else {
            format!("ssh-agent key '{comment}'")
        };
        tried.push(format!("{name} ({})", sha256(&key)));
    }
    Ok(AgentOutcome::Failed(tried))
}

// ---------------------------------------------------------------------------------------------
// Host key verification

#[derive(Default)]
struct HostKeyOutcome {
    presented: String,
    recorded: Option<String>,
}

/// The russh handler: its one job is the host key check, done during the handshake, so a
/// refusal comes before authentication.
struct Verifier {
    host: String,
    port: u16,
    user: String,
    known_hosts: PathBuf,
    policy: HostKeyPolicy,
    entries: Vec<known_hosts::Entry>,
    outcome: Arc<Mutex<HostKeyOutcome>>,
}

/// Lets a precise [`Error`] escape the handshake instead of russh's generic "unknown key".
#[derive(Debug)]
enum HandlerError {
    Ssh(russh::Error),
    HostKey(Error),
}

impl From<russh::Error> for HandlerError {
    fn from(e: russh::Error) -> Self {
        HandlerError::Ssh(e)
    }
}

impl client::Handler for Verifier {
    type Error = HandlerError;

    async fn check_server_key(
        &mut self,
        server_key: &russh::keys::PublicKeyOrCertificate,
    ) -> std::result::Result<bool, HandlerError> {
        let key = match server_key {
            russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } => key.clone(),
            // pxagent does not advertise certificate host key algorithms, so this does not
            // happen; if it did, refuse rather than trust a CA nobody configured.
            russh::keys::PublicKeyOrCertificate::Certificate(_) => {
                return Err(HandlerError::HostKey(Error::Auth(format!(
                    "{}:{} presented a host certificate; pxagent checks plain host keys only",
                    self.host, self.port
                ))));
            }
        };
        self.outcome
            .lock()
            .expect("host key outcome lock")
            .presented = describe(&key);
        self.verify(&key).map_err(HandlerError::HostKey)
    }
}

impl Verifier {
    fn verify(&mut self, key: &PublicKey) -> Result<bool> {
        let name = known_hosts::host_key_name(&self.host, self.port);
        let kh = self.known_hosts.display();
        match known_hosts::check(&self.entries, &self.host, self.port, key) {
            known_hosts::Verdict::Known => Ok(true),
            known_hosts::Verdict::Unknown => match self.policy {
                HostKeyPolicy::AcceptNew => {
                    let line = known_hosts::append(&self.known_hosts, &self.host, self.port, key)
                        .map_err(|e| {
                        Error::Auth(format!("cannot record the host key of {name} in {kh}: {e}"))
                    })?;
                    self.outcome.lock().expect("host key outcome lock").recorded =
                        Some(format!("added {name} {} to {kh}:{line}", describe(key)));
                    Ok(true)
                }
                HostKeyPolicy::Strict => Err(Error::Auth(format!(
                    "host key verification failed: {name} is not in {kh}. The server presented \
                     {}. Verify this fingerprint out of band (on the host: `ssh-keygen -lf \
                     /etc/ssh/ssh_host_{}_key.pub`), then trust it by running once with \
                     `--accept-new` (e.g. `pxagent --accept-new -H {}@{} preflight`), or record \
                     it with `{} >> {kh}`",
                    describe(key),
                    keyscan_type(key).unwrap_or("ed25519"),
                    self.user,
                    host_arg(&self.host, self.port),
                    keyscan_command(&self.host, self.port, key),
                ))),
            },
            known_hosts::Verdict::Changed { line, stored } => Err(Error::Auth(format!(
                "REMOTE HOST IDENTIFICATION HAS CHANGED for {name}: the server presented {}, but \
                 {kh}:{line} records {}. Someone may be intercepting the connection \
                 (man-in-the-middle), or the host was reinstalled. Refusing to connect (also \
                 with --accept-new). If the change is expected, verify the new fingerprint out \
                 of band, remove the old entry with `ssh-keygen -R '{name}' -f {kh}`, and \
                 connect once with --accept-new",
                describe(key),
                describe(&stored),
            ))),
            known_hosts::Verdict::OtherTypes { stored } => {
                let recorded: Vec<String> = stored
                    .iter()
                    .map(|(line, k)| format!("{} at {kh}:{line}", describe(k)))
                    .collect();
                Err(Error::Auth(format!(
                    "host key verification failed: {name} is recorded only with other key \
                     types ({}), but the server presented {}. Refusing to connect (also with \
                     --accept-new). Verify the new key out of band, then add it with `{} >> {kh}`",
                    recorded.join("; "),
                    describe(key),
                    keyscan_command(&self.host, self.port, key),
                )))
            }
            known_hosts::Verdict::Revoked { line } => Err(Error::Auth(format!(
                "host key verification failed: the server {name} presented {}, which {kh}:{line} \
                 marks @revoked. Refusing to connect",
                describe(key)
            ))),
        }
    }
}

fn keyscan_type(key: &PublicKey) -> Option<&'static str> {
    match key.algorithm() {
        Algorithm::Ed25519 => Some("ed25519"),
        Algorithm::Ecdsa { .. } => Some("ecdsa"),
        Algorithm::Rsa { .. } => Some("rsa"),
        _ => None,
    }
}

fn keyscan_command(host: &str, port: u16, key: &PublicKey) -> String {
    let mut cmd = String::from("ssh-keyscan");
    if port != 22 {
        cmd.push_str(&format!(" -p {port}"));
    }
    if let Some(t) = keyscan_type(key) {
        cmd.push_str(&format!(" -t {t}"));
    }
    cmd.push(' ');
    cmd.push_str(host);
    cmd
}

fn host_arg(host: &str, port: u16) -> String {
    match (host.contains(':'), port) {
        (false, 22) => host.to_string(),
        (false, p) => format!("{host}:{p}"),
        (true, 22) => host.to_string(),
        (true, p) => format!("[{host}]:{p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn session_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<Session>();
    }

    #[test]
    fn nul_and_empty_are_usage_errors() {
        let err = command_line(&args(&["sudo", "a\0b"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("NUL"));
        assert_eq!(command_line(&[]).unwrap_err().exit_code(), 2);
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

    #[test]
    fn keyscan_hint() {
        let key = PublicKey::from_openssh(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ",
        )
        .unwrap();
        assert_eq!(
            keyscan_command("127.0.0.1", 2301, &key),
            "ssh-keyscan -p 2301 -t ed25519 127.0.0.1"
        );
        assert_eq!(
            keyscan_command("pve", 22, &key),
            "ssh-keyscan -t ed25519 pve"
        );
        assert_eq!(host_arg("pve", 22), "pve");
        assert_eq!(host_arg("::1", 2301), "[::1]:2301");
    }

    #[test]
    fn unprotected_key_is_refused_before_parsing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id");
        std::fs::write(&path, "not even a key").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_identity(&path).err().unwrap();
        assert_eq!(err.exit_code(), 6);
        assert!(err.to_string().contains("UNPROTECTED PRIVATE KEY FILE"));
        assert!(err.to_string().contains("0644"));
        assert!(matches!(
            load_identity(&dir.path().join("nope")),
            Ok(KeyFile::Missing { .. })
        ));
    }
}
