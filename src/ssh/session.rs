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

use super::auth::{KeyFile, authenticate, load_identities};
use super::hostkey::{Ended, HandlerError, HostKeyOutcome, Verifier};
use super::{Bounded, Captured, Target, command_line, known_hosts};
use crate::base::error::{Error, Result};

/// At most this many channels run at once on one connection. OpenSSH's sshd allows
/// `MaxSessions 10` by default; staying at 8 leaves room for the host's own tools (and a
/// second pxagent) without hitting "open failed: administratively prohibited".
pub const MAX_CONCURRENT_CHANNELS: usize = 8;

/// How long a timed-out command gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long the end of a command sent SIGKILL is waited for.
const KILL_SEEN: Duration = Duration::from_millis(500);

/// How long closing a connection waits for the commands being stopped on it: the grace, and
/// a moment for the close to reach sshd.
pub const SETTLE_WITHIN: Duration = Duration::from_secs(4);

/// How often a refused channel open is retried (about 5 s in total, see `open_channel`).
const OPEN_RETRIES: u32 = 14;

/// Keepalives sent without a word back after which the next silent interval ends the
/// connection: with russh's counting, the link is declared lost `(KEEPALIVE_MAX + 1) ×
/// interval` after the host last said anything (45 s with the default 15 s).
const KEEPALIVE_MAX: usize = 2;

/// One authenticated connection. Cheap to clone (all clones share the connection); `Send +
/// Sync`, so the MCP server and `status` can run commands from several tasks at once.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    handle: client::Handle<Verifier>,
    /// The jump hosts' connections, first hop first: they carry `handle`'s bytes, so they
    /// live as long as it does.
    jumps: Vec<client::Handle<Verifier>>,
    /// Caps concurrent channels at [`MAX_CONCURRENT_CHANNELS`].
    slots: Semaphore,
    target: String,
    command_timeout: Option<Duration>,
    /// The keepalive interval, for the message when the link went silent.
    keepalive: Duration,
    /// Why the connection ended, when russh told the handler (set once it is gone).
    ended: Arc<Mutex<Option<Ended>>>,
    auth_methods: Option<Vec<String>>,
    /// The fingerprint of the key that logged in.
    auth_key: Option<String>,
    host_key: String,
    /// The host key in OpenSSH form.
    host_key_line: String,
    recorded_host_key: Option<String>,
    /// The local and the host's socket address of a direct connection ([`Session::addresses`]).
    addresses: Option<(std::net::SocketAddr, std::net::SocketAddr)>,
    /// Commands whose caller went away before they ended and that are being stopped now
    /// ([`Live`]); [`Session::settled`] waits for none to be left.
    aborting: tokio::sync::watch::Sender<usize>,
    /// A command stopped that way gave no sign of its end (no exit status after SIGTERM
    /// and SIGKILL: sshd does not signal a forced command such as the gate), so only its
    /// channel's close is known.
    end_unseen: std::sync::atomic::AtomicBool,
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
        let who = target.display();
        let started = Instant::now();
        // Every key file and known_hosts file is read before anything is connected: a key
        // readable by others, or a file that cannot be read, is refused with nothing sent.
        let mut files = Vec::new();
        for hop in target.jumps.iter().chain([target]) {
            files.push(Files::read(hop)?);
        }
        let mut files = files.into_iter();
        // Each jump host is reached through the one before it; the target through the last.
        let mut jumps: Vec<client::Handle<Verifier>> = Vec::new();
        for hop in &target.jumps {
            let hop_name = format!("jump host {}", hop.display());
            let hop_files = files.next().expect("files for every hop");
            let hop_connected = match jumps.last() {
                None => connect_hop(hop, tcp(hop).await, hop_files, &hop_name).await,
                Some(via) => {
                    let stream = tunnel(via, hop, &jumps_name(&jumps, target)).await;
                    connect_hop(hop, stream, hop_files, &hop_name).await
                }
            };
            jumps.push(hop_connected.map_err(|e| in_jump(e, hop))?.handle);
        }
        let target_files = files.next().expect("files for the target");
        let mut addresses = None;
        let connected = match jumps.last() {
            None => {
                let stream = tcp(target).await;
                if let Ok(s) = &stream {
                    addresses = s.local_addr().ok().zip(s.peer_addr().ok());
                }
                connect_hop(target, stream, target_files, &who).await?
            }
            Some(via) => {
                let stream = tunnel(via, target, &jumps_name(&jumps, target)).await;
                connect_hop(target, stream, target_files, &who).await?
            }
        };
        tracing::debug!(
            target: "pxagent::ssh",
            target_host = %who,
            jumps = target.jumps.len(),
            duration_ms = started.elapsed().as_millis() as u64,
            "connected"
        );
        Ok(Session {
            inner: Arc::new(Inner {
                handle: connected.handle,
                jumps,
                slots: Semaphore::new(MAX_CONCURRENT_CHANNELS),
                target: who,
                command_timeout: target.command_timeout,
                keepalive: target.keepalive,
                ended: connected.ended,
                auth_methods: connected.auth_methods,
                auth_key: connected.auth_key,
                host_key: connected.outcome.presented,
                host_key_line: connected.outcome.key_line,
                recorded_host_key: connected.outcome.recorded,
                aborting: tokio::sync::watch::Sender::new(0),
                end_unseen: std::sync::atomic::AtomicBool::new(false),
                addresses,
            }),
        })
    }

    /// The connection's own address and the host's, when pxagent reached the host directly
    /// (not through a jump host): what the host sees, unless something between translates
    /// addresses.
    pub fn addresses(&self) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
        self.inner.addresses
    }

    /// Runs one command on its own channel. `argv[0]` is the first word (for pxagent:
    /// `["sudo", "-n", "/usr/bin/pvesh", "get", …]`); see [`command_line`] for the quoting.
    ///
    /// A non-zero exit status is *not* an error here: it is returned in [`Captured`] for the
    /// caller to classify (sudo refusal, PVE error…). Errors: [`Error::Usage`] for NUL bytes;
    /// [`Error::Connection`] when the command timed out (the remote process is sent SIGTERM,
    /// then SIGKILL, and the channel is closed) or the connection was lost before an exit
    /// status arrived; [`Error::Remote`] when the command was killed by a signal.
    ///
    /// The command timeout counts from the moment the command gets one of the
    /// [`MAX_CONCURRENT_CHANNELS`] slots, so waiting behind other commands does not eat it.
    pub async fn exec(&self, argv: &[String]) -> Result<Captured> {
        self.exec_streaming(argv, &mut |_| {}).await
    }

    /// Like [`Session::exec`], and hands every chunk of stdout to `on_stdout` as it arrives
    /// (a Proxmox task prints its log while it runs). The returned [`Captured`] still holds
    /// everything.
    pub async fn exec_streaming(
        &self,
        argv: &[String],
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Captured> {
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
    ) -> Result<Captured> {
        self.run_one(argv, on_stdout, None, None, timeout)
            .await
            .map(|b| b.output)
    }

    /// Like [`Session::exec`] (with `input` on stdin when given), keeping at most `max` bytes
    /// of each of stdout and stderr: the rest is read and dropped, and [`Bounded`] says so.
    /// For commands whose output pxagent does not control (a command in a container).
    pub async fn exec_bounded(
        &self,
        argv: &[String],
        input: Option<&[u8]>,
        max: usize,
    ) -> Result<Bounded> {
        self.run_one(
            argv,
            &mut |_| {},
            input.map(Input::Bytes),
            Some(max),
            self.inner.command_timeout,
        )
        .await
    }

    /// Like [`Session::exec`], and writes `input` to the command's stdin, then EOF. The
    /// input is written while the output is read, so a command that echoes (`tee`) cannot
    /// stall on a full window. A command that exits without reading all of it is not an
    /// error here: its exit status tells.
    pub async fn exec_with_stdin(&self, argv: &[String], input: &[u8]) -> Result<Captured> {
        self.exec_with_stdin_within(argv, input, self.inner.command_timeout)
            .await
    }

    /// [`Session::exec_with_stdin`] with this command timeout instead of the connection's.
    pub async fn exec_with_stdin_within(
        &self,
        argv: &[String],
        input: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Captured> {
        self.run_one(argv, &mut |_| {}, Some(Input::Bytes(input)), None, timeout)
            .await
            .map(|b| b.output)
    }

    /// Like [`Session::exec_bounded`], with stdin streamed from `from` a chunk at a time (a
    /// large local file: at most one chunk is in memory), `sent` told each chunk's size as it
    /// goes, and this command timeout. A read error of `from` closes the channel without EOF
    /// and is the error; a command that stops reading ends the stream, and its exit status
    /// tells.
    pub async fn exec_from_reader(
        &self,
        argv: &[String],
        from: &mut (dyn std::io::Read + Send),
        sent: &mut (dyn FnMut(u64) + Send),
        max: usize,
        timeout: Option<Duration>,
    ) -> Result<Bounded> {
        self.run_one(
            argv,
            &mut |_| {},
            Some(Input::Stream { from, sent }),
            Some(max),
            timeout,
        )
        .await
    }

    /// One command on its own channel, once a channel slot is free: the line checked and
    /// quoted, named in messages by its first words (`sudo -n /usr/bin/pvesh get …`).
    async fn run_one(
        &self,
        argv: &[String],
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
        input: Option<Input<'_>>,
        max: Option<usize>,
        timeout: Option<Duration>,
    ) -> Result<Bounded> {
        let command = command_line(argv)?;
        let _slot = self
            .inner
            .slots
            .acquire()
            .await
            .map_err(|_| Error::Internal("channel semaphore closed".into()))?;
        let label: String = argv.iter().take(5).cloned().collect::<Vec<_>>().join(" ");
        self.run(&command, &label, on_stdout, input, max, timeout)
            .await
    }

    /// Runs several commands concurrently over this one connection, at most
    /// [`MAX_CONCURRENT_CHANNELS`] at a time; results come back in input order. Dropping the
    /// returned future cancels the commands that have not finished.
    pub async fn exec_many(&self, cmds: Vec<Vec<String>>) -> Vec<Result<Captured>> {
        let mut set = tokio::task::JoinSet::new();
        let count = cmds.len();
        for (i, argv) in cmds.into_iter().enumerate() {
            let session = self.clone();
            set.spawn(async move { (i, session.exec(&argv).await) });
        }
        let mut results: Vec<Option<Result<Captured>>> = (0..count).map(|_| None).collect();
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
        self.inner.handle.is_closed() || self.inner.jumps.iter().any(|j| j.is_closed())
    }

    /// `user@host:port` of this connection.
    pub fn target(&self) -> &str {
        &self.inner.target
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

    /// Waits until every command dropped before its end on this connection (a cancelled call,
    /// an interrupted one: see [`Live`]) has been stopped, at most `within`.
    pub async fn settled(&self, within: Duration) -> Settled {
        let mut rx = self.inner.aborting.subscribe();
        let done = tokio::time::timeout(within, rx.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok());
        match done {
            false => Settled::Pending,
            true if self
                .inner
                .end_unseen
                .load(std::sync::atomic::Ordering::SeqCst) =>
            {
                Settled::Closed
            }
            true => Settled::Exited,
        }
    }

    /// Closes the connection (for every clone of this session), once the commands being
    /// stopped were (at most [`SETTLE_WITHIN`]): closing first would leave a command that
    /// ignores a closed channel running.
    pub async fn close(self) {
        let _ = self.settled(SETTLE_WITHIN).await;
        let _ = self
            .inner
            .handle
            .disconnect(Disconnect::ByApplication, "", "en")
            .await;
        for jump in self.inner.jumps.iter().rev() {
            let _ = jump.disconnect(Disconnect::ByApplication, "", "en").await;
        }
    }

    /// Runs `command` and logs it at DEBUG: the line as sent, the exit status (or the
    /// error) and the duration. Of stdin only the byte count is logged: it may be a pushed
    /// file or `--stdin` data.
    async fn run(
        &self,
        command: &str,
        argv0: &str,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
        input: Option<Input<'_>>,
        max: Option<usize>,
        timeout: Option<Duration>,
    ) -> Result<Bounded> {
        let started = Instant::now();
        let stdin_bytes = match &input {
            Some(Input::Bytes(b)) => Some(b.len()),
            _ => None,
        };
        let result = self
            .run_channel(command, argv0, on_stdout, input, max, timeout)
            .await;
        let duration_ms = started.elapsed().as_millis() as u64;
        match &result {
            Ok(out) => tracing::debug!(
                target: "pxagent::ssh",
                command,
                exit_status = out.output.exit_status,
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
        input: Option<Input<'_>>,
        max: Option<usize>,
        timeout: Option<Duration>,
    ) -> Result<Bounded> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let timed_out = || {
            Error::Connection(format!(
                "`{argv0} …` on {} timed out after {}s; the remote command was signalled and \
                 its channel closed",
                self.inner.target,
                timeout.unwrap_or_default().as_secs_f64()
            ))
        };
        let channel = match until(deadline, self.open_channel()).await {
            None => {
                return Err(Error::Connection(format!(
                    "`{argv0} …` on {} timed out after {}s before its channel opened; {}",
                    self.inner.target,
                    timeout.unwrap_or_default().as_secs_f64(),
                    super::NOTHING_RAN
                )));
            }
            Some(Ok(channel)) => channel,
            Some(Err(russh::Error::ChannelOpenFailure(reason))) => {
                return Err(Error::Connection(format!(
                    "{} refused to open a channel for `{argv0} …` ({reason:?}); {}",
                    self.inner.target,
                    super::NOTHING_RAN
                )));
            }
            Some(Err(e)) => {
                return Err(Error::Connection(format!(
                    "lost the connection to {} before `{argv0} …` could start ({e}); {}",
                    self.inner.target,
                    super::NOTHING_RAN
                )));
            }
        };
        if let Err(e) = channel.exec(true, command).await {
            return Err(self.lost(argv0, &e.to_string()));
        }
        // From here on the command runs: dropped before it ended, the guard stops it.
        let mut live = Live {
            channel: Some(channel),
            inner: self.inner.clone(),
        };
        let channel = live.channel.as_mut().expect("just set");
        let r = self
            .converse(channel, argv0, on_stdout, input, max, deadline, timed_out)
            .await;
        live.channel = None;
        r
    }

    /// The rest of [`Session::run_channel`]: feed stdin, collect the output and the exit.
    #[allow(clippy::too_many_arguments)]
    async fn converse(
        &self,
        channel: &mut russh::Channel<client::Msg>,
        argv0: &str,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
        input: Option<Input<'_>>,
        max: Option<usize>,
        deadline: Option<Instant>,
        timed_out: impl Fn() -> Error,
    ) -> Result<Bounded> {
        // Append a chunk to a stream, keeping at most `max` bytes of it.
        let keep = |buf: &mut Vec<u8>, data: &[u8], cut: &mut bool| {
            let room = max.map_or(data.len(), |m| m.saturating_sub(buf.len()));
            if room < data.len() {
                *cut = true;
            }
            buf.extend_from_slice(&data[..room.min(data.len())]);
        };
        let (mut out_cut, mut err_cut) = (false, false);
        let mut out = Captured::default();
        let mut status = None;
        let mut signal = None;
        let mut writer: Option<Writing<'_>> = input.map(|i| match i {
            Input::Bytes(data) => {
                Box::pin(write_then_eof(channel.make_writer(), data.to_vec())) as Writing<'_>
            }
            Input::Stream { from, sent } => {
                Box::pin(stream_then_eof(channel.make_writer(), from, sent)) as Writing<'_>
            }
        });
        loop {
            let next = match writer.as_mut() {
                Some(w) => tokio::select! {
                    r = w => {
                        writer = None;
                        if let Err(source) = r {
                            // The local source failed: the command must not take what came
                            // so far for the whole, so it gets no EOF; its channel is closed.
                            abort(channel).await;
                            return Err(Error::ReadFile { path: "the command's input".into(), source });
                        }
                        continue;
                    }
                    m = until(deadline, channel.wait()) => m,
                },
                None => until(deadline, channel.wait()).await,
            };
            let msg = match next {
                None => {
                    abort(channel).await;
                    return Err(timed_out());
                }
                Some(None) => break,
                Some(Some(msg)) => msg,
            };
            match msg {
                ChannelMsg::Data { data } => {
                    on_stdout(&data);
                    keep(&mut out.stdout, &data, &mut out_cut);
                }
                // Extended data type 1 is SSH_EXTENDED_DATA_STDERR (RFC 4254 §5.2).
                ChannelMsg::ExtendedData { data, ext: 1 } => {
                    keep(&mut out.stderr, &data, &mut err_cut)
                }
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
            return Ok(Bounded {
                output: out,
                stdout_truncated: out_cut,
                stderr_truncated: err_cut,
            });
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
        // Why the connection itself ended beats what the channel saw ("closed without an exit
        // status"): a silent link is named with its real times.
        let ended = self.inner.ended.lock().expect("ended lock").clone();
        let why = match ended {
            Some(Ended::Keepalive) => format!(
                "no answer from the host for {}s: {} keepalives sent {}s apart went unanswered",
                self.inner.keepalive.as_secs() * (KEEPALIVE_MAX as u64 + 1),
                KEEPALIVE_MAX,
                self.inner.keepalive.as_secs()
            ),
            Some(Ended::Other(reason)) => reason,
            None => why.to_string(),
        };
        Error::Connection(format!(
            "lost the connection to {} while running `{argv0} …` ({why}); the command may or \
             may not have completed",
            self.inner.target
        ))
    }
}

/// What one hop needs from local files: its keys and its known_hosts entries.
struct Files {
    keys: Vec<KeyFile>,
    entries: Vec<known_hosts::Entry>,
}

impl Files {
    fn read(t: &Target) -> Result<Files> {
        let keys = load_identities(&t.identities)?;
        let entries = known_hosts::read(&t.known_hosts).map_err(|source| Error::ReadFile {
            path: t.known_hosts.clone(),
            source,
        })?;
        Ok(Files { keys, entries })
    }
}

/// One authenticated hop: the target itself, or a jump host on the way to it.
struct Connected {
    handle: client::Handle<Verifier>,
    outcome: HostKeyOutcome,
    auth_methods: Option<Vec<String>>,
    /// The fingerprint of the key that logged in.
    auth_key: Option<String>,
    ended: Arc<Mutex<Option<Ended>>>,
}

/// Opens a TCP connection to `t` (bounded by its connect timeout).
async fn tcp(t: &Target) -> Result<tokio::net::TcpStream> {
    let connecting = async {
        let stream = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
            .await
            .map_err(|e| {
                Error::Connection(format!("cannot connect to {}:{}: {e}", t.host, t.port))
            })?;
        // russh applies `Config::nodelay` only in `client::connect`, not to a stream we open
        // ourselves: without this, Nagle's algorithm delays every channel open by ~40 ms
        // (measured with scripts/bench.sh and strace).
        stream.set_nodelay(true).map_err(|e| {
            Error::Connection(format!(
                "cannot set TCP_NODELAY on {}:{}: {e}",
                t.host, t.port
            ))
        })?;
        Ok(stream)
    };
    tokio::time::timeout(t.connect_timeout, connecting)
        .await
        .map_err(|_| {
            Error::Connection(format!(
                "connecting to {}:{} timed out after {}s (TCP connect)",
                t.host,
                t.port,
                t.connect_timeout.as_secs_f64()
            ))
        })?
}

/// Opens a `direct-tcpip` channel from the jump host behind `via` to `t`, as a byte stream
/// for the next SSH handshake. `via_name` names the jump host in messages.
async fn tunnel(
    via: &client::Handle<Verifier>,
    t: &Target,
    via_name: &str,
) -> Result<russh::ChannelStream<client::Msg>> {
    let open = via.channel_open_direct_tcpip(t.host.as_str(), u32::from(t.port), "127.0.0.1", 0);
    match tokio::time::timeout(t.connect_timeout, open).await {
        Err(_) => Err(Error::Connection(format!(
            "{via_name} did not open a tunnel to {}:{} within {}s",
            t.host,
            t.port,
            t.connect_timeout.as_secs_f64()
        ))),
        Ok(Err(russh::Error::ChannelOpenFailure(reason))) => Err(Error::Connection(format!(
            "{via_name} refused to open a tunnel to {}:{} ({reason:?}): the jump host must \
             allow TCP forwarding to it for this account (sshd `AllowTcpForwarding`, \
             `PermitOpen`), and the host must be reachable from there",
            t.host, t.port
        ))),
        Ok(Err(e)) => Err(Error::Connection(format!(
            "lost the connection to {via_name} while opening a tunnel to {}:{}: {e}",
            t.host, t.port
        ))),
        Ok(Ok(channel)) => Ok(channel.into_stream()),
    }
}

/// "jump host a → jump host b": the last jump host, for tunnel messages.
fn jumps_name(jumps: &[client::Handle<Verifier>], target: &Target) -> String {
    let hop = &target.jumps[jumps.len() - 1];
    format!("jump host {}", hop.display())
}

/// A jump host's own failure, said as such (the target was never reached). Exit classes are
/// kept: a jump host's bad key is still exit 6, its closed port exit 7.
fn in_jump(e: Error, hop: &Target) -> Error {
    let say = |m: String| format!("via jump host {}: {m}", hop.display());
    match e {
        Error::Auth(m) => Error::Auth(say(m)),
        Error::Connection(m) => Error::Connection(say(m)),
        other => other,
    }
}

/// The handshake (host key checked inside it) and key-only authentication of one hop over
/// `stream`. `name` says the hop in messages.
async fn connect_hop<S>(
    t: &Target,
    stream: Result<S>,
    files: Files,
    name: &str,
) -> Result<Connected>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Files { keys, entries } = files;
    let stream = stream?;
    tracing::debug!(
        target: "pxagent::ssh",
        host = %t.host,
        port = t.port,
        user = %t.user,
        hop = name,
        "connecting"
    );
    // Ask for the host key types already on record first, as OpenSSH does, so a host with
    // several keys presents the one we can check.
    let known = known_hosts::known_algorithms(&entries, &t.host, t.port);
    let mut key_algs: Vec<Algorithm> = Preferred::DEFAULT.key.to_vec();
    key_algs.sort_by_key(|a| !known.iter().any(|k| known_hosts::same_family(a, k)));
    let config = Arc::new(client::Config {
        preferred: Preferred {
            key: Cow::Owned(key_algs),
            ..Preferred::DEFAULT
        },
        keepalive_interval: (!t.keepalive.is_zero()).then_some(t.keepalive),
        keepalive_max: KEEPALIVE_MAX,
        // One small request per command: Nagle's algorithm would add a delayed-ACK wait
        // to every round trip.
        nodelay: true,
        ..Default::default()
    });
    let outcome = Arc::new(Mutex::new(HostKeyOutcome::default()));
    let ended = Arc::new(Mutex::new(None));
    let verifier = Verifier::new(t, entries, outcome.clone(), ended.clone());
    let handshake = async {
        client::connect_stream(config, stream, verifier)
            .await
            .map_err(|e| match e {
                HandlerError::HostKey(e) => e,
                HandlerError::Ssh(e) => Error::Connection(format!(
                    "SSH handshake with {}:{} failed: {e}",
                    t.host, t.port
                )),
            })
    };
    let mut handle = tokio::time::timeout(t.connect_timeout, handshake)
        .await
        .map_err(|_| {
            Error::Connection(format!(
                "connecting to {}:{} timed out after {}s (SSH handshake)",
                t.host,
                t.port,
                t.connect_timeout.as_secs_f64()
            ))
        })??;
    let who = t.display();
    let auth = tokio::time::timeout(t.connect_timeout, authenticate(&mut handle, t, &keys))
        .await
        .map_err(|_| {
            Error::Connection(format!(
                "authentication as {who} timed out after {}s",
                t.connect_timeout.as_secs_f64()
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
    Ok(Connected {
        handle,
        outcome,
        auth_methods: logged_in.offered,
        auth_key: logged_in.key,
        ended,
    })
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
async fn write_then_eof(
    mut w: impl tokio::io::AsyncWrite + Unpin,
    data: Vec<u8>,
) -> std::io::Result<()> {
    write_all_or_stop(&mut w, &data).await;
    let _ = std::future::poll_fn(|cx| std::pin::Pin::new(&mut w).poll_shutdown(cx)).await;
    Ok(())
}

/// Write `data` as far as the channel takes it; `false` when the command stopped reading
/// (its channel closed): not an error here, its exit status tells.
async fn write_all_or_stop(w: &mut (impl tokio::io::AsyncWrite + Unpin), data: &[u8]) -> bool {
    let mut off = 0;
    while off < data.len() {
        match std::future::poll_fn(|cx| std::pin::Pin::new(&mut *w).poll_write(cx, &data[off..]))
            .await
        {
            Ok(0) | Err(_) => return false,
            Ok(n) => off += n,
        }
    }
    true
}

/// The size of one chunk a streamed input is read and sent in.
const STREAM_CHUNK: usize = 256 * 1024;

/// Send `from` to the command's stdin chunk by chunk, as the channel's window allows (so at
/// most one chunk is held in memory), telling `sent` each chunk's size; then EOF. A local read
/// error is returned (the caller closes the channel without EOF); a command that stops
/// reading ends the copy, and its exit status tells.
async fn stream_then_eof(
    mut w: impl tokio::io::AsyncWrite + Unpin,
    from: &mut (dyn std::io::Read + Send),
    sent: &mut (dyn FnMut(u64) + Send),
) -> std::io::Result<()> {
    let mut buf = vec![0u8; STREAM_CHUNK];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if !write_all_or_stop(&mut w, &buf[..n]).await {
            return Ok(());
        }
        sent(n as u64);
    }
    let _ = std::future::poll_fn(|cx| std::pin::Pin::new(&mut w).poll_shutdown(cx)).await;
    Ok(())
}

/// The future that feeds a command's stdin.
type Writing<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>>;

/// What a command reads on stdin.
pub enum Input<'a> {
    /// These bytes, then EOF.
    Bytes(&'a [u8]),
    /// Everything `from` yields, read and sent a chunk at a time (a large local file without
    /// holding it in memory), each chunk's size told to `sent` once the channel took it.
    Stream {
        /// The source.
        from: &'a mut (dyn std::io::Read + Send),
        /// Called with each chunk's size as it is sent (a progress bar).
        sent: &'a mut (dyn FnMut(u64) + Send),
    },
}

/// Runs `f` until `deadline`; `None` if the deadline passed first.
async fn until<F: std::future::Future>(deadline: Option<Instant>, f: F) -> Option<F::Output> {
    match deadline {
        None => Some(f.await),
        Some(d) => tokio::time::timeout_at(d, f).await.ok(),
    }
}

/// What became of the commands dropped before their end on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Each reported its end (exit status or signal) after SIGTERM or SIGKILL.
    Exited,
    /// Each channel is closed, but some command gave no sign of its end: on a gated host the
    /// gate ends sudo once it sees the close (SIGTERM, SIGKILL after its own grace).
    Closed,
    /// Some are still being stopped.
    Pending,
}

/// A command's channel while the command runs. Dropped before [`Session::run_channel`] took
/// it back — its caller went away: a cancelled MCP call, a signal, a dropped batch — it stops
/// the command in the background as a timeout does ([`abort`]), counted in the session's
/// `aborting` until that is over, so that [`Session::settled`] and [`Session::close`] can wait
/// for it. Without this the command ran on: sshd neither signals a session without a
/// terminal when its channel closes, nor ends it when the connection drops.
struct Live {
    channel: Option<russh::Channel<client::Msg>>,
    inner: Arc<Inner>,
}

impl Drop for Live {
    fn drop(&mut self) {
        let Some(mut channel) = self.channel.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        /// Counts one stop while it lives, however its task ends (also when the runtime
        /// drops it).
        struct Counted(Arc<Inner>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.aborting.send_modify(|n| *n = n.saturating_sub(1));
            }
        }
        self.inner.aborting.send_modify(|n| *n += 1);
        let counted = Counted(self.inner.clone());
        let target = self.inner.target.clone();
        rt.spawn(async move {
            tracing::debug!(target: "pxagent::ssh", target_host = %target, "stopping a command whose caller went away");
            if !abort(&mut channel).await {
                counted.0.end_unseen.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            drop(counted);
        });
    }
}

/// Stops a timed-out command. Closing the channel alone does not stop a process that neither
/// reads stdin nor writes (sshd does not signal non-tty sessions on close), so first ask sshd
/// to signal the process group (RFC 4254 §6.9; OpenSSH honours it except for ForceCommand
/// sessions): TERM, a grace period, then KILL; then EOF and close.
async fn abort(channel: &mut russh::Channel<client::Msg>) -> bool {
    // The command's end as sshd reports it: its exit status (or signal), or the channel's
    // close. A forced command (the gate) is not signalled by sshd, so it says nothing.
    async fn end_within(channel: &mut russh::Channel<client::Msg>, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            while let Some(msg) = channel.wait().await {
                if matches!(
                    msg,
                    ChannelMsg::ExitStatus { .. }
                        | ChannelMsg::ExitSignal { .. }
                        | ChannelMsg::Close
                ) {
                    return;
                }
            }
        })
        .await
        .is_ok()
    }
    let _ = channel.signal(Sig::TERM).await;
    let mut ended = end_within(channel, KILL_GRACE).await;
    if !ended {
        let _ = channel.signal(Sig::KILL).await;
        ended = end_within(channel, KILL_SEEN).await;
    }
    let _ = channel.eof().await;
    let _ = channel.close().await;
    ended
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
