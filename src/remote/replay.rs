//! A [`Transport`] that answers from a script instead of a host: each step is the exact argv
//! pxagent must send and the output recorded for it (stdout, stderr, exit status — or no exit
//! status, a lost connection). It is what the in-process engine tests run over, fed with the
//! real captures in `tests/fixtures/`; it is compiled into the library so integration tests
//! can use it too.
//!
//! A command that no unused step expects is not answered: it gets [`Error::Internal`] and is
//! kept as a mismatch, so [`Replay::finish`] fails the test even when the code under test
//! swallowed the error. Everything sent is kept in order ([`Replay::sent`]), so a test can
//! assert on the exact argv and on "nothing was sent".

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::transport::{BoxFuture, Transport};
use crate::base::error::{Error, Result};
use crate::ssh::Captured;

/// What the host answered to one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The command ran and exited.
    Exit(Captured),
    /// The channel closed without an exit status: the connection was lost (exit 7).
    Lost,
}

impl Answer {
    /// Exit 0 with `stdout`.
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Answer {
        Answer::Exit(Captured {
            stdout: stdout.into(),
            ..Captured::default()
        })
    }

    /// Exit `status` with `stderr` (and no stdout).
    pub fn fail(status: u32, stderr: impl Into<Vec<u8>>) -> Answer {
        Answer::Exit(Captured {
            stderr: stderr.into(),
            exit_status: status,
            ..Captured::default()
        })
    }
}

/// One expected command.
#[derive(Debug, Clone)]
struct Step {
    argv: Vec<String>,
    answer: Answer,
}

/// One command the replay received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The argv as the caller passed it.
    pub argv: Vec<String>,
    /// What was written to its stdin, if anything.
    pub stdin: Option<Vec<u8>>,
}

/// A scripted host. Build it with [`Replay::new`] and [`Replay::expect`], share it in an
/// `Arc`, inspect it with [`Replay::sent`] and [`Replay::finish`].
#[derive(Debug)]
pub struct Replay {
    name: String,
    steps: Mutex<VecDeque<Step>>,
    sent: Mutex<Vec<Sent>>,
    mismatches: Mutex<Vec<String>>,
    closed: AtomicBool,
}

impl Replay {
    /// An empty script; `name` (`zen-agent@pve:22`) appears in its errors.
    pub fn new(name: impl Into<String>) -> Replay {
        Replay {
            name: name.into(),
            steps: Mutex::new(VecDeque::new()),
            sent: Mutex::new(Vec::new()),
            mismatches: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        }
    }

    /// Expect `argv` (once) and answer it with `answer`. Steps are matched by argv, the
    /// first unused one first, so concurrent commands may arrive in any order.
    pub fn expect<S: AsRef<str>>(self, argv: &[S], answer: Answer) -> Replay {
        let argv = argv.iter().map(|a| a.as_ref().to_string()).collect();
        lock(&self.steps).push_back(Step { argv, answer });
        self
    }

    /// Everything received so far, in order.
    pub fn sent(&self) -> Vec<Sent> {
        lock(&self.sent).clone()
    }

    /// The argv of everything received so far, in order.
    pub fn sent_argv(&self) -> Vec<Vec<String>> {
        self.sent().into_iter().map(|s| s.argv).collect()
    }

    /// How many commands were received.
    pub fn count(&self) -> usize {
        lock(&self.sent).len()
    }

    /// `Ok` when every step was used and nothing unexpected arrived; otherwise what went
    /// wrong, for the test's panic message.
    pub fn finish(&self) -> std::result::Result<(), String> {
        let mut problems = lock(&self.mismatches).clone();
        problems.extend(
            lock(&self.steps)
                .iter()
                .map(|s| format!("expected but never sent: {:?}", s.argv)),
        );
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    fn answer(
        &self,
        argv: &[String],
        stdin: Option<&[u8]>,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Captured> {
        lock(&self.sent).push(Sent {
            argv: argv.to_vec(),
            stdin: stdin.map(<[u8]>::to_vec),
        });
        if self.is_closed() {
            return Err(Error::Connection(format!(
                "the connection to {} is closed",
                self.name
            )));
        }
        let step = {
            let mut steps = lock(&self.steps);
            steps
                .iter()
                .position(|s| s.argv == argv)
                .and_then(|i| steps.remove(i))
        };
        let Some(step) = step else {
            let msg = format!("replay {}: unexpected command {argv:?}", self.name);
            lock(&self.mismatches).push(msg.clone());
            return Err(Error::Internal(msg));
        };
        match step.answer {
            Answer::Exit(out) => {
                if !out.stdout.is_empty() {
                    on_stdout(&out.stdout);
                }
                Ok(out)
            }
            // The same class and wording as the SSH session's lost channel.
            Answer::Lost => Err(Error::Connection(format!(
                "lost the connection to {} while running `{} …` (the channel closed without an \
                 exit status); the command may or may not have completed",
                self.name,
                argv.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
            ))),
        }
    }
}

/// A poisoned lock only means another test thread panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Transport for Replay {
    fn exec_streaming<'a>(
        &'a self,
        argv: &'a [String],
        on_stdout: &'a mut (dyn FnMut(&[u8]) + Send),
    ) -> BoxFuture<'a, Result<Captured>> {
        Box::pin(async move { self.answer(argv, None, on_stdout) })
    }

    fn exec_with_stdin<'a>(
        &'a self,
        argv: &'a [String],
        input: &'a [u8],
    ) -> BoxFuture<'a, Result<Captured>> {
        Box::pin(async move { self.answer(argv, Some(input), &mut |_| {}) })
    }

    fn exec_from_reader<'a>(
        &'a self,
        argv: &'a [String],
        from: &'a mut (dyn std::io::Read + Send),
        sent: &'a mut (dyn FnMut(u64) + Send),
        max: usize,
    ) -> BoxFuture<'a, crate::base::error::Result<crate::ssh::Bounded>> {
        Box::pin(async move {
            let mut input = Vec::new();
            std::io::Read::read_to_end(from, &mut input)
                .map_err(|e| crate::base::error::Error::Internal(e.to_string()))?;
            sent(input.len() as u64);
            let out = self.answer(argv, Some(&input), &mut |_| {})?;
            Ok(crate::ssh::Bounded::cut(out, max))
        })
    }

    fn exec_many(&self, cmds: Vec<Vec<String>>) -> BoxFuture<'_, Vec<Result<Captured>>> {
        Box::pin(async move {
            cmds.iter()
                .map(|argv| self.answer(argv, None, &mut |_| {}))
                .collect()
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.closed.store(true, Ordering::Relaxed);
        Box::pin(async {})
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    fn host_key(&self) -> &str {
        "ssh-ed25519 key SHA256:replay"
    }

    fn server_auth_methods(&self) -> Option<Vec<String>> {
        Some(vec!["publickey".to_string()])
    }

    fn recorded_host_key(&self) -> Option<&str> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::testing::words;

    #[tokio::test]
    async fn answers_by_argv_and_keeps_what_was_sent() {
        let r = Replay::new("h")
            .expect(&words("id -u"), Answer::ok("1000\n"))
            .expect(&words("true"), Answer::Lost);
        let out = r.exec(&words("id -u")).await.unwrap();
        assert_eq!(out.stdout_text(), "1000\n");
        assert_eq!(r.exec(&words("true")).await.unwrap_err().exit_code(), 7);
        let e = r.exec(&words("id -u")).await.unwrap_err();
        assert_eq!(e.exit_code(), 10, "a step answers once");
        assert_eq!(r.count(), 3);
        assert!(r.finish().unwrap_err().contains("unexpected command"));
        let piped = Replay::new("h").expect(&words("tee f"), Answer::ok(""));
        piped
            .exec_with_stdin(&words("tee f"), b"data")
            .await
            .unwrap();
        assert_eq!(piped.sent()[0].stdin.as_deref(), Some(&b"data"[..]));
        assert!(piped.finish().is_ok());
    }
}
