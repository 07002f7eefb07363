//! One authenticated connection and its channels: connect (host key check, then key-only
//! authentication), run argv vectors on their own channels (at most
//! [`MAX_CONCURRENT_CHANNELS`] at once), command timeouts that signal the remote process,
//! keepalives, close.
//!
//! Every argument is POSIX-quoted ([`command_line`]): SSH `exec` carries one string that the
//! remote login shell splits again. No exit status means the connection was lost, never
//! success. Each command is logged at DEBUG (`pxagent::ssh`) with the line as sent, its exit
//! status and its duration; stdin is logged as a byte count only. Uses [`super::auth`],
//! [`super::hostkey`] and [`super::known_hosts`], nothing above the transport.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::client;
use russh::keys::Algorithm;
use russh::{ChannelMsg, Disconnect, Preferred, Sig};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::auth::{authenticate, load_identities};
use super::hostkey::{HandlerError, HostKeyOutcome, Verifier};
use super::{Output, Target, command_line, known_hosts};
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
    /// The fingerprint of the key that logged in.
    auth_key: Option<String>,
    host_key: String,
    /// The host key in OpenSSH form.
    host_key_line: String,
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
        let started = Instant::now();
        tracing::debug!(
            target: "pxagent::ssh",
            host = %target.host,
            port = target.port,
            user = %target.user,
            "connecting"
        );

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
        let verifier = Verifier::new(target, entries, outcome.clone());

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
        let logged_in = match auth {
            Ok(l) => l,
            Err(e) => {
                let _ = handle.disconnect(Disconnect::ByApplication, "", "en").await;
                return Err(e);
            }
        };
        let outcome = std::mem::take(&mut *outcome.lock().expect("host key outcome lock"));
        tracing::debug!(
            target: "pxagent::ssh",
            target_host = %who,
            duration_ms = started.elapsed().as_millis() as u64,
            "connected"
        );
        Ok(Session {
            inner: Arc::new(Inner {
                handle,
                slots: Semaphore::new(MAX_CONCURRENT_CHANNELS),
                target: who,
                command_timeout: target.command_timeout,
                auth_methods: logged_in.offered,
                auth_key: logged_in.key,
                host_key: outcome.presented,
                host_key_line: outcome.key_line,
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
        self.exec_streaming_within(argv, on_stdout, self.inner.command_timeout)
            .await
    }

    /// [`Session::exec_streaming`] with this command timeout instead of the connection's
    /// (a persistent connection runs each caller's command with that caller's `--timeout`).
    pub async fn exec_streaming_within(
        &self,
        argv: &[String],
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
        timeout: Option<Duration>,
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
        self.run(&command, &label, on_stdout, None, timeout).await
    }

    /// Like [`Session::exec`], and writes `input` to the command's stdin, then EOF. The
    /// input is written while the output is read, so a command that echoes (`tee`) cannot
    /// stall on a full window. A command that exits without reading all of it is not an
    /// error here: its exit status tells.
    pub async fn exec_with_stdin(&self, argv: &[String], input: &[u8]) -> Result<Output> {
        self.exec_with_stdin_within(argv, input, self.inner.command_timeout)
            .await
    }

    /// [`Session::exec_with_stdin`] with this command timeout instead of the connection's.
    pub async fn exec_with_stdin_within(
        &self,
        argv: &[String],
        input: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Output> {
        let command = command_line(argv)?;
        let _slot = self
            .inner
            .slots
            .acquire()
            .await
            .map_err(|_| Error::Internal("channel semaphore closed".into()))?;
        let label: String = argv.iter().take(5).cloned().collect::<Vec<_>>().join(" ");
        self.run(&command, &label, &mut |_| {}, Some(input), timeout)
            .await
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

    /// The server's host key in OpenSSH form (`ssh-ed25519 AAAA…`), for
    /// [`super::check_host_key_line`] in another process.
    pub fn host_key_line(&self) -> &str {
        &self.inner.host_key_line
    }

    /// The SHA256 fingerprint of the key that logged in (`None`: the server let the account
    /// in without a key).
    pub fn auth_key(&self) -> Option<&str> {
        self.inner.auth_key.as_deref()
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

    /// Runs `command` and logs it at DEBUG: the line as sent, the exit status (or the
    /// error) and the duration. Of stdin only the byte count is logged: it may be a pushed
    /// file or `--stdin` data.
    async fn run(
        &self,
        command: &str,
        argv0: &str,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
        input: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<Output> {
        let started = Instant::now();
        let result = self
            .run_channel(command, argv0, on_stdout, input, timeout)
            .await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let stdin_bytes = input.map(<[u8]>::len);
        match &result {
            Ok(out) => tracing::debug!(
                target: "pxagent::ssh",
                command,
                exit_status = out.exit_status,
                duration_ms,
                stdin_bytes,
                "remote command"
            ),
            Err(e) => tracing::debug!(
                target: "pxagent::ssh",
                command,
                error = %e,
                duration_ms,
                stdin_bytes,
                "remote command failed"
            ),
        }
        result
    }

    async fn run_channel(
        &self,
        command: &str,
        argv0: &str,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
        input: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<Output> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let timed_out = || {
            Error::Connection(format!(
                "`{argv0} …` on {} timed out after {}s; the remote command was signalled and \
                 its channel closed",
                self.inner.target,
                timeout.unwrap_or_default().as_secs_f64()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<Session>();
    }
}
