//! What a cancelled call leaves behind: the Proxmox task it started is stopped, and the
//! calls still running when the session ends are waited for.
//!
//! When the client cancels a call (`notifications/cancelled`), rmcp drops the call's answer;
//! what the call sent keeps running on the host unless pxagent stops it. pvesh runs a task
//! synchronously and prints its UPID only at the end (FORMATS.md §1.3), and dropping the
//! SSH channel does not end a task Proxmox's daemons already run, so the task is found in
//! the node's task list: a running task of the call's node and guest that was not in the
//! list the engine read just before sending ([`crate::engine::Started`]). Exactly one such
//! task is the call's and is stopped with `task.stop` on its node (its own audit record);
//! with none or several, nothing is stopped and the audit record says so. The call itself
//! is then awaited (bounded) so that its record carries the task's end.
//!
//! A read, a call that changes state without a task, and a command inside a guest are
//! simply dropped (the guest agent cannot kill a process either). When the session ends
//! instead (the client closed stdin), calls are not cancelled: the server waits for them
//! (`shutdown::serve`), so each finishes and writes its audit record.

use std::time::Duration;

use serde_json::Value;

use crate::catalog::ops;
use crate::engine::{Engine, Started, Trail, task_filter, task_upids};
use crate::error::{Error, Result};
use crate::invocation::Invocation;

use super::*;

/// How long a cancelled call's task is looked for (it may not be in the task list yet) and
/// how long the call is then given to end after its task was stopped.
const FIND_FOR: Duration = Duration::from_secs(5);
const END_WITHIN: Duration = Duration::from_secs(30);

/// What stopping a cancelled call's task came to, for its audit record.
#[derive(Debug)]
pub(super) struct Stopped {
    /// The task that was the call's, if it was found.
    pub upid: Option<String>,
    /// What happened, one sentence.
    pub what: String,
}

impl Server {
    /// Find the task a cancelled call started and stop it. `work` is the call itself, still
    /// running: it is polled meanwhile, and awaited (at most [`END_WITHIN`]) once the task
    /// was stopped. Returns the call's own outcome, if it ended, and what was stopped.
    pub(super) async fn stop_started<F>(
        &self,
        inv: &Invocation,
        started: &std::sync::Mutex<Started>,
        mut work: std::pin::Pin<&mut F>,
    ) -> (Option<Result<crate::engine::Done>>, Stopped)
    where
        F: Future<Output = Result<crate::engine::Done>>,
    {
        let snapshot = started.lock().expect("started lock").clone();
        let Some(prepared) = snapshot.sent.clone().filter(|_| inv.op.runs_task()) else {
            let what = if snapshot.sent.is_some() {
                format!(
                    "`{}` starts no Proxmox task: nothing to stop",
                    inv.display()
                )
            } else {
                "nothing that changes state had been sent yet".to_string()
            };
            return (None, Stopped { upid: None, what });
        };
        let call = CallLink::new(&self.link);
        let deadline = tokio::time::Instant::now() + FIND_FOR;
        // Look for the task while the call goes on; it may end by itself meanwhile.
        let found = loop {
            let look = self.new_running_task(&call, &prepared, &snapshot.before);
            tokio::select! {
                r = &mut work => {
                    let what = "the call ended before its task was stopped".to_string();
                    return (Some(r), Stopped { upid: None, what });
                }
                found = look => match found {
                    Ok(list) if list.len() == 1 => break Ok(list[0].clone()),
                    Ok(list) if !list.is_empty() => break Err(format!(
                        "{} new tasks run for it ({}): none was stopped, as pxagent cannot tell which is the call's",
                        list.len(),
                        list.join(", ")
                    )),
                    Ok(_) if tokio::time::Instant::now() < deadline => {
                        tokio::select! {
                            r = &mut work => {
                                let what = "the call ended before its task was found".to_string();
                                return (Some(r), Stopped { upid: None, what });
                            }
                            () = tokio::time::sleep(Duration::from_millis(500)) => {}
                        }
                    }
                    Ok(_) => break Err(format!(
                        "no new running task appeared in {}'s task list within {}s: nothing was stopped",
                        prepared.values.get("node").map(String::as_str).unwrap_or("?"),
                        FIND_FOR.as_secs()
                    )),
                    Err(e) => break Err(format!("the task list could not be read ({e}): nothing was stopped")),
                },
            }
        };
        let upid = match found {
            Ok(u) => u,
            Err(what) => return (None, Stopped { upid: None, what }),
        };
        let stop = self.stop_task(&upid).await;
        let ended = tokio::time::timeout(END_WITHIN, &mut work).await.ok();
        let end = match self.task_end(&call, &upid).await {
            Some(e) => format!("; the task ended: {e}"),
            None => String::new(),
        };
        let what = match stop {
            Ok(()) => format!("its task {upid} was stopped (task.stop){end}"),
            Err(e) => format!("stopping its task {upid} failed: {e}{end}"),
        };
        (
            ended,
            Stopped {
                upid: Some(upid),
                what,
            },
        )
    }

    /// The running tasks of the call's node (and guest) that were not listed before it sent
    /// its command.
    async fn new_running_task(
        &self,
        call: &CallLink<'_>,
        prepared: &Invocation,
        before: &[String],
    ) -> Result<Vec<String>> {
        let remote = crate::engine::Connector::remote(call).await?;
        let list = remote
            .read_op(&ops::TASK_LIST, &task_filter(prepared))
            .await?;
        // A running task shows `"status":"RUNNING"` and no `endtime` (FORMATS.md §2.12).
        let running: Vec<String> = task_upids(&Value::Array(
            list.as_array()
                .into_iter()
                .flatten()
                .filter(|t| {
                    t.get("endtime").is_none()
                        || t.get("status").and_then(Value::as_str) == Some("RUNNING")
                })
                .cloned()
                .collect(),
        ))
        .into_iter()
        .filter(|u| !before.contains(u))
        .collect();
        Ok(running)
    }

    /// Stop a task through the engine (policy, the host's gate) as `task.stop`, with its own
    /// audit record.
    async fn stop_task(&self, upid: &str) -> Result<()> {
        let started = std::time::Instant::now();
        let raw = [("upid", upid.to_string())].into_iter().collect();
        let inv = Invocation::new(&ops::TASK_STOP, raw)?;
        let mut trail = Trail {
            audited: true,
            host: Some(self.host.clone()),
            account: Some(self.account.clone()),
            upid: Some(upid.to_string()),
            ..Trail::default()
        };
        let call = CallLink::new(&self.link);
        let engine = Engine {
            policy: &self.policy,
            connector: &call,
            interactive: false,
        };
        let r = engine.execute(&inv, None, &mut trail, &mut |_| {}).await;
        let err = r.as_ref().err();
        trail.record(
            inv.op.id,
            crate::audit::Via::Mcp,
            err,
            err.map_or(0, Error::exit_code),
            started.elapsed(),
        );
        if let (Some(Error::Connection(_)), Some((g, _))) = (err, call.used()) {
            self.link.discard(g).await;
        }
        r.map(|_| ())
    }

    /// How a task ended (`OK`, `interrupted by signal` …), when it has.
    async fn task_end(&self, call: &CallLink<'_>, upid: &str) -> Option<String> {
        let remote = crate::engine::Connector::remote(call).await.ok()?;
        let st = remote
            .read_op(&ops::TASK_STATUS, &[("upid", upid)])
            .await
            .ok()?;
        match st.get("status").and_then(Value::as_str) {
            Some("stopped") => st
                .get("exitstatus")
                .and_then(Value::as_str)
                .map(String::from),
            _ => Some("still running".to_string()),
        }
    }
}
