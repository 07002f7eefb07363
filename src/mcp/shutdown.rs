//! `pxagent mcp` on SIGTERM, SIGINT or SIGHUP (what MCP hosts send when
//! they shut down): stop taking tool calls, give the calls in flight [`GRACE`] to finish
//! (their results are sent and audited as usual), then end with exit 0. A call still running
//! then is dropped with the runtime, and its audit trail's guard
//! ([`crate::engine::Begun`]) writes an `interrupted` completion naming what was sent, so
//! every command the server sent has a record. A panic inside a call is caught here too: the
//! call answers with an internal error and is audited (exit 10), and the session goes on.
//!
//! Hooked in by wrapping the handler ([`Draining`], at rmcp's `Service` level, so every
//! request kind the handler serves passes through unchanged) and by [`serve`] instead of
//! `waiting()`; nothing in the handler itself knows about signals.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::model::{ClientRequest, ServerResult};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ErrorData, RoleServer, Service};

use super::Server;
use crate::base::error::{Error, Result};

/// How long calls in flight may still run after a signal.
pub const GRACE: Duration = Duration::from_secs(5);

/// The server with shutdown and panic handling around its tool calls.
pub struct Draining {
    inner: Server,
    state: Arc<State>,
}

/// What the wrapper and [`serve`] share.
#[derive(Default)]
struct State {
    /// Set once a signal came: new tool calls are refused.
    draining: AtomicBool,
    /// Tool calls running now.
    inflight: AtomicUsize,
    /// Notified when `inflight` drops to 0.
    idle: tokio::sync::Notify,
}

/// Counts one call in flight while it lives.
struct InFlight(Arc<State>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Draining {
    /// Wrap a server.
    pub fn new(inner: Server) -> Draining {
        Draining {
            inner,
            state: Arc::default(),
        }
    }

    /// A tool call: refused once draining, counted while it runs, and a panic in it caught.
    async fn call(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
        tool: String,
    ) -> std::result::Result<ServerResult, ErrorData> {
        if self.state.draining.load(Ordering::SeqCst) {
            return Err(ErrorData::internal_error(
                "pxagent mcp is shutting down: this call was not run and nothing was sent",
                None,
            ));
        }
        self.state.inflight.fetch_add(1, Ordering::SeqCst);
        let _counted = InFlight(self.state.clone());
        match CatchUnwind(Box::pin(self.inner.handle_request(request, context))).await {
            Ok(r) => r,
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                let err = Error::Internal(format!(
                    "pxagent panicked in {} ({}); this is a bug: please report it",
                    crate::base::text::printable(&tool),
                    crate::base::text::printable(&what)
                ));
                tracing::error!(target: "pxagent::mcp", "{err}");
                let op = crate::catalog::OPS
                    .iter()
                    .find(|o| o.tool_name() == tool)
                    .map_or("mcp", |o| o.id);
                let trail = crate::engine::Trail {
                    audited: true,
                    host: Some(self.inner.host.clone()),
                    account: Some(self.inner.account.clone()),
                    via: crate::audit::Via::Mcp,
                    ..Default::default()
                };
                trail.record(op, crate::audit::Via::Mcp, Some(&err), 10, Duration::ZERO);
                Err(ErrorData::internal_error(err.to_string(), None))
            }
        }
    }
}

impl Service<RoleServer> for Draining {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<ServerResult, ErrorData> {
        match &request {
            ClientRequest::CallToolRequest(r) => {
                let tool = r.params.name.to_string();
                self.call(request, context, tool).await
            }
            _ => self.inner.handle_request(request, context).await,
        }
    }

    async fn handle_notification(
        &self,
        notification: rmcp::model::ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.inner.handle_notification(notification, context).await
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        Service::<RoleServer>::get_info(&self.inner)
    }

    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        Service::<RoleServer>::supported_protocol_versions(&self.inner)
    }
}

/// A future whose panic comes back as `Err` (the payload) instead of unwinding further.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

/// Wait for the session to end (the client closed stdin) and its calls in flight to finish,
/// or for a signal: then refuse new calls, wait up to [`GRACE`] for the calls in flight, and
/// return. Either way the caller
/// exits 0; calls still running are dropped with the runtime (see the module doc).
pub async fn serve(service: RunningService<RoleServer, Draining>) -> Result<u8> {
    let state = service.service().state.clone();
    let mut watch = crate::base::signals::Watch::new()
        .map_err(|e| Error::Internal(format!("cannot watch for signals: {e}")))?;
    let waiting = service.waiting();
    tokio::pin!(waiting);
    let idle = |state: Arc<State>| async move {
        loop {
            let notified = state.idle.notified();
            if state.inflight.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    };
    let sig = tokio::select! {
        ended = &mut waiting => {
            match ended {
                Ok(reason) => tracing::info!(target: "pxagent::mcp", "session ended ({reason:?})"),
                Err(e) => return Err(Error::Internal(format!("MCP session failed: {e}"))),
            }
            // The client closed stdin without cancelling anything: the calls in flight run
            // to their end (a Proxmox task is not stopped because the client left) and write
            // their audit records; a signal meanwhile still ends them.
            tokio::select! {
                () = idle(state.clone()) => return Ok(0),
                sig = watch.next() => sig,
            }
        }
        sig = watch.next() => sig,
    };
    state.draining.store(true, Ordering::SeqCst);
    let running = state.inflight.load(Ordering::SeqCst);
    crate::output::note(format!(
        "pxagent mcp: {}: taking no more calls; waiting up to {} s for {running} call(s) in flight",
        sig.name(),
        GRACE.as_secs()
    ));
    let left = match tokio::time::timeout(GRACE, idle(state.clone())).await {
        Ok(()) => 0,
        Err(_) => state.inflight.load(Ordering::SeqCst),
    };
    if left > 0 {
        crate::output::note(format!(
            "pxagent mcp: {left} call(s) still running after {} s: stopping; each is audited as interrupted",
            GRACE.as_secs()
        ));
    }
    Ok(0)
}

/// End the runtime without waiting for stdin's blocking reader: the calls still in flight are
/// dropped here (writing their `interrupted` records), then the process may exit.
pub fn shut_down(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(Duration::from_millis(200));
}
