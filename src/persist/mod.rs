//! Persistent connections for repeated CLI calls (opt-in, like OpenSSH's
//! `ControlPersist`): `--persist DURATION` or `persist: 60s` in the config starts — or reuses —
//! a background *holder* of the SSH connection, and later pxagent processes send their remote
//! commands through it instead of paying a handshake each. It exits when it has been idle that
//! long; `pxagent persist status|stop` lists and ends holders.
//!
//! Layering: the holder ([`holder`]) is a [`crate::ssh::Session`] (the only russh user) behind a
//! Unix socket; callers reach it through [`client::Holder`], a [`crate::remote::Transport`], so
//! nothing above the transport knows whether a command went over this process's connection or
//! the holder's. The holder only moves bytes: **every decision — policy, confirmation,
//! approval, limits, audit — stays in the calling process**, and the holder keeps nothing but
//! the connection and the opaque memos of the layer above (the guest map).
//!
//! What still has to be checked, because a socket must never become a way around SSH's own
//! checks:
//! - **Where**: `$XDG_RUNTIME_DIR/pxagent/` (else `/tmp/pxagent-$UID/`), a directory that must
//!   be ours, not a symlink, and 0700 (created so); the socket in it must be ours and 0600. A
//!   socket or directory owned by another user, or open to others, is refused (exit 6), never
//!   used or replaced.
//! - **Who is at the other end**: both sides check the peer's uid (`SO_PEERCRED`): a caller
//!   talks only to a holder of its own account, and a holder serves only its own account.
//! - **Which connection**: the socket's name is keyed by account, host, port, known_hosts file
//!   and the fingerprints of the keys the caller would offer (another `-i`, another socket),
//!   and on every use the caller checks what the holder reports: the same account, host and
//!   port; the host key against **the caller's own known_hosts and host key policy** (as its
//!   own handshake would: a key removed from known_hosts since the holder connected is refused
//!   now); and that the key the holder logged in with is one the caller could use itself (its
//!   key files, or its ssh-agent's keys). A holder of another pxagent version is stopped and
//!   replaced.
//! - The holder runs only `exec` requests (no shell, no forwarding), each with the caller's
//!   `--timeout`; a caller that goes away mid-command closes that command's channel, as a
//!   dropped connection of its own would. It never logs in as root.
//!
//! Start-up: the first caller takes a lock file beside the socket, finds no holder answering,
//! and starts `pxagent persist serve` in its own session (`setsid`), handing it the target on
//! stdin; the holder connects (so host key and authentication errors reach that caller), binds
//! the socket and says so on stdout. Concurrent first callers wait on the lock and then use the
//! one holder.
//!
//! Layer: persist. May import: `base`, `catalog`, `output`, `remote`, `ssh`.

pub mod client;
pub mod holder;
pub mod wire;

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::remote::Remote;
use crate::ssh::{HostKeyPolicy, Session, Target};

/// The longest `--persist`: a holder of a connection lasts at most a day after its last call.
pub const MAX_PERSIST: Duration = Duration::from_secs(24 * 3600);

/// Parse `--persist` / `persist:`: a duration such as `30s`, `10m`, `1h` (or whole seconds),
/// more than zero and at most [`MAX_PERSIST`].
pub fn parse_persist(text: &str) -> Result<Duration> {
    crate::base::time::parse_duration(text)
        .filter(|d| *d <= MAX_PERSIST)
        .ok_or_else(|| {
            Error::usage(format!(
                "invalid persist duration '{}': expected e.g. 30s, 10m or 1h (at most 24h)",
                crate::base::text::printable(text)
            ))
        })
}

/// A connected host for `target`: through a persistent connection kept `persist` after the
/// last call, or (`None`) a connection of this process.
pub async fn connect(target: &Target, persist: Option<Duration>) -> Result<Remote> {
    let Some(idle) = persist else {
        let session = Session::connect(target).await?;
        if let Some(note) = session.recorded_host_key() {
            crate::output::note(note);
        }
        return Ok(Remote::new(
            session,
            target.display(),
            target.command_timeout,
        ));
    };
    let socket = socket_path(target)?;
    let holder = match client::Holder::open(&socket, target).await? {
        Some(h) => h,
        None => start(target, &socket, idle).await?,
    };
    Ok(Remote::new(
        holder,
        target.display(),
        target.command_timeout,
    ))
}

/// This account's uid.
pub fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The directory of this account's sockets, created (0700) when missing and checked: ours,
/// a real directory, closed to everyone else.
pub fn dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
    {
        Some(base) => base.join("pxagent"),
        None => PathBuf::from(format!("/tmp/pxagent-{}", uid())),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Error::Connection(format!(
                "cannot create {} for the persistent connection: {e}",
                dir.display()
            )));
        }
    }
    check_owned(&dir, true)?;
    Ok(dir)
}

/// Refuse a path (the socket directory, a socket) that is not ours alone: another owner, a
/// symlink, or permissions for group or others.
pub fn check_owned(path: &Path, is_dir: bool) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::Connection(format!("cannot inspect {}: {e}", path.display())))?;
    let kind_ok = if is_dir {
        meta.file_type().is_dir()
    } else {
        meta.file_type().is_socket()
    };
    let mode = meta.permissions().mode() & 0o777;
    let why = if !kind_ok {
        Some(format!(
            "is not a {}",
            if is_dir { "directory" } else { "socket" }
        ))
    } else if meta.uid() != uid() {
        Some(format!(
            "is owned by uid {}, not by this account ({})",
            meta.uid(),
            uid()
        ))
    } else if mode & 0o077 != 0 {
        Some(format!("has mode {mode:04o}: others could use it"))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::Auth(format!(
            "refusing the persistent connection's {} {}: it {why}; remove it if you did not make it, and look at who did",
            if is_dir { "directory" } else { "socket" },
            path.display()
        ))),
    }
}

/// The socket of `target`'s holder: named by a hash of the account, host, port, known_hosts
/// file and the keys this caller would offer.
pub fn socket_path(target: &Target) -> Result<PathBuf> {
    Ok(dir()?.join(socket_name(target)?))
}

/// The file name of `target`'s socket (see [`socket_path`]).
fn socket_name(target: &Target) -> Result<String> {
    use sha2::Digest;
    let keys = crate::ssh::identity_fingerprints(target)?;
    let agent = if target.use_agent {
        agent_socket(target).map(|p| p.display().to_string())
    } else {
        None
    };
    // The jump hosts too: another way there is another connection.
    let jumps: Vec<serde_json::Value> = target
        .jumps
        .iter()
        .map(|j| serde_json::json!([j.user, j.host, j.port, j.known_hosts]))
        .collect();
    let id = serde_json::json!([
        target.user,
        target.host,
        target.port,
        target.known_hosts,
        keys,
        agent,
        target.identities_only,
        jumps
    ]);
    let digest = sha2::Sha256::digest(id.to_string().as_bytes());
    let name: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{name}.sock"))
}

fn agent_socket(target: &Target) -> Option<PathBuf> {
    target
        .agent_socket
        .clone()
        .or_else(|| std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from))
}

/// One SSH hop as a new holder gets it: the target, or a jump host on the way.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hop {
    host: String,
    port: u16,
    user: String,
    identities: Vec<PathBuf>,
    identities_only: bool,
    use_agent: bool,
    agent_socket: Option<PathBuf>,
    known_hosts: PathBuf,
    accept_new: bool,
    connect_timeout_ms: u64,
    keepalive_ms: u64,
}

impl Hop {
    fn new(t: &Target) -> Hop {
        Hop {
            host: t.host.clone(),
            port: t.port,
            user: t.user.clone(),
            identities: t.identities.clone(),
            identities_only: t.identities_only,
            use_agent: t.use_agent,
            agent_socket: agent_socket(t),
            known_hosts: t.known_hosts.clone(),
            accept_new: t.host_key_policy == HostKeyPolicy::AcceptNew,
            connect_timeout_ms: t.connect_timeout.as_millis() as u64,
            keepalive_ms: t.keepalive.as_millis() as u64,
        }
    }

    fn target(&self) -> Target {
        let mut t = Target::new(self.host.clone(), self.port, self.user.clone());
        t.identities = self.identities.clone();
        t.identities_only = self.identities_only;
        t.use_agent = self.use_agent;
        t.agent_socket = self.agent_socket.clone();
        t.known_hosts = self.known_hosts.clone();
        t.host_key_policy = if self.accept_new {
            HostKeyPolicy::AcceptNew
        } else {
            HostKeyPolicy::Strict
        };
        t.connect_timeout = Duration::from_millis(self.connect_timeout_ms);
        t.keepalive = Duration::from_millis(self.keepalive_ms);
        t.command_timeout = None;
        t
    }
}

/// What a caller hands a new holder (on its stdin): the target, its jump hosts, the idle
/// time and the socket.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    target: Hop,
    jumps: Vec<Hop>,
    idle_secs: u64,
    socket: PathBuf,
}

impl Spec {
    fn new(target: &Target, socket: &Path, idle: Duration) -> Spec {
        Spec {
            target: Hop::new(target),
            jumps: target.jumps.iter().map(Hop::new).collect(),
            idle_secs: idle.as_secs().max(1),
            socket: socket.to_path_buf(),
        }
    }

    /// The target the holder connects to, through its jump hosts: no command timeout of its
    /// own (each request carries its caller's).
    fn target(&self) -> Target {
        let mut t = self.target.target();
        t.jumps = self.jumps.iter().map(Hop::target).collect();
        t
    }
}

/// What a new holder says on its stdout once it is listening (or why it is not).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ready {
    ok: bool,
    code: u8,
    message: String,
}

/// Start a holder for `target` (or use the one another caller started meanwhile).
async fn start(target: &Target, socket: &Path, idle: Duration) -> Result<client::Holder> {
    let lock_path = socket.with_extension("lock");
    let spec = Spec::new(target, socket, idle);
    let wait = target.connect_timeout * 2 + Duration::from_secs(5);
    let socket_owned = socket.to_path_buf();
    // Blocking work (the lock, the child's answer) on a thread of its own.
    let started = tokio::task::spawn_blocking(move || -> Result<std::fs::File> {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| Error::Connection(format!("cannot open {}: {e}", lock_path.display())))?;
        lock.lock()
            .map_err(|e| Error::Connection(format!("cannot lock {}: {e}", lock_path.display())))?;
        Ok(lock)
    })
    .await
    .map_err(|e| Error::Internal(format!("the persistent connection's lock: {e}")))??;
    let _lock = started;
    // Someone else may have started it while we waited for the lock.
    if let Some(h) = client::Holder::open(&socket_owned, target).await? {
        return Ok(h);
    }
    if std::fs::symlink_metadata(&socket_owned).is_ok() {
        // A holder that died: its socket is ours (checked) and nobody answers on it.
        check_owned(&socket_owned, false)?;
        let _ = std::fs::remove_file(&socket_owned);
    }
    let ready = tokio::task::spawn_blocking(move || spawn_holder(&spec, wait))
        .await
        .map_err(|e| Error::Internal(format!("starting the persistent connection: {e}")))??;
    if !ready.ok {
        return Err(Error::from_exit_code(ready.code, ready.message));
    }
    if !ready.message.is_empty() {
        crate::output::note(&ready.message);
    }
    client::Holder::open(&socket_owned, target)
        .await?
        .ok_or_else(|| {
            Error::Connection(format!(
                "the persistent connection's holder started but does not answer on {}",
                socket_owned.display()
            ))
        })
}

/// Start `pxagent persist serve`, hand it `spec`, and wait (at most `wait`) for its first line.
fn spawn_holder(spec: &Spec, wait: Duration) -> Result<Ready> {
    use std::io::{BufRead, Write};
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe()
        .map_err(|e| Error::Internal(format!("cannot find my own binary: {e}")))?;
    let mut child = Command::new(exe)
        .args(["persist", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::Internal(format!("cannot start the persistent connection: {e}")))?;
    let spec_json = serde_json::to_vec(spec).map_err(|e| Error::Internal(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&spec_json);
    }
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| Error::Internal("the holder has no stdout".into()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(wait).map_err(|_| {
        let _ = child.kill();
        Error::Connection(format!(
            "the persistent connection did not come up within {}s",
            wait.as_secs()
        ))
    })?;
    serde_json::from_str(line.trim()).map_err(|_| {
        let status = child.try_wait().ok().flatten();
        Error::Internal(format!(
            "the persistent connection's holder ended without answering ({})",
            status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "still running".into())
        ))
    })
}

/// `pxagent persist serve`: be the holder whose [`Spec`] arrives on stdin.
pub fn serve() -> Result<u8> {
    holder::serve()
}

/// Every socket in this account's directory, for `persist status|stop`.
pub fn sockets() -> Result<Vec<PathBuf>> {
    let dir = dir()?;
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| Error::Connection(format!("cannot list {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    v.sort();
    Ok(v)
}

#[cfg(test)]
mod tests;
