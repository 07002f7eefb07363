//! The caller's side of a persistent connection: [`Holder`], a [`Transport`] that sends each
//! command to the holder's socket (one Unix connection per command, so commands run side by
//! side as on a connection of our own), after checking once — on [`Holder::open`] — that the
//! holder is ours and holds the connection this caller would have opened itself (see the
//! checks in [`super`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::UnixStream;

use super::wire::{self, Answer, Frame, Hello, HolderRequest};
use crate::base::error::{Error, Result};
use crate::remote::transport::{BoxFuture, Transport};
use crate::ssh::{Captured, Target};

/// A holder's socket and what it said about its connection.
#[derive(Debug, Clone)]
pub struct Holder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    socket: PathBuf,
    hello: Hello,
    timeout: Option<Duration>,
    closed: AtomicBool,
}

/// Connect to the socket at `path`, checking the peer is this account.
async fn dial(path: &Path) -> std::io::Result<UnixStream> {
    let s = UnixStream::connect(path).await?;
    let cred = s.peer_cred()?;
    if cred.uid() != super::uid() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "the process at the other end runs as uid {}, not as this account",
                cred.uid()
            ),
        ));
    }
    Ok(s)
}

/// Send one request and read its first JSON answer.
async fn ask<T: for<'de> serde::Deserialize<'de>>(path: &Path, req: &HolderRequest) -> Result<T> {
    let lost = |e: &dyn std::fmt::Display| {
        Error::Connection(format!(
            "the persistent connection at {} did not answer: {e}",
            path.display()
        ))
    };
    let mut s = dial(path).await.map_err(|e| lost(&e))?;
    wire::write(&mut s, &Frame::json(req))
        .await
        .map_err(|e| lost(&e))?;
    match wire::read(&mut s).await.map_err(|e| lost(&e))? {
        Some(Frame::Json(body)) => wire::parse(&body),
        other => Err(lost(&format!("unexpected answer {other:?}"))),
    }
}

impl Holder {
    /// The holder at `socket` for `target`, checked (see [`super`]); `None` when no holder
    /// answers there (or an old one, now stopped), so the caller starts one. A holder that
    /// answers but fails a check is an error (exit 6): never silently replaced.
    pub async fn open(socket: &Path, target: &Target) -> Result<Option<Holder>> {
        if std::fs::symlink_metadata(socket).is_err() {
            return Ok(None);
        }
        super::check_owned(socket, false)?;
        let hello: Hello = match ask(socket, &HolderRequest::Hello).await {
            Ok(h) => h,
            // Nobody listens (a holder that died), or it is going away.
            Err(e) => {
                tracing::debug!(target: "pxagent::persist", socket = %socket.display(), "no holder answers: {e}");
                return Ok(None);
            }
        };
        if hello.wire != wire::VERSION || hello.pxagent != crate::VERSION {
            tracing::debug!(target: "pxagent::persist", theirs = %hello.pxagent, "a holder of another version: stopping it");
            let _ = ask::<Answer>(socket, &HolderRequest::Stop).await;
            let _ = std::fs::remove_file(socket);
            return Ok(None);
        }
        if (hello.user.as_str(), hello.host.as_str(), hello.port)
            != (target.user.as_str(), target.host.as_str(), target.port)
        {
            return Err(Error::Auth(format!(
                "the persistent connection at {} holds {}, not {}; refusing it",
                socket.display(),
                hello.target,
                target.display()
            )));
        }
        // The host key, checked as this caller's own handshake would check it.
        if let Some(note) = crate::ssh::check_host_key_line(target, &hello.host_key_line)? {
            crate::output::note(note);
        }
        let key_ok = match &hello.auth_key {
            Some(k) => crate::ssh::could_use_key(target, k).await?,
            None => false,
        };
        if !key_ok {
            return Err(Error::Auth(format!(
                "the persistent connection to {} logged in with the key {}, which this call is not set up to use (-i, IdentitiesOnly, ssh-agent); refusing it — `pxagent persist stop` ends it",
                target.display(),
                hello.auth_key.as_deref().unwrap_or("(none)")
            )));
        }
        tracing::debug!(target: "pxagent::persist", socket = %socket.display(), pid = hello.pid, "using the persistent connection");
        Ok(Some(Holder {
            inner: Arc::new(Inner {
                socket: socket.to_path_buf(),
                hello,
                timeout: target.command_timeout,
                closed: AtomicBool::new(false),
            }),
        }))
    }

    /// What the holder said when this caller opened it.
    pub fn hello(&self) -> &Hello {
        &self.inner.hello
    }

    /// Run one command through the holder.
    async fn run(
        &self,
        argv: &[String],
        input: Option<&[u8]>,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Captured> {
        // Refuse what a connection of our own would refuse, before sending.
        crate::ssh::command_line(argv)?;
        let label = argv.iter().take(5).cloned().collect::<Vec<_>>().join(" ");
        let target = &self.inner.hello.target;
        let lost = |why: &dyn std::fmt::Display| {
            Error::Connection(format!(
                "lost the persistent connection to {target} while running `{label} …` ({why}); the command may or may not have completed"
            ))
        };
        let mut s = match dial(&self.inner.socket).await {
            Ok(s) => s,
            Err(e) => {
                self.inner.closed.store(true, Ordering::Relaxed);
                return Err(Error::Connection(format!(
                    "the persistent connection to {target} is gone ({e}); nothing was run"
                )));
            }
        };
        let req = HolderRequest::Exec {
            argv: argv.to_vec(),
            timeout_ms: self.inner.timeout.map(|t| t.as_millis() as u64),
            stdin: input.is_some(),
        };
        wire::write(&mut s, &Frame::json(&req))
            .await
            .map_err(|e| lost(&e))?;
        if let Some(data) = input {
            for chunk in data.chunks(wire::CHUNK) {
                wire::write(&mut s, &Frame::Stdin(chunk.to_vec()))
                    .await
                    .map_err(|e| lost(&e))?;
            }
            wire::write(&mut s, &Frame::StdinEnd)
                .await
                .map_err(|e| lost(&e))?;
        }
        let mut out = Captured::default();
        loop {
            match wire::read(&mut s).await.map_err(|e| lost(&e))? {
                Some(Frame::Stdout(chunk)) => {
                    on_stdout(&chunk);
                    out.stdout.extend_from_slice(&chunk);
                }
                Some(Frame::Stderr(bytes)) => out.stderr.extend_from_slice(&bytes),
                Some(Frame::Json(body)) => {
                    return match wire::parse::<Answer>(&body)? {
                        Answer::Done { exit_status } => {
                            out.exit_status = exit_status;
                            Ok(out)
                        }
                        Answer::Failed { code, message } => {
                            if code == 7 {
                                self.inner.closed.store(true, Ordering::Relaxed);
                            }
                            Err(Error::from_exit_code(code, message))
                        }
                        other => Err(lost(&format!("unexpected answer {other:?}"))),
                    };
                }
                Some(other) => return Err(lost(&format!("unexpected frame {other:?}"))),
                None => {
                    self.inner.closed.store(true, Ordering::Relaxed);
                    return Err(lost(&"the holder closed the socket"));
                }
            }
        }
    }
}

impl Transport for Holder {
    fn exec_streaming<'a>(
        &'a self,
        argv: &'a [String],
        on_stdout: &'a mut (dyn FnMut(&[u8]) + Send),
    ) -> BoxFuture<'a, Result<Captured>> {
        Box::pin(async move {
            self.run(argv, None, on_stdout)
                .await
                .map(crate::remote::transport::without_sudo_notes)
        })
    }

    fn exec_with_stdin<'a>(
        &'a self,
        argv: &'a [String],
        input: &'a [u8],
    ) -> BoxFuture<'a, Result<Captured>> {
        Box::pin(async move {
            self.run(argv, Some(input), &mut |_| {})
                .await
                .map(crate::remote::transport::without_sudo_notes)
        })
    }

    fn exec_many(&self, cmds: Vec<Vec<String>>) -> BoxFuture<'_, Vec<Result<Captured>>> {
        Box::pin(async move {
            let mut set = tokio::task::JoinSet::new();
            let count = cmds.len();
            for (i, argv) in cmds.into_iter().enumerate() {
                let me = self.clone();
                set.spawn(async move { (i, me.exec(&argv).await) });
            }
            let mut results: Vec<Option<Result<Captured>>> = (0..count).map(|_| None).collect();
            while let Some(joined) = set.join_next().await {
                if let Ok((i, r)) = joined {
                    results[i] = Some(r);
                }
            }
            results
                .into_iter()
                .map(|r| r.unwrap_or_else(|| Err(Error::Internal("exec task panicked".into()))))
                .collect()
        })
    }

    /// The holder keeps the connection for the next caller: closing is this caller's alone.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Relaxed)
    }

    fn host_key(&self) -> &str {
        &self.inner.hello.host_key
    }

    fn server_auth_methods(&self) -> Option<Vec<String>> {
        self.inner.hello.auth_methods.clone()
    }

    fn recorded_host_key(&self) -> Option<&str> {
        None
    }

    fn memo_get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<(Vec<u8>, Duration)>> {
        Box::pin(async move {
            let req = HolderRequest::MemoGet {
                key: key.to_string(),
            };
            match ask::<Answer>(&self.inner.socket, &req).await.ok()? {
                Answer::Memo {
                    value: Some(v),
                    age_ms,
                } => Some((wire::unb64(&v)?, Duration::from_millis(age_ms))),
                _ => None,
            }
        })
    }

    fn memo_put<'a>(&'a self, key: &'a str, value: &'a [u8], age: Duration) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let req = HolderRequest::MemoPut {
                key: key.to_string(),
                value: wire::b64(value),
                age_ms: age.as_millis().min(u64::MAX as u128) as u64,
            };
            let _ = ask::<Answer>(&self.inner.socket, &req).await;
        })
    }
}

/// Ask the holder at `socket` for its status (its hello), checking the socket and the peer.
pub async fn status(socket: &Path) -> Result<Hello> {
    super::check_owned(socket, false)?;
    ask(socket, &HolderRequest::Hello).await
}

/// Ask the holder at `socket` to end now.
pub async fn stop(socket: &Path) -> Result<()> {
    super::check_owned(socket, false)?;
    ask::<Answer>(socket, &HolderRequest::Stop)
        .await
        .map(|_| ())
}
