//! The seam under [`super::Remote`]: what a connected host must do for pxagent (run argv
//! vectors, alone, with stdin or many at once; say what the connection learnt), as a trait
//! object so that everything above it — node lookup, classification, tasks, the engine — can
//! run over a [`super::replay::Replay`] in tests instead of sshd, sudo and the simulator.
//!
//! [`crate::ssh::Session`] implements it here rather than in `ssh/`, so the transport does not
//! know the layer above it. Futures are boxed to keep the trait object-safe; `Send + Sync`
//! because the MCP server and `status` run commands from several tasks at once.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::base::error::Result;
use crate::ssh::{Bounded, Captured, Session, Settled};

/// A boxed `Send` future, as the transport's methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A connected host that runs commands. Method names and meanings are those of
/// [`crate::ssh::Session`], which is the production implementation: a non-zero exit status is
/// an [`Captured`], not an error; a command that ends without an exit status is a lost
/// connection ([`crate::Error::Connection`], exit 7).
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Run `argv` (already `sudo -n …`), handing each chunk of stdout to `on_stdout` as it
    /// arrives; the returned [`Captured`] still holds all of it.
    fn exec_streaming<'a>(
        &'a self,
        argv: &'a [String],
        on_stdout: &'a mut (dyn FnMut(&[u8]) + Send),
    ) -> BoxFuture<'a, Result<Captured>>;

    /// The local and the host's socket address of a direct connection of this process
    /// ([`crate::ssh::Session::addresses`]); `None` where they are not known.
    fn addresses(&self) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
        None
    }

    /// Run `argv` with `input` on its stdin, then EOF.
    fn exec_with_stdin<'a>(
        &'a self,
        argv: &'a [String],
        input: &'a [u8],
    ) -> BoxFuture<'a, Result<Captured>>;

    /// Run `argv` with its stdin streamed from `from` (a large local file: a chunk at a time),
    /// `sent` told each chunk's size as it goes, keeping at most `max` bytes of stdout and
    /// stderr, with no command timeout (a stream takes as long as the link needs). Only a
    /// connection of this process can: a persistent connection's holder is another process,
    /// so this default refuses before anything is sent.
    fn exec_from_reader<'a>(
        &'a self,
        _argv: &'a [String],
        _from: &'a mut (dyn std::io::Read + Send),
        _sent: &'a mut (dyn FnMut(u64) + Send),
        _max: usize,
    ) -> BoxFuture<'a, Result<Bounded>> {
        Box::pin(async {
            Err(crate::base::error::Error::usage(
                "sending a file needs a connection of its own, and this one is a persistent connection's (--persist): run it without --persist",
            ))
        })
    }

    /// Run several commands concurrently; results come back in input order.
    fn exec_many(&self, cmds: Vec<Vec<String>>) -> BoxFuture<'_, Vec<Result<Captured>>>;

    /// Close the connection (for every holder of it).
    fn close(&self) -> BoxFuture<'_, ()>;

    /// Wait (at most `within`) until the commands dropped before their end on this connection
    /// were ended on the host. A transport that ends nothing has none.
    fn settled(&self, _within: Duration) -> BoxFuture<'_, Settled> {
        Box::pin(async { Settled::Exited })
    }

    /// Whether the connection is gone.
    fn is_closed(&self) -> bool;

    /// The server's host key as `ssh-ed25519 key SHA256:…`.
    fn host_key(&self) -> &str;

    /// The authentication methods the server offered (`None`: it let the account in without
    /// any), for the preflight.
    fn server_auth_methods(&self) -> Option<Vec<String>>;

    /// With accept-new, the note that this connection recorded a new host key.
    fn recorded_host_key(&self) -> Option<&str>;

    /// A value kept for every process that talks to this host (the guest map,
    /// [`super::guests`]), with its age; `None` when there is none. A persistent connection's
    /// holder keeps it; an SSH session of this process alone keeps it in the state directory
    /// ([`super::memo`]); recorded answers keep nothing.
    fn memo_get<'a>(&'a self, _key: &'a str) -> BoxFuture<'a, Option<(Vec<u8>, Duration)>> {
        Box::pin(async { None })
    }

    /// Keep `value` (already `age` old) under `key` for the next users of this host (see
    /// [`Transport::memo_get`]); an empty value forgets it.
    fn memo_put<'a>(
        &'a self,
        _key: &'a str,
        _value: &'a [u8],
        _age: Duration,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Run `argv` and collect its output.
    fn exec<'a>(&'a self, argv: &'a [String]) -> BoxFuture<'a, Result<Captured>> {
        Box::pin(async move { self.exec_streaming(argv, &mut |_| {}).await })
    }

    /// Run `argv` (with `input` on stdin when given) keeping at most `max` bytes of each
    /// stream. This default collects everything first (fine for recorded answers); the SSH
    /// session drops what is over `max` as it arrives.
    fn exec_bounded<'a>(
        &'a self,
        argv: &'a [String],
        input: Option<&'a [u8]>,
        max: usize,
    ) -> BoxFuture<'a, Result<Bounded>> {
        Box::pin(async move {
            let out = match input {
                Some(data) => self.exec_with_stdin(argv, data).await?,
                None => self.exec(argv).await?,
            };
            Ok(Bounded::cut(out, max))
        })
    }
}

impl Transport for Session {
    fn addresses(&self) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
        Session::addresses(self)
    }

    fn exec_streaming<'a>(
        &'a self,
        argv: &'a [String],
        on_stdout: &'a mut (dyn FnMut(&[u8]) + Send),
    ) -> BoxFuture<'a, Result<Captured>> {
        Box::pin(async move {
            Session::exec_streaming(self, argv, on_stdout)
                .await
                .map(without_sudo_notes)
        })
    }

    fn exec_with_stdin<'a>(
        &'a self,
        argv: &'a [String],
        input: &'a [u8],
    ) -> BoxFuture<'a, Result<Captured>> {
        Box::pin(async move {
            Session::exec_with_stdin(self, argv, input)
                .await
                .map(without_sudo_notes)
        })
    }

    fn exec_from_reader<'a>(
        &'a self,
        argv: &'a [String],
        from: &'a mut (dyn std::io::Read + Send),
        sent: &'a mut (dyn FnMut(u64) + Send),
        max: usize,
    ) -> BoxFuture<'a, Result<Bounded>> {
        Box::pin(async move {
            let mut b = Session::exec_from_reader(self, argv, from, sent, max, None).await?;
            b.output = without_sudo_notes(b.output);
            Ok(b)
        })
    }

    fn exec_many(&self, cmds: Vec<Vec<String>>) -> BoxFuture<'_, Vec<Result<Captured>>> {
        Box::pin(async move {
            Session::exec_many(self, cmds)
                .await
                .into_iter()
                .map(|r| r.map(without_sudo_notes))
                .collect()
        })
    }

    fn exec_bounded<'a>(
        &'a self,
        argv: &'a [String],
        input: Option<&'a [u8]>,
        max: usize,
    ) -> BoxFuture<'a, Result<Bounded>> {
        Box::pin(async move {
            let mut b = Session::exec_bounded(self, argv, input, max).await?;
            b.output = without_sudo_notes(b.output);
            Ok(b)
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.clone().close())
    }

    /// Kept for the next process to this host in the state directory ([`super::memo`]).
    fn memo_get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<(Vec<u8>, Duration)>> {
        Box::pin(
            async move { super::memo::FileMemo::new(self.target(), self.host_key())?.get(key) },
        )
    }

    fn memo_put<'a>(&'a self, key: &'a str, value: &'a [u8], age: Duration) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(m) = super::memo::FileMemo::new(self.target(), self.host_key()) {
                m.put(key, value, age);
            }
        })
    }

    fn settled(&self, within: Duration) -> BoxFuture<'_, Settled> {
        Box::pin(Session::settled(self, within))
    }

    fn is_closed(&self) -> bool {
        Session::is_closed(self)
    }

    fn host_key(&self) -> &str {
        Session::host_key(self)
    }

    fn server_auth_methods(&self) -> Option<Vec<String>> {
        Session::server_auth_methods(self)
    }

    fn recorded_host_key(&self) -> Option<&str> {
        Session::recorded_host_key(self)
    }
}

/// Drop the lines sudo itself writes before it runs the tool when the host's own name does not
/// resolve (`sudo: unable to resolve host pve1: Name or service not known`, a common slip in
/// `/etc/hosts`): they are not the tool's output, and left in they would read as a Proxmox
/// warning, or as the first line of a guest command's stderr. Only leading lines, only that
/// exact shape; they are logged at debug level.
pub(crate) fn without_sudo_notes(mut out: Captured) -> Captured {
    const NOTE: &[u8] = b"sudo: unable to resolve host ";
    let mut cut = 0;
    while out.stderr[cut..].starts_with(NOTE) {
        match out.stderr[cut..].iter().position(|&b| b == b'\n') {
            Some(end) => {
                let line = String::from_utf8_lossy(&out.stderr[cut..cut + end]);
                tracing::debug!(target: "pxagent::remote", note = %line, "sudo's own note, not the tool's output");
                cut += end + 1;
            }
            None => break,
        }
    }
    out.stderr.drain(..cut);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stderr: &str) -> Captured {
        Captured {
            stdout: b"{}".to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            exit_status: 0,
        }
    }

    #[test]
    fn sudo_host_resolution_notes_are_dropped_only_when_leading() {
        let o = without_sudo_notes(out(
            "sudo: unable to resolve host vm: Temporary failure in name resolution\nerr\n",
        ));
        assert_eq!(o.stderr, b"err\n");
        let o = without_sudo_notes(out(
            "sudo: unable to resolve host a: x\nsudo: unable to resolve host a: y\n",
        ));
        assert!(o.stderr.is_empty());
        // Anywhere else it is the tool's output and stays.
        let text = "warn\nsudo: unable to resolve host vm: x\n";
        assert_eq!(without_sudo_notes(out(text)).stderr, text.as_bytes());
        // A refusal is not touched.
        let text = "sudo: a password is required\n";
        assert_eq!(without_sudo_notes(out(text)).stderr, text.as_bytes());
        // An unterminated note is kept (it may be cut off; never guess).
        let text = "sudo: unable to resolve host vm";
        assert_eq!(without_sudo_notes(out(text)).stderr, text.as_bytes());
    }
}
