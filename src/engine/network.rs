//! `network apply`: a change the host reverts by itself unless pxagent proves, over a new SSH
//! connection, that it can still reach the host.
//!
//! The order is that of every confirm op (policy, the connected-node check, the phrase, the
//! rate limit), then one command: the helper's `net-arm WINDOW`, which keeps a copy of the
//! running configuration, schedules its return, applies the pending change and prints a token.
//! Then pxagent opens a **second** connection (a new TCP connection, key exchange and login,
//! as a new client would after the change) and sends `net-confirm TOKEN` there
//! ([`crate::catalog::Op::confirms_with`]). Only the helper's answer to that keeps the change.
//! When the second connection cannot be made or the confirm fails, pxagent says so (exit 5)
//! with the time the host reverts at; it never retries the apply.

use std::time::Duration;

use serde_json::Value;

use super::{Connector, Done, Engine, Trail};
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;

/// The longest pxagent waits for the second connection and its confirm: at most half the
/// window, so that a slow confirm still lands well before the host reverts.
fn confirm_budget(window: u64) -> Duration {
    Duration::from_secs((window / 2).clamp(10, 60))
}

impl<C: Connector> Engine<'_, C> {
    /// Run an op that arms a revert and confirms it over a new connection (see the module doc).
    pub async fn armed_change(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
    ) -> Result<Done> {
        let confirm_op = inv
            .op
            .confirms_with
            .ok_or_else(|| Error::Internal(format!("{} confirms nothing", inv.op.id)))?;
        let inv = match self.admit(inv, given, trail).await? {
            super::Admit::Run { inv, .. } => inv,
            super::Admit::Unchanged(unchanged) => {
                return Ok(Done {
                    data: unchanged,
                    warnings: Vec::new(),
                });
            }
        };
        let remote = self.connector.remote().await?;
        let mut prepared = remote.prepare(&inv).await?;
        prepared.attach.confirmed = trail.phrase.clone().or_else(|| given.map(str::to_string));
        trail.argv = prepared.remote_argv();
        trail.begin(inv.op)?;
        // A gated host that wants the phrase refuses before anything runs; then it goes once
        // more in the envelope. A second arm would be refused anyway (one at a time).
        let out = remote.exec_admitted(&prepared, &mut |_| {}).await?;
        super::upload::helper_answer(&out, &prepared, &remote.target, "the network change")?;
        let armed: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            Error::Remote(format!(
                "the host's helper armed the network change on {} but printed no JSON ({e}); it reverts by itself",
                remote.target
            ))
        })?;
        let field = |k: &str| armed.get(k).cloned().unwrap_or(Value::Null);
        let token = armed.get("token").and_then(Value::as_str).unwrap_or("");
        let deadline = armed.get("deadline").and_then(Value::as_u64).unwrap_or(0);
        let window = armed.get("seconds").and_then(Value::as_u64).unwrap_or(60);
        let node = prepared.values.get("node").cloned().unwrap_or_default();
        let reverts_at = crate::base::time::format_rfc3339(deadline);
        let confirm = Invocation::new(confirm_op, [("token", token.to_string())].into())?;
        let proof = tokio::time::timeout(confirm_budget(window), async {
            let fresh = self.connector.fresh().await?;
            let out = fresh.exec_admitted(&confirm, &mut |_| {}).await?;
            fresh.session.clone().close().await;
            super::upload::helper_answer(&out, &confirm, &fresh.target, "the confirm")
        })
        .await;
        let why = match proof {
            Ok(Ok(())) => {
                let upid = field("upid")
                    .as_str()
                    .filter(|u| !u.is_empty())
                    .map(String::from);
                return Ok(Done {
                    data: crate::views::value(&crate::views::AppliedResult {
                        changed: true,
                        message: format!(
                            "the network change on {node} is applied and kept: pxagent reached the host again over a new connection"
                        ),
                        node,
                        confirmed: true,
                        upid,
                        window,
                    }),
                    warnings: Vec::new(),
                });
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!(
                "no new connection and confirm within {} s",
                confirm_budget(window).as_secs()
            ),
        };
        Err(Error::Remote(format!(
            "the network change on {node} was applied, but pxagent could not prove it can still reach the host ({why}): the host puts the previous configuration back by itself at {reverts_at}"
        )))
    }
}
