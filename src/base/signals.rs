//! SIGINT, SIGTERM and SIGHUP while pxagent runs an operation.
//! Without a handler the process dies and the op's audit record never gets its
//! result; with one, the front end stops waiting, writes what it knows, and exits.
//!
//! Registering a handler replaces the signal's default action for the rest of the process,
//! so the CLI registers only once its op is about to be sent ([`interruptible`]): until then
//! (a confirmation prompt, a policy refusal) Ctrl-C ends pxagent at once as always, and
//! nothing had been sent. The MCP server watches from its start ([`Watch`]).

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};

/// One of the signals pxagent handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (what service managers and MCP hosts send).
    Terminate,
    /// SIGHUP (the terminal went away).
    Hangup,
}

impl Signal {
    /// The signal's name: `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Hangup => "SIGHUP",
        }
    }
}

/// Handlers for the three signals; they stay installed while this lives and after.
pub struct Watch {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Watch {
    /// Install the handlers (inside a tokio runtime with signals enabled).
    pub fn new() -> std::io::Result<Watch> {
        Ok(Watch {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal that arrives.
    pub async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::Interrupt,
            _ = self.term.recv() => Signal::Terminate,
            _ = self.hup.recv() => Signal::Hangup,
        }
    }
}

/// Run `work` to its end, unless a signal arrives after `armed` was notified (the op is being
/// sent): then `work` is dropped and the signal returned. `on_arm` runs once at that point
/// (the CLI starts its spinner there). When the handlers cannot be installed, `work` just
/// runs on with the default actions.
pub async fn interruptible<F: Future>(
    work: F,
    armed: &tokio::sync::Notify,
    on_arm: impl FnOnce(),
) -> Result<F::Output, Signal> {
    tokio::pin!(work);
    tokio::select! {
        biased;
        out = &mut work => return Ok(out),
        () = armed.notified() => {}
    }
    on_arm();
    let Ok(mut watch) = Watch::new() else {
        return Ok(work.await);
    };
    tokio::select! {
        biased;
        out = &mut work => Ok(out),
        sig = watch.next() => Err(sig),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_that_ends_is_its_result_and_signals_before_arming_are_not_watched() {
        let armed = tokio::sync::Notify::new();
        let mut called = false;
        let r = interruptible(async { 5 }, &armed, || called = true).await;
        assert_eq!(r, Ok(5));
        assert!(!called, "never armed");
        let r = interruptible(
            async {
                armed.notify_one();
                tokio::task::yield_now().await;
                7
            },
            &armed,
            || called = true,
        )
        .await;
        assert_eq!(r, Ok(7));
        assert!(called);
    }

    #[test]
    fn names() {
        assert_eq!(Signal::Terminate.name(), "SIGTERM");
        assert_eq!(Signal::Interrupt.name(), "SIGINT");
        assert_eq!(Signal::Hangup.name(), "SIGHUP");
    }
}
