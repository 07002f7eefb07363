//! The session's one SSH connection: opened on the first call that needs the host, shared
//! by concurrent calls, dropped after a connection error so that the next call opens a fresh
//! one. Uses the transport and the engine's [`Connector`] seam.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::base::error::Result;
use crate::engine::Connector;
use crate::remote::Remote;
use crate::ssh::{Session, Target};

/// The session's one SSH connection: opened on first use, replaced after a connection error.
pub struct Link {
    pub(super) target: Target,
    pub(super) current: tokio::sync::Mutex<Option<(u64, Remote)>>,
    pub(super) generation: AtomicU64,
}

impl Link {
    pub(super) fn new(target: Target) -> Link {
        Link {
            target,
            current: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
        }
    }

    /// The open connection, or a new one; the bool says whether this call opened it.
    pub(super) async fn get(&self) -> Result<(u64, Remote, bool)> {
        // Held while connecting, so concurrent first calls share one connection.
        let mut current = self.current.lock().await;
        if let Some((generation, remote)) = &*current {
            return Ok((*generation, remote.clone(), false));
        }
        let session = Session::connect(&self.target).await?;
        if let Some(note) = session.recorded_host_key() {
            crate::output::write_stderr(&format!("pxagent mcp: {note}\n"));
        }
        let remote = Remote::new(session, self.target.display(), self.target.command_timeout);
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *current = Some((generation, remote.clone()));
        Ok((generation, remote, true))
    }

    /// Forget connection `generation` after a call on it failed with a connection error, so
    /// the next call opens a new one. A newer connection (another call already replaced it)
    /// is kept. Calls still running on the old one keep their clone until they end.
    pub(super) async fn discard(&self, generation: u64) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|(g, _)| *g == generation)
            && let Some((_, old)) = current.take()
        {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), old.session.close()).await;
            });
        }
    }

    /// The open connection, if there is one (nothing is opened).
    pub(super) async fn current(&self) -> Option<Remote> {
        self.current.lock().await.as_ref().map(|(_, r)| r.clone())
    }

    pub(super) async fn close(&self) {
        if let Some((_, remote)) = self.current.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), remote.session.close()).await;
        }
    }
}

/// The [`Connector`] of one call: remembers which connection the call used.
pub(super) struct CallLink<'a> {
    pub(super) link: &'a Link,
    pub(super) used: std::sync::Mutex<Option<(u64, bool)>>,
}

impl<'a> CallLink<'a> {
    pub(super) fn new(link: &'a Link) -> CallLink<'a> {
        CallLink {
            link,
            used: std::sync::Mutex::new(None),
        }
    }

    /// The connection this call used and whether the call opened it itself.
    pub(super) fn used(&self) -> Option<(u64, bool)> {
        *self.used.lock().expect("call link lock")
    }
}

impl Connector for CallLink<'_> {
    async fn fresh(&self) -> Result<Remote> {
        let session = Session::connect(&self.link.target).await?;
        Ok(Remote::new(
            session,
            self.link.target.display(),
            self.link.target.command_timeout,
        ))
    }

    async fn remote(&self) -> Result<Remote> {
        let (generation, remote, fresh) = self.link.get().await?;
        let mut used = self.used.lock().expect("call link lock");
        // The engine may ask more than once; the first answer says whether it was fresh.
        if used.is_none_or(|(g, _)| g != generation) {
            *used = Some((generation, fresh));
        }
        Ok(remote)
    }
}
