//! `backup job run`: a backup job's backups now, on each node that holds its guests, as PVE's
//! "Run now" starts them (pve-manager `www/manager6/dc/Backup.js` `run_backup_now` POSTs the
//! job's settings to every online node's `/nodes/NODE/vzdump`; each node backs up the job's
//! guests it holds, `PVE::API2::VZDump` `vzdump` with `get_included_guests`).
//!
//! The order is that of every op: the local policy and a phrase it may ask for (nothing read
//! yet), then two reads — the job ([`crate::catalog::Op::fans_out`]) and the cluster's guests
//! (the guest map, read anew) — then [`plan`]: which guests on which node, and the job's
//! settings as the row's values, each checked by its kind. A job with a setting the row's line
//! cannot carry is refused here, before anything runs. Then one invocation of the row per node
//! (and per 64 guests, the most one line names), each through [`Engine::execute`] with its own
//! policy check, rate-limit quota and audit record. Nodes run side by side, as the scheduler's
//! runs do; a node's lines one after the other, since vzdump takes one job per node at a time.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::Value;

use super::{Connector, Done, Engine, Trail};
use crate::base::error::{Error, Result};
use crate::base::text::printable;
use crate::catalog::invocation::Invocation;
use crate::catalog::{Kind, Op, RETENTION_KEYS};
use crate::remote::vmid_of;
use crate::views::{JobNodeRun, JobRunResult};

/// The job's settings a run passes on: (the job's key, the row's parameter).
const CARRIED: [(&str, &str); 5] = [
    ("storage", "storage"),
    ("mode", "mode"),
    ("compress", "compress"),
    ("prune-backups", "prune_backups"),
    ("notes-template", "notes_template"),
];

/// When and whether the job runs on its schedule, and its description: a run now leaves them
/// aside, as PVE's "Run now" does.
const SCHEDULING: [&str; 9] = [
    "id",
    "type",
    "schedule",
    "enabled",
    "comment",
    "next-run",
    "repeat-missed",
    "starttime",
    "dow",
];

/// Whom the job notifies: not passed on (no rule admits `--mailto`), and said so.
const NOTIFICATION: [&str; 5] = [
    "mailnotification",
    "mailto",
    "notification-mode",
    "notification-policy",
    "notification-target",
];

/// The most VMIDs one line names ([`Kind::VmidList`]).
const PER_LINE: usize = 64;

/// What a run of one job does: its settings as the row's values, and its guests by node.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The row's values every line shares (job, storage, mode …), as a user would give them.
    pub settings: BTreeMap<&'static str, String>,
    /// Each node that holds some of the job's guests, with them, in node order.
    pub nodes: Vec<(String, Vec<u64>)>,
    /// VMIDs the job names that no node holds.
    pub missing: Vec<u64>,
    /// Guests left out because the job runs on one node only (its `node`).
    pub elsewhere: Vec<u64>,
    /// The job's notification settings, not passed on.
    pub not_passed: Vec<String>,
}

fn refuse(job: &str, why: String) -> Error {
    Error::WrongState(format!(
        "backup job {job} {why}; pxagent runs a job only with what its line carries (guests, storage, mode, compression, retention, notes): run it from PVE (Datacenter → Backup → Run now), or let its schedule run it"
    ))
}

/// A setting's value as text (PVE prints numbers of jobs.cfg as numbers, the rest as strings).
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The row's value for one of the job's settings: a choice by its CLI name, the retention as
/// `keep-…=N,…` (GET returns it as an object), the rest as they are; each checked by the
/// parameter's kind.
fn setting(op: &'static Op, job: &str, key: &str, param: &str, v: &Value) -> Result<String> {
    let p = op
        .param(param)
        .ok_or_else(|| Error::Internal(format!("{} has no parameter {param}", op.id)))?;
    let raw = match (key, v) {
        ("prune-backups", Value::Object(m)) => {
            if let Some(k) = m.keys().find(|k| !RETENTION_KEYS.contains(&k.as_str())) {
                return Err(refuse(
                    job,
                    format!("keeps its backups by `{}`", printable(k)),
                ));
            }
            RETENTION_KEYS
                .iter()
                .filter_map(|k| m.get(*k).and_then(text_of).map(|n| format!("{k}={n}")))
                .collect::<Vec<_>>()
                .join(",")
        }
        _ => text_of(v).ok_or_else(|| refuse(job, format!("has a `{key}` that is not a value")))?,
    };
    let raw = match p.kind {
        Kind::Choice(choices) => choices
            .iter()
            .find(|c| c.wire == raw)
            .map(|c| c.cli.to_string())
            .unwrap_or(raw),
        _ => raw,
    };
    p.kind
        .parse(param, &raw)
        .map_err(|e| refuse(job, format!("has a `{key}` pxagent does not pass on ({e})")))?;
    Ok(raw)
}

/// What a run of job `id` (`GET /cluster/backup/{id}`'s answer `job`) does, given the
/// cluster's guests (`/cluster/resources --type vm` entries: `vmid`, `node`, `pool`). A setting
/// the row cannot carry is refused ([`Error::WrongState`], nothing sent).
pub fn plan(op: &'static Op, id: &str, job: &Value, guests: &[Value]) -> Result<Plan> {
    let map = job.as_object().ok_or_else(|| {
        Error::Remote(format!(
            "the host answered backup job {id} with {}, not an object",
            printable(&job.to_string())
        ))
    })?;
    let mut settings = BTreeMap::from([("job", id.to_string())]);
    let mut not_passed = Vec::new();
    for (key, v) in map {
        let k = key.as_str();
        if let Some((_, param)) = CARRIED.iter().find(|(j, _)| *j == k) {
            settings.insert(*param, setting(op, id, k, param, v)?);
        } else if NOTIFICATION.contains(&k) {
            not_passed.push(key.clone());
        } else if SCHEDULING.contains(&k) || ["vmid", "pool", "node"].contains(&k) {
            // Read below, or not a run's business.
        } else if k == "all" && text_of(v).as_deref() == Some("0") {
            // `all: 0` is the default written out.
        } else {
            return Err(refuse(id, format!("sets `{}`", printable(key))));
        }
    }
    if !settings.contains_key("storage") {
        return Err(refuse(
            id,
            "names no storage (vzdump would take /etc/vzdump.conf's)".into(),
        ));
    }
    let node_of = |g: &Value| g.get("node").and_then(Value::as_str).map(str::to_string);
    let mut chosen: Vec<(u64, String)> = Vec::new();
    let mut missing = Vec::new();
    match (map.get("vmid"), map.get("pool")) {
        (Some(list), None) => {
            let list = text_of(list).unwrap_or_default();
            for part in list.split([',', ';', ' ']).filter(|s| !s.is_empty()) {
                let vmid: u64 = part
                    .parse()
                    .map_err(|_| refuse(id, format!("names `{}`, not a VMID", printable(part))))?;
                match guests
                    .iter()
                    .find(|g| vmid_of(g) == Some(vmid))
                    .and_then(node_of)
                {
                    Some(node) => chosen.push((vmid, node)),
                    None => missing.push(vmid),
                }
            }
        }
        (None, Some(pool)) => {
            let pool = text_of(pool).unwrap_or_default();
            for g in guests {
                if g.get("pool").and_then(Value::as_str) == Some(pool.as_str())
                    && let (Some(vmid), Some(node)) = (vmid_of(g), node_of(g))
                {
                    chosen.push((vmid, node));
                }
            }
        }
        _ => {
            return Err(refuse(
                id,
                "names its guests neither by VMIDs nor by a pool".into(),
            ));
        }
    }
    chosen.sort();
    chosen.dedup();
    missing.sort_unstable();
    missing.dedup();
    let only = map.get("node").and_then(Value::as_str);
    let mut nodes: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut elsewhere = Vec::new();
    for (vmid, node) in chosen {
        if only.is_some_and(|n| n != node) {
            elsewhere.push(vmid);
        } else {
            nodes.entry(node).or_default().push(vmid);
        }
    }
    Ok(Plan {
        settings,
        nodes: nodes.into_iter().collect(),
        missing,
        elsewhere,
        not_passed,
    })
}

impl Plan {
    /// The lines of this plan: per node, one invocation of `op` per [`PER_LINE`] guests.
    pub fn lines(&self, op: &'static Op) -> Result<Vec<(String, Vec<Invocation>)>> {
        self.nodes
            .iter()
            .map(|(node, vmids)| {
                let lines = vmids
                    .chunks(PER_LINE)
                    .map(|chunk| {
                        let mut raw = self.settings.clone();
                        raw.insert("node", node.clone());
                        let list: Vec<String> = chunk.iter().map(u64::to_string).collect();
                        raw.insert("vmids", list.join(","));
                        Invocation::new(op, raw)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok((node.clone(), lines))
            })
            .collect()
    }
}

impl<C: Connector> Engine<'_, C> {
    /// Run a backup job now (see the module doc). `inv` names the job only.
    pub async fn job_run(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Done> {
        let read = inv
            .op
            .fans_out
            .ok_or_else(|| Error::Internal(format!("{} reads nothing to run", inv.op.id)))?;
        // The policy and a phrase it asks for, before anything is read; the quota is taken
        // by each line.
        let policy_confirm = self.judge(inv, trail).await?;
        let phrase = self.phrase(inv, given, &policy_confirm)?;
        trail.phrase = phrase.clone();
        let given = phrase.as_deref().or(given);
        let id = inv.values.get("job").cloned().unwrap_or_default();
        let remote = self.connector.remote().await?;
        trail.argv = Invocation::new(read, BTreeMap::from([("job", id.clone())]))?.remote_argv();
        let job = remote.read_op(read, &[("job", &id)]).await?;
        // Which guests a job covers is read now, never taken from a kept map: a guest a
        // map missed would be reported as missing and left without its backup.
        remote.forget_guests().await;
        let guests = remote.guest_map().await?;
        let plan = plan(inv.op, &id, &job, &guests)?;
        let lines = plan.lines(inv.op)?;
        // Every line is judged before the first is sent: a refusal refuses the whole.
        for (_, node_lines) in &lines {
            for line in node_lines {
                self.policy.check(line, None)?;
                self.policy.check_destinations(line, None)?;
            }
        }
        let shared = Mutex::new(progress);
        let runs = lines.iter().map(|(node, node_lines)| {
            let shared = &shared;
            let trail = &*trail;
            async move {
                let mut done = Vec::new();
                for line in node_lines {
                    let mut each = |l: &str| (shared.lock().unwrap_or_else(|e| e.into_inner()))(l);
                    let r = self.run_step(line, given, trail, &mut each).await;
                    let vmids = line.values["vmids"]
                        .split(',')
                        .filter_map(|v| v.parse().ok());
                    match r {
                        Ok(d) => done.push(JobNodeRun {
                            node: node.clone(),
                            vmids: vmids.collect(),
                            upid: d.data["upid"].as_str().map(String::from),
                            exitstatus: d.data["task"]["exitstatus"].as_str().map(String::from),
                        }),
                        // A failed line ends its node's part; the other nodes go on.
                        Err(e) => {
                            return (done, Some((node.clone(), vmids.collect::<Vec<u64>>(), e)));
                        }
                    }
                }
                (done, None)
            }
        });
        let ended = futures_util::future::join_all(runs).await;
        let mut runs = Vec::new();
        let mut failed = Vec::new();
        for (done, err) in ended {
            runs.extend(done);
            failed.extend(err);
        }
        let storage = plan.settings["storage"].clone();
        let mut nodes: Vec<&str> = runs.iter().map(|r| r.node.as_str()).collect();
        nodes.dedup();
        let mut message = if runs.is_empty() && failed.is_empty() {
            format!(
                "backup job {id} names no guest the cluster holds{}: nothing to back up",
                if plan.elsewhere.is_empty() {
                    ""
                } else {
                    " on its node"
                }
            )
        } else if runs.is_empty() {
            format!("backup job {id} backed nothing up")
        } else {
            format!(
                "backup job {id} ran on {} node{} to {storage}: {}",
                nodes.len(),
                if nodes.len() == 1 { "" } else { "s" },
                runs.iter()
                    .map(|r| format!(
                        "{} on {} ({})",
                        join(&r.vmids),
                        r.node,
                        r.exitstatus.as_deref().unwrap_or("done")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        if !plan.missing.is_empty() {
            message.push_str(&format!("; no node holds {}", join(&plan.missing)));
        }
        if !plan.elsewhere.is_empty() {
            message.push_str(&format!(
                "; left out, as the job runs on one node only: {}",
                join(&plan.elsewhere)
            ));
        }
        if !failed.is_empty() {
            let what: Vec<String> = failed
                .iter()
                .map(|(node, vmids, e)| {
                    format!("on {node} ({}) it failed ({}): {e}", join(vmids), e.kind())
                })
                .collect();
            let msg = format!("{message}; {}", what.join("; "));
            let lost = failed
                .iter()
                .any(|(_, _, e)| matches!(e, Error::Connection(_)));
            return Err(if lost {
                Error::Connection(msg)
            } else {
                Error::Remote(msg)
            });
        }
        Ok(Done {
            data: crate::views::value(&JobRunResult {
                changed: !runs.is_empty(),
                job: id,
                storage,
                runs,
                missing: plan.missing,
                not_passed: plan.not_passed,
                message,
            }),
            warnings: Vec::new(),
        })
    }
}

fn join(vmids: &[u64]) -> String {
    vmids
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::ops::BACKUP_JOB_RUN;

    /// `/cluster/resources --type vm` entries as the simulator and PVE give them (FORMATS §2.4:
    /// `pool` only for a pool's guests).
    fn guests() -> Vec<Value> {
        vec![
            json!({"vmid": 100, "node": "pve1", "type": "qemu", "pool": "prod"}),
            json!({"vmid": 101, "node": "pve1", "type": "qemu"}),
            json!({"vmid": 200, "node": "pve2", "type": "lxc", "pool": "prod"}),
            json!({"vmid": 300, "node": "pve3", "type": "qemu"}),
        ]
    }

    /// A job as `GET /cluster/backup/{id}` returns it (pve-manager `PVE/API2/Backup.pm`
    /// `read_job`; `prune-backups` as an object, numbers as numbers).
    fn job(extra: Value) -> Value {
        let mut j = json!({
            "id": "nightly", "type": "vzdump", "enabled": 1, "schedule": "sat 02:00",
            "next-run": 1_800_000_000u64, "storage": "local", "vmid": "100,200,999"
        });
        for (k, v) in extra.as_object().unwrap() {
            j[k] = v.clone();
        }
        j
    }

    fn planned(extra: Value) -> Result<Plan> {
        plan(&BACKUP_JOB_RUN, "nightly", &job(extra), &guests())
    }

    #[test]
    fn a_vmid_job_runs_on_each_guests_node_and_names_the_missing() {
        let p = planned(json!({"mode": "stop", "compress": "0",
            "prune-backups": {"keep-daily": 7, "keep-last": 3}, "notes-template": "{{guestname}}",
            "mailto": "root@example.com", "notification-mode": "auto", "all": 0}))
        .unwrap();
        assert_eq!(
            p.nodes,
            vec![
                ("pve1".to_string(), vec![100]),
                ("pve2".to_string(), vec![200])
            ]
        );
        assert_eq!(p.missing, vec![999]);
        assert_eq!(p.not_passed, vec!["mailto", "notification-mode"]);
        assert_eq!(p.settings["compress"], "none");
        assert_eq!(p.settings["prune_backups"], "keep-last=3,keep-daily=7");
        let lines = p.lines(&BACKUP_JOB_RUN).unwrap();
        let argv = lines[1].1[0].argv();
        assert_eq!(
            argv[1..].join(" "),
            "create /nodes/pve2/vzdump --job-id nightly --vmid 200 --storage local --mode stop --compress 0 --prune-backups keep-last=3,keep-daily=7 --notes-template {{guestname}} --output-format json"
        );
    }

    #[test]
    fn a_pool_job_takes_the_pools_guests_wherever_they_are() {
        let mut j = job(json!({}));
        j.as_object_mut().unwrap().remove("vmid");
        j["pool"] = json!("prod");
        let p = plan(&BACKUP_JOB_RUN, "nightly", &j, &guests()).unwrap();
        assert_eq!(
            p.nodes,
            vec![
                ("pve1".to_string(), vec![100]),
                ("pve2".to_string(), vec![200])
            ]
        );
        assert!(p.missing.is_empty());
    }

    #[test]
    fn a_job_bound_to_a_node_leaves_the_others_guests_out() {
        let p = planned(json!({"node": "pve2"})).unwrap();
        assert_eq!(p.nodes, vec![("pve2".to_string(), vec![200])]);
        assert_eq!(p.elsewhere, vec![100]);
    }

    #[test]
    fn settings_no_line_carries_are_refused_before_anything_runs() {
        for extra in [
            json!({"script": "/root/hook.pl"}),
            json!({"dumpdir": "/tmp"}),
            json!({"tmpdir": "/tmp"}),
            json!({"all": 1}),
            json!({"exclude": "100"}),
            json!({"remove": 0}),
            json!({"bwlimit": 1000}),
            json!({"stop": 1}),
            json!({"fleecing": {"enabled": 1}}),
            json!({"prune-backups": {"keep-all": 1}}),
            json!({"compress": "1"}),
            json!({"mode": "paused"}),
            json!({"notes-template": "$(reboot)"}),
            json!({"storage": "../etc"}),
            json!({"vmid": "100,abc"}),
        ] {
            let e = planned(extra.clone()).unwrap_err();
            assert!(matches!(e, Error::WrongState(_)), "{extra}: {e:?}");
            assert!(e.to_string().contains("Run now"), "{extra}: {e}");
        }
        let mut j = job(json!({}));
        j.as_object_mut().unwrap().remove("storage");
        let e = plan(&BACKUP_JOB_RUN, "nightly", &j, &guests()).unwrap_err();
        assert!(e.to_string().contains("names no storage"), "{e}");
        j["storage"] = json!("local");
        j.as_object_mut().unwrap().remove("vmid");
        let e = plan(&BACKUP_JOB_RUN, "nightly", &j, &guests()).unwrap_err();
        assert!(
            e.to_string().contains("neither by VMIDs nor by a pool"),
            "{e}"
        );
    }

    #[test]
    fn more_guests_than_a_line_names_take_several_lines_on_their_node() {
        let many: Vec<Value> = (1000..1100)
            .map(|v| json!({"vmid": v, "node": "pve1", "type": "qemu"}))
            .collect();
        let list: Vec<String> = (1000..1100).map(|v: u64| v.to_string()).collect();
        let j = job(json!({"vmid": list.join(",")}));
        let p = plan(&BACKUP_JOB_RUN, "nightly", &j, &many).unwrap();
        let lines = p.lines(&BACKUP_JOB_RUN).unwrap();
        assert_eq!(lines.len(), 1);
        let sizes: Vec<usize> = lines[0]
            .1
            .iter()
            .map(|l| l.values["vmids"].split(',').count())
            .collect();
        assert_eq!(sizes, vec![64, 36]);
    }
}
