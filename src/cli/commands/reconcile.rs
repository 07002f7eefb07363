//! `pxagent reconcile SEQ`: find out what became of a change whose result never arrived
//! (exit 11, `outcome_unknown`, or a client killed after sending), and record it.
//!
//! The audit record `SEQ` (the change's `started` record, or its completion) names the command
//! line that was sent and when. For an op that runs a Proxmox task the node's task list of that
//! guest is read for the first task started since then, and its status: `ok`, `failed` (with
//! Proxmox's words) or `running`; no such task is `not_run`. A change without a task (`vm set`)
//! is judged by the guest's config now: `applied` when it holds every value sent, else
//! `not_applied`. The finding is appended to the audit log as a `reconcile` record naming
//! `SEQ`. Reads only: nothing is retried or sent again.

use serde_json::{Value, json};

use super::open;
use crate::audit::{self, Record, Verdict, Via};
use crate::base::error::{Error, Result};
use crate::base::runtime::runtime;
use crate::catalog::{self, ops};
use crate::config::context::Context;
use crate::engine::Trail;
use crate::output::Output;
use crate::remote::Remote;

/// Reconcile record `seq` and print what happened.
pub fn reconcile(ctx: &Context, seq: u64, out: &mut Output, trail: &mut Trail) -> Result<u8> {
    let path = trail
        .log
        .clone()
        .or_else(audit::default_path)
        .ok_or_else(|| Error::usage("there is no HOME or XDG_STATE_HOME, so no audit log"))?;
    let records = audit::read(&path, None)?;
    let (sent, done) = find(&records, seq)?;
    let target = super::resolve(ctx, out, trail)?;
    if let Some(h) = &sent.host
        && *h != target.display()
    {
        return Err(Error::usage(format!(
            "record {seq} was sent to {h}, not {}: reconcile it against that host (-H)",
            target.display()
        )));
    }
    let (op, values) = sent.read_back().ok_or_else(|| {
        Error::usage(format!(
            "record {seq} holds no catalog command line pxagent can read back"
        ))
    })?;
    let since = crate::base::time::parse_time(&sent.time)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let known_upid = done.and_then(|d| d.upid.clone()).or(sent.upid.clone());
    let mut finding = runtime()?.block_on(async {
        let remote = open(ctx, &target).await?;
        let r = find_out(&remote, op, &values, since, known_upid).await;
        remote.session.close().await;
        r
    })?;
    finding["record"] = json!(seq);
    finding["op"] = json!(op.id);
    finding["sent_at"] = json!(sent.time);
    finding["reported_exit"] = json!(done.map(|d| d.exit_code));
    let outcome = finding["outcome"].as_str().unwrap_or("unknown").to_string();
    let mut rec = audit::NewRecord::new("reconcile", Via::Cli, Verdict::Allowed);
    rec.host = sent.host.clone();
    rec.account = sent.account.clone();
    rec.argv = sent.argv.clone();
    rec.upid = finding["upid"].as_str().map(str::to_string);
    rec.reconciles = Some(sent.seq);
    rec.outcome = Some(outcome);
    audit::append(&path, rec)?;
    // The reconcile record is this run's record: nothing more to write for it.
    trail.audited = false;
    out.success("reconcile", finding, human);
    Ok(0)
}

/// The `started` record `seq` names (itself, or the one its completion completes), and the
/// completion, if any.
fn find(records: &[Record], seq: u64) -> Result<(&Record, Option<&Record>)> {
    let named = records
        .iter()
        .find(|r| r.seq == seq)
        .ok_or_else(|| Error::usage(format!("the audit log has no record {seq}")))?;
    let started = match named.started {
        Some(s) => records.iter().find(|r| r.seq == s).unwrap_or(named),
        None => named,
    };
    if started.argv.is_empty() || started.op == "reconcile" {
        return Err(Error::usage(format!(
            "record {seq} ({}) sent no command line to reconcile",
            started.op
        )));
    }
    let done = records
        .iter()
        .rev()
        .find(|r| r.started == Some(started.seq));
    Ok((started, done))
}

/// What the host shows of the change now.
async fn find_out(
    remote: &Remote,
    op: &'static catalog::Op,
    values: &std::collections::BTreeMap<&'static str, String>,
    since: u64,
    known_upid: Option<String>,
) -> Result<Value> {
    let node = values.get("node").cloned().unwrap_or_default();
    let vmid = values.get("vmid").cloned();
    if op.runs_task() {
        let upid = match known_upid {
            Some(u) => Some(u),
            None => {
                let mut filter: Vec<(&'static str, &str)> = vec![("node", node.as_str())];
                if let Some(v) = &vmid {
                    filter.push(("vmid", v.as_str()));
                }
                let list = remote.read_op(&ops::TASK_LIST, &filter).await?;
                list.as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| t["starttime"].as_u64().is_some_and(|s| s + 2 >= since))
                    .min_by_key(|t| t["starttime"].as_u64().unwrap_or(u64::MAX))
                    .and_then(|t| t["upid"].as_str().map(str::to_string))
            }
        };
        let Some(upid) = upid else {
            return Ok(json!({
                "outcome": "not_run",
                "detail": format!(
                    "no task of {} started on {node} since the command was sent: it did not reach Proxmox",
                    vmid.map(|v| format!("guest {v}")).unwrap_or_else(|| "this kind".into())
                ),
            }));
        };
        let status = remote
            .read_op(&ops::TASK_STATUS, &[("upid", &upid), ("node", &node)])
            .await?;
        let exit = status["exitstatus"].as_str().unwrap_or("");
        let (outcome, detail) = match status["status"].as_str() {
            Some("running") => ("running", "the task is still running: reconcile again once it ended (`pxagent task wait UPID`)".to_string()),
            _ if crate::remote::task_ok(exit) => ("ok", format!("the task ended {exit}: the change happened")),
            _ => ("failed", format!("the task failed: {exit}")),
        };
        return Ok(json!({"outcome": outcome, "upid": upid, "detail": detail}));
    }
    // No task: the guest's config holds the values sent, or it does not.
    if vmid.is_none() {
        return Ok(json!({
            "outcome": "unknown",
            "detail": format!("{} leaves no task and no guest config to compare: check by hand", op.id),
        }));
    }
    let config = remote
        .guest_config(&crate::catalog::invocation::Invocation::new(
            op,
            values.clone(),
        )?)
        .await?;
    let differ: Vec<String> = values
        .iter()
        .filter(|(k, _)| !matches!(**k, "node" | "vmid") && Some(**k) != op.pinned_digest())
        .filter(|(k, v)| catalog::undo::config_value(&config, k).unwrap_or_default() != **v)
        .map(|(k, v)| format!("{k} is not {v}"))
        .collect();
    Ok(if differ.is_empty() {
        json!({"outcome": "applied", "detail": "the guest's config holds every value sent: the change happened"})
    } else {
        json!({"outcome": "not_applied", "detail": format!("the guest's config does not hold what was sent ({})", differ.join(", "))})
    })
}

/// The finding for people.
fn human(d: &Value) -> String {
    format!(
        "record {} ({}): {} — {}{}",
        d["record"],
        d["op"].as_str().unwrap_or("?"),
        d["outcome"].as_str().unwrap_or("?"),
        d["detail"].as_str().unwrap_or(""),
        d["upid"]
            .as_str()
            .map(|u| format!("\ntask {u}"))
            .unwrap_or_default()
    )
}
