//! What a cancelled call leaves behind: its command on the host is ended, a task it still
//! started is stopped, and the calls still running when the session ends are waited for.
//!
//! When the client cancels a call (`notifications/cancelled`), rmcp drops the call's answer,
//! and the server drops the call itself. Its command in flight on the host is then ended by
//! the SSH layer ([`crate::ssh::Session`]'s guard on a running channel): SIGTERM through sshd,
//! SIGKILL after a grace, then the channel's close, which on a gated host makes the gate end
//! sudo (sshd passes no signal to a forced command). sudo relays SIGTERM to the Proxmox tool,
//! which passes it to its worker (pve-common `RESTEnvironment.pm` `$tee_worker`): a tool that
//! had not forked its worker yet (a slow host, a hung tool) ends having started nothing, and a
//! task already running ends interrupted.
//!
//! A task may still be left running (a tool that ignores the signal, a worker that outlives
//! it), so the node's task list is read for the call's task: a task of the call's node and
//! guest that was not in the list the engine read just before sending
//! ([`crate::engine::Started`]). It is looked for for as long as the call could still
//! produce one: until the command reported its end (its exit status after the signals: the
//! tool is gone, and a worker it had forked is listed by then), or — when only its channel's
//! close is known, as on a gated host, where sshd signals nothing — [`AFTER_END`] past that
//! close, which covers the gate's own grace before it kills sudo; when neither comes (a
//! connection that no longer answers), until the call's own timeout.
//! Exactly one such task still running is the call's and is stopped with `task.stop` on its
//! node (its own audit record); with several, nothing is stopped, and the audit record says
//! which. A task that ended by itself (interrupted by the signal) is named with its end.
//!
//! A read and a call that changes state without a task are ended the same way; a command
//! inside a VM keeps running in the guest (the guest agent cannot kill a process), but one that
//! had not been handed to the agent yet never starts. When the session ends instead (the client
//! closed stdin), calls are not cancelled: the server waits for them (`shutdown::serve`), so
//! each finishes and writes its audit record.

use std::time::Duration;

use serde_json::Value;

use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::ops;
use crate::engine::{Engine, Started, Trail, task_filter};
use crate::ssh::Settled;

use super::*;

/// The pause between two looks at the task list for a cancelled call's task: every look is a
/// `pvesh get /nodes/N/tasks` on the host, so the pause grows from the first to the last (by
/// half each time) while the task does not appear.
const LOOK_FIRST: Duration = Duration::from_millis(500);
const LOOK_MAX: Duration = Duration::from_secs(2);
/// How long a task is still looked for after the command's channel closed: the gate gives
/// sudo this long after SIGTERM before SIGKILL (`host/gate/child.rs`), and a last look.
const AFTER_END: Duration = Duration::from_secs(3);
/// How long the command's end is waited for before the looking goes on without it: the SSH
/// layer's SIGTERM grace, SIGKILL and the close.
const END_SEEN_WITHIN: Duration = crate::ssh::SETTLE_WITHIN;
/// Looking goes on this long past the call's own timeout when the end was never seen.
const PAST_TIMEOUT: Duration = Duration::from_secs(5);
/// Looks in a row that may fail (a host that answers slowly or not at all once) before the
/// task is given up on.
const FAILED_LOOKS: u32 = 3;
/// How long the call is given to end after its task was stopped.
const END_WITHIN: Duration = Duration::from_secs(30);

/// What stopping a cancelled call came to, for its audit record.
#[derive(Debug)]
pub(super) struct Stopped {
    /// The task that was the call's, if one was found.
    pub upid: Option<String>,
    /// What happened, one sentence.
    pub what: String,
}

/// A new task of the call's node and guest, as the task list shows it.
struct NewTask {
    upid: String,
    /// `None` while it runs; how it ended otherwise.
    end: Option<String>,
}

impl Server {
    /// After a cancelled call was dropped (which ends its command on the host), find a task it
    /// still started and stop it. `sent`: the call had written its started record, so its
    /// command may have gone out.
    pub(super) async fn stop_started(
        &self,
        inv: &Invocation,
        started: &std::sync::Mutex<Started>,
        sent: bool,
    ) -> Stopped {
        let snapshot = started.lock().expect("started lock").clone();
        if !sent {
            let what = "nothing that changes state had been sent yet".to_string();
            return Stopped { upid: None, what };
        }
        let remote = self.link.current().await;
        let settle = async {
            match &remote {
                Some(r) => r.session.settled(END_SEEN_WITHIN).await,
                None => Settled::Exited,
            }
        };
        let prepared = match snapshot.sent.clone() {
            Some(p) if inv.op.runs_task() => p,
            _ => {
                let what = if settle.await != Settled::Pending {
                    format!(
                        "its command `{}` on the host was ended (SIGTERM, then SIGKILL and the channel's close){}",
                        inv.display(),
                        if inv.op.id == ops::VM_EXEC.id {
                            "; a command already handed to the guest agent runs on in the guest"
                        } else {
                            ""
                        }
                    )
                } else {
                    format!(
                        "its command `{}` on the host was signalled, but its end was not seen within {}s",
                        inv.display(),
                        END_SEEN_WITHIN.as_secs()
                    )
                };
                return Stopped { upid: None, what };
            }
        };
        let found = self.look_for_task(&prepared, &snapshot, settle).await;
        let (upid, seen) = match found {
            Ok(Found::Running(upid, seen)) => (upid, seen),
            Ok(Found::Ended(t)) => {
                let what = format!(
                    "its command was ended on the host; its task {} ended: {}",
                    t.upid,
                    t.end.as_deref().unwrap_or("?")
                );
                return Stopped {
                    upid: Some(t.upid),
                    what,
                };
            }
            Ok(Found::None) => {
                let what = "its command was ended on the host before it started a task: nothing was started".to_string();
                return Stopped { upid: None, what };
            }
            Err(what) => return Stopped { upid: None, what },
        };
        let call = CallLink::new(&self.link);
        let stop = self.stop_task(&upid).await;
        let end = match tokio::time::timeout(END_WITHIN, self.task_end(&call, &upid)).await {
            Ok(Some(e)) => format!("; the task ended: {e}"),
            _ => String::new(),
        };
        let what = match stop {
            Ok(()) => format!("its task {upid} was stopped (task.stop; {seen}){end}"),
            Err(e) => format!("stopping its task {upid} failed ({seen}): {e}{end}"),
        };
        Stopped {
            upid: Some(upid),
            what,
        }
    }

    /// Look for the cancelled call's task while its command is being ended, and [`AFTER_END`]
    /// after its end was seen (or, when it is not seen, until the call's timeout).
    async fn look_for_task(
        &self,
        prepared: &Invocation,
        snapshot: &Started,
        settle: impl Future<Output = Settled>,
    ) -> std::result::Result<Found, String> {
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
        let mut settle = std::pin::pin!(settle);
        let mut ended_at: Option<tokio::time::Instant> = None;
        let mut unseen = false;
        let mut pause = LOOK_FIRST;
        let mut failed = 0;
        let mut after_end = AFTER_END;
        // Whether the end is still unknown, and how long to look on once it is known.
        let note =
            |seen: Settled, ended_at: &mut Option<tokio::time::Instant>| match look_on_for(seen) {
                None => (true, AFTER_END),
                Some(d) => {
                    *ended_at = Some(tokio::time::Instant::now());
                    (false, d)
                }
            };
        // The first look waits for the command's end (or a first pause): a task its signal
        // ends is not stopped a second time.
        tokio::select! {
            seen = &mut settle => (unseen, after_end) = note(seen, &mut ended_at),
            () = tokio::time::sleep(LOOK_FIRST) => {}
        }
        if unseen && timeout.is_none() {
            return Err(format!(
                "its command was signalled, but its end was not seen within {}s and it has no timeout: nothing was stopped",
                END_SEEN_WITHIN.as_secs()
            ));
        }
        loop {
            match self.new_tasks(&call, prepared, &snapshot.before).await {
                Ok(list) => {
                    failed = 0;
                    let running: Vec<&NewTask> = list.iter().filter(|t| t.end.is_none()).collect();
                    match running.as_slice() {
                        [one] => {
                            let seen = format!(
                                "found running in {node}'s task list {:.1} s after the command was sent",
                                sent_at.elapsed().as_secs_f64()
                            );
                            return Ok(Found::Running(one.upid.clone(), seen));
                        }
                        [] => {}
                        many => {
                            return Err(format!(
                                "{} new tasks run for it ({}): none was stopped, as pxagent cannot tell which is the call's",
                                many.len(),
                                many.iter()
                                    .map(|t| t.upid.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ));
                        }
                    }
                    if let Some(at) = ended_at
                        && at.elapsed() >= after_end
                    {
                        return Ok(match list.into_iter().next() {
                            Some(t) => Found::Ended(t),
                            None => Found::None,
                        });
                    }
                }
                Err(e) => {
                    failed += 1;
                    if failed >= FAILED_LOOKS {
                        return Err(format!(
                            "the task list could not be read ({e}): nothing was stopped"
                        ));
                    }
                }
            }
            if unseen
                && let Some(t) = timeout
                && sent_at.elapsed() + pause > t + PAST_TIMEOUT
            {
                return Err(format!(
                    "its command's end was not seen, and no task of it ran in {node}'s task list within the call's timeout ({}s): nothing was stopped",
                    t.as_secs()
                ));
            }
            tokio::select! {
                seen = &mut settle, if ended_at.is_none() && !unseen => {
                    (unseen, after_end) = note(seen, &mut ended_at);
                    if !unseen {
                        pause = LOOK_FIRST;
                    } else {
                        if timeout.is_none() {
                            return Err(format!(
                                "its command was signalled, but its end was not seen within {}s and it has no timeout: nothing was stopped",
                                END_SEEN_WITHIN.as_secs()
                            ));
                        }
                    }
                }
                () = tokio::time::sleep(pause) => {
                    pause = (pause * 3 / 2).min(LOOK_MAX);
                }
            }
        }
    }

    /// The tasks of the call's node (and guest) that were not listed before it sent its
    /// command, newest first.
    async fn new_tasks(
        &self,
        call: &CallLink<'_>,
        prepared: &Invocation,
        before: &[String],
    ) -> Result<Vec<NewTask>> {
        let remote = crate::engine::Connector::remote(call).await?;
        let list = remote
            .read_op(&ops::TASK_LIST, &task_filter(prepared))
            .await?;
        // A running task shows `"status":"RUNNING"` and no `endtime` (FORMATS.md §2.12).
        Ok(list
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let upid = t.get("upid").and_then(Value::as_str)?.to_string();
                if before.contains(&upid) {
                    return None;
                }
                let runs = t.get("endtime").is_none()
                    || t.get("status").and_then(Value::as_str) == Some("RUNNING");
                let end = (!runs).then(|| {
                    t.get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("ended")
                        .to_string()
                });
                Some(NewTask { upid, end })
            })
            .collect())
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
            taint: None,
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

/// How long a task is still looked for once the command's end is known: nothing when it
/// reported its end (its tool, which passes the signal on to its worker, is gone), the gate's
/// grace when only its channel's close is known; `None` while it is not known.
fn look_on_for(seen: Settled) -> Option<Duration> {
    match seen {
        Settled::Exited => Some(Duration::ZERO),
        Settled::Closed => Some(AFTER_END),
        Settled::Pending => None,
    }
}

/// What the task list showed of a cancelled call's task.
enum Found {
    /// It runs: stop it (with when it was seen).
    Running(String, String),
    /// It ended by itself (the signal ended it).
    Ended(NewTask),
    /// None appeared.
    None,
}
