//! What a cancelled call leaves behind: the Proxmox task it started is stopped, and the
//! calls still running when the session ends are waited for.
//!
//! When the client cancels a call (`notifications/cancelled`), rmcp drops the call's answer;
//! what the call sent keeps running on the host unless pxagent stops it. pvesh runs a task
//! synchronously and prints its UPID only at the end (FORMATS.md §1.3), and dropping the
//! SSH channel does not end a task Proxmox's daemons already run, so the task is found in
//! the node's task list: a running task of the call's node and guest that was not in the
//! list the engine read just before sending ([`crate::engine::Started`]). On a slow host the
//! task appears only a while after the command was sent (the tool does its checks before it
//! forks its worker), so it is looked for as long as the call still runs on the host — its
//! command ends when its task does — and never past the call's own timeout (`--timeout`;
//! without one, the call waits for its task however long it runs), after which the host's
//! command is ended anyway. Exactly one such task is the call's and is stopped with
//! `task.stop` on its node (its own audit record); with several, or when the call ends or its
//! timeout passes before one appears, nothing is stopped, and the audit record says which.
//! The call itself is then awaited (bounded) so that its record carries the task's end.
//!
//! A read, a call that changes state without a task, and a command inside a guest are
//! simply dropped (the guest agent cannot kill a process either). When the session ends
//! instead (the client closed stdin), calls are not cancelled: the server waits for them
//! (`shutdown::serve`), so each finishes and writes its audit record.

use std::time::Duration;

use serde_json::Value;

use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::ops;
use crate::engine::{Engine, Started, Trail, task_filter, task_upids};

use super::*;

/// The pause between two looks at the task list for a cancelled call's task: every look is a
/// `pvesh get /nodes/N/tasks` on the host, so the pause grows from the first to the last (by
/// half each time) while the task does not appear.
const LOOK_FIRST: Duration = Duration::from_millis(500);
const LOOK_MAX: Duration = Duration::from_secs(2);
/// Looking goes on this long past the call's own timeout: the host's command is ended then
/// (SIGTERM, then SIGKILL), and a task that started just before is still stopped.
const PAST_TIMEOUT: Duration = Duration::from_secs(5);
/// Looks in a row that may fail (a host that answers slowly or not at all once) before the
/// task is given up on.
const FAILED_LOOKS: u32 = 3;
/// What became of a call that ended on the host while its task was looked for.
const ENDED_FIRST: &str =
    "the call ended on the host before its task was found running: nothing was stopped";
/// How long the call is given to end after its task was stopped.
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
    /// running: it is polled meanwhile (the task is looked for until it ends, or at most until
    /// [`PAST_TIMEOUT`] after its own timeout), and awaited (at most [`END_WITHIN`]) once the
    /// task was stopped. Returns the call's own outcome, if it ended, and what was stopped.
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
        let node = prepared
            .values
            .get("node")
            .map(String::as_str)
            .unwrap_or("?");
        let sent_at = snapshot
            .sent_at
            .map_or_else(tokio::time::Instant::now, tokio::time::Instant::from_std);
        let timeout = self.link.target.command_timeout;
        let deadline = timeout.map(|t| sent_at + t + PAST_TIMEOUT);
        let mut pause = LOOK_FIRST;
        let mut failed = 0;
        // Look for the task while the call goes on; it may end by itself meanwhile.
        let found = loop {
            let look = self.new_running_task(&call, &prepared, &snapshot.before);
            let looked = tokio::select! {
                r = &mut work => return (Some(r), Stopped { upid: None, what: ENDED_FIRST.into() }),
                looked = look => looked,
            };
            match looked {
                Ok(list) if list.len() == 1 => break Ok(list[0].clone()),
                Ok(list) if !list.is_empty() => {
                    break Err(format!(
                        "{} new tasks run for it ({}): none was stopped, as pxagent cannot tell which is the call's",
                        list.len(),
                        list.join(", ")
                    ));
                }
                Ok(_) => failed = 0,
                Err(e) => {
                    failed += 1;
                    if failed >= FAILED_LOOKS {
                        break Err(format!(
                            "the task list could not be read ({e}): nothing was stopped"
                        ));
                    }
                }
            }
            if let (Some(d), Some(t)) = (deadline, timeout)
                && tokio::time::Instant::now() + pause > d
            {
                break Err(format!(
                    "no new running task appeared in {node}'s task list within the call's timeout ({}s): nothing was stopped",
                    t.as_secs()
                ));
            }
            tokio::select! {
                r = &mut work => return (Some(r), Stopped { upid: None, what: ENDED_FIRST.into() }),
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 3 / 2).min(LOOK_MAX);
        };
        let upid = match found {
            Ok(u) => u,
            Err(what) => return (None, Stopped { upid: None, what }),
        };
        let found_at = tokio::time::Instant::now();
        let stop = self.stop_task(&upid).await;
        let ended = tokio::time::timeout(END_WITHIN, &mut work).await.ok();
        let end = match self.task_end(&call, &upid).await {
            Some(e) => format!("; the task ended: {e}"),
            None => String::new(),
        };
        let seen = format!(
            "found in {node}'s task list {:.1} s after the command was sent",
            found_at.duration_since(sent_at).as_secs_f64()
        );
        let what = match stop {
            Ok(()) => format!("its task {upid} was stopped (task.stop; {seen}){end}"),
            Err(e) => format!("stopping its task {upid} failed ({seen}): {e}{end}"),
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
        // The engine sets the UPID a call's own task printed (a stop prints none): the
        // record names the task that was stopped instead.
        trail.upid = Some(upid.to_string());
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
