//! The holder of a persistent connection (`pxagent persist serve`, started by the first
//! caller): one [`Session`] and a Unix socket (0600, in the account's 0700 directory) on which
//! callers of the same account ask it to run commands, read and keep memos, say hello, or
//! stop. It decides nothing about the commands — the callers did — and checks what a
//! transport must: the peer's uid, the frames' bounds, that it is not root's. It exits when it
//! has been idle (no request running, none for the idle time), when its SSH connection is
//! lost, or when asked to; then it removes its socket.

use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::time::Instant;

use super::wire::{self, Answer, Frame, Hello, HolderRequest};
use super::{Ready, Spec};
use crate::base::error::{Error, Result};
use crate::ssh::Session;

/// The most memos a holder keeps.
const MAX_MEMOS: usize = 16;
/// The most stdin a caller may send with one command (a container file push's limit).
const MAX_STDIN: usize = crate::catalog::guest::CT_FILE_MAX;

struct State {
    session: Session,
    hello: Hello,
    started: Instant,
    last: Mutex<Instant>,
    active: AtomicUsize,
    commands: AtomicU64,
    memos: Mutex<HashMap<String, (Vec<u8>, Instant)>>,
    stop: tokio::sync::Notify,
    idle: Duration,
}

impl State {
    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    fn hello(&self) -> Hello {
        Hello {
            idle_for_secs: self.idle_for().as_secs(),
            up_secs: self.started.elapsed().as_secs(),
            commands: self.commands.load(Ordering::Relaxed),
            ..self.hello.clone()
        }
    }
}

/// Say `ready` on stdout (the caller that started us reads one line).
fn say(ready: &Ready) {
    crate::output::write_stdout(&serde_json::to_string(ready).unwrap_or_default());
}

/// Read the [`Spec`] from stdin, connect, listen, serve until idle; the exit code.
pub fn serve() -> Result<u8> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|source| {
        Error::ReadFile {
            path: "-".into(),
            source,
        }
    })?;
    let spec: Spec = serde_json::from_str(&text)
        .map_err(|e| Error::usage(format!("persist serve: not a holder spec: {e}")))?;
    // Our own session: no terminal's hangup or Ctrl-C reaches us (we may be a group leader
    // already when started by hand; then there is nothing to leave).
    let _ = rustix::process::setsid();
    let fail = |e: Error| {
        say(&Ready {
            ok: false,
            code: e.exit_code(),
            message: e.to_string(),
        });
        Ok(e.exit_code())
    };
    if spec.target().user == "root" {
        return fail(Error::usage("pxagent never logs in as root"));
    }
    // The socket must go into this account's own directory.
    let dir = match super::dir() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    if spec.socket.parent() != Some(dir.as_path()) {
        return fail(Error::usage(format!(
            "persist serve: {} is not in {}",
            spec.socket.display(),
            dir.display()
        )));
    }
    let rt = crate::base::runtime::runtime()?;
    rt.block_on(async move {
        let target = spec.target();
        let session = match Session::connect(&target).await {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let listener = match bind(&spec.socket) {
            Ok(l) => l,
            Err(e) => {
                session.close().await;
                return fail(e);
            }
        };
        let ino = std::fs::metadata(&spec.socket).map(|m| m.ino()).ok();
        say(&Ready {
            ok: true,
            code: 0,
            message: session.recorded_host_key().unwrap_or_default().to_string(),
        });
        let hello = Hello {
            wire: wire::VERSION,
            pxagent: crate::VERSION.to_string(),
            user: target.user.clone(),
            host: target.host.clone(),
            port: target.port,
            target: target.display(),
            host_key: session.host_key().to_string(),
            host_key_line: session.host_key_line().to_string(),
            auth_key: session.auth_key().map(String::from),
            auth_methods: session.server_auth_methods(),
            pid: std::process::id(),
            idle_secs: spec.idle_secs,
            idle_for_secs: 0,
            up_secs: 0,
            commands: 0,
        };
        let state = Arc::new(State {
            session,
            hello,
            started: Instant::now(),
            last: Mutex::new(Instant::now()),
            active: AtomicUsize::new(0),
            commands: AtomicU64::new(0),
            memos: Mutex::new(HashMap::new()),
            stop: tokio::sync::Notify::new(),
            idle: Duration::from_secs(spec.idle_secs),
        });
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    if let Ok((stream, _)) = accepted {
                        let state = state.clone();
                        tokio::spawn(async move { handle(state, stream).await });
                    }
                }
                () = state.stop.notified() => break,
                () = tokio::time::sleep(Duration::from_millis(500)) => {
                    let idle = state.active.load(Ordering::SeqCst) == 0
                        && state.idle_for() >= state.idle;
                    if idle || state.session.is_closed() {
                        break;
                    }
                }
            }
        }
        // Remove the socket only if it is still ours (not a successor's).
        if std::fs::metadata(&spec.socket).map(|m| m.ino()).ok() == ino {
            let _ = std::fs::remove_file(&spec.socket);
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), state.session.clone().close()).await;
        Ok(0)
    })
}

/// Listen at `path`: bound under a temporary name, made 0600, then moved into place, so the
/// socket is never reachable with looser permissions.
fn bind(path: &Path) -> Result<UnixListener> {
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let err = |what: &str, e: std::io::Error| {
        Error::Connection(format!("cannot {what} {}: {e}", tmp.display()))
    };
    let listener = UnixListener::bind(&tmp).map_err(|e| err("listen on", e))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| err("chmod", e))?;
    std::fs::rename(&tmp, path).map_err(|e| err("rename", e))?;
    Ok(listener)
}

/// Serve one caller's connection: one request and its answer.
async fn handle(state: Arc<State>, mut s: UnixStream) {
    match s.peer_cred() {
        Ok(c) if c.uid() == super::uid() => {}
        other => {
            tracing::warn!(target: "pxagent::persist", "refused a caller of another account: {other:?}");
            return;
        }
    }
    let Ok(Some(Frame::Json(body))) = wire::read(&mut s).await else {
        return;
    };
    let Ok(req) = wire::parse::<HolderRequest>(&body) else {
        return;
    };
    let answer = match req {
        HolderRequest::Hello => {
            let _ = wire::write(&mut s, &Frame::json(&state.hello())).await;
            return;
        }
        HolderRequest::Stop => {
            let _ = wire::write(&mut s, &Frame::json(&Answer::Ok)).await;
            state.stop.notify_one();
            return;
        }
        HolderRequest::MemoGet { key } => {
            let memos = state.memos.lock().unwrap_or_else(|e| e.into_inner());
            match memos.get(&key) {
                Some((v, at)) => Answer::Memo {
                    value: Some(wire::b64(v)),
                    age_ms: at.elapsed().as_millis() as u64,
                },
                None => Answer::Memo {
                    value: None,
                    age_ms: 0,
                },
            }
        }
        HolderRequest::MemoPut { key, value, age_ms } => {
            let mut memos = state.memos.lock().unwrap_or_else(|e| e.into_inner());
            match wire::unb64(&value) {
                Some(v) if v.is_empty() => {
                    memos.remove(&key);
                }
                Some(v) if memos.len() < MAX_MEMOS || memos.contains_key(&key) => {
                    let at = Instant::now()
                        .checked_sub(Duration::from_millis(age_ms))
                        .unwrap_or_else(Instant::now);
                    memos.insert(key, (v, at));
                }
                _ => {}
            }
            Answer::Ok
        }
        HolderRequest::Exec {
            argv,
            timeout_ms,
            stdin,
        } => {
            state.active.fetch_add(1, Ordering::SeqCst);
            exec(
                &state,
                &mut s,
                argv,
                timeout_ms.map(Duration::from_millis),
                stdin,
            )
            .await;
            state.commands.fetch_add(1, Ordering::Relaxed);
            state.touch();
            state.active.fetch_sub(1, Ordering::SeqCst);
            return;
        }
    };
    let _ = wire::write(&mut s, &Frame::json(&answer)).await;
}

/// Run one command for a caller, streaming its stdout; a caller that goes away (its end of the
/// socket closes) drops the command, which closes its channel.
async fn exec(
    state: &State,
    s: &mut UnixStream,
    argv: Vec<String>,
    timeout: Option<Duration>,
    with_stdin: bool,
) {
    let mut input = Vec::new();
    if with_stdin {
        loop {
            match wire::read(s).await {
                Ok(Some(Frame::Stdin(chunk))) if input.len() + chunk.len() <= MAX_STDIN => {
                    input.extend_from_slice(&chunk);
                }
                Ok(Some(Frame::StdinEnd)) => break,
                _ => return,
            }
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let (mut rd, mut wr) = s.split();
    let run = async {
        if with_stdin {
            state
                .session
                .exec_with_stdin_within(&argv, &input, timeout)
                .await
        } else {
            state
                .session
                .exec_streaming_within(
                    &argv,
                    &mut |c| {
                        let _ = tx.send(c.to_vec());
                    },
                    timeout,
                )
                .await
        }
    };
    tokio::pin!(run);
    let mut probe = [0u8; 1];
    let result = loop {
        tokio::select! {
            r = &mut run => break r,
            Some(chunk) = rx.recv() => {
                if wire::write(&mut wr, &Frame::Stdout(chunk)).await.is_err() {
                    return;
                }
            }
            // The caller sends nothing more: any read result means it is gone.
            _ = rd.read(&mut probe) => return,
        }
    };
    while let Ok(chunk) = rx.try_recv() {
        if wire::write(&mut wr, &Frame::Stdout(chunk)).await.is_err() {
            return;
        }
    }
    let answer = match result {
        Ok(out) => {
            let stdout: &[u8] = if with_stdin { &out.stdout } else { &[] };
            for chunk in stdout.chunks(wire::CHUNK) {
                if wire::write(&mut wr, &Frame::Stdout(chunk.to_vec()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            for chunk in out.stderr.chunks(wire::CHUNK) {
                if wire::write(&mut wr, &Frame::Stderr(chunk.to_vec()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Answer::Done {
                exit_status: out.exit_status,
            }
        }
        Err(e) => Answer::Failed {
            code: e.exit_code(),
            message: e.to_string(),
        },
    };
    let _ = wire::write(&mut wr, &Frame::json(&answer)).await;
}
