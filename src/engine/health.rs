//! `health`'s checks: "is anything wrong?" from one connection. It reads what the cluster
//! shares (membership and quorum, resources, recent tasks, the HA manager), then each online
//! node's disks, services and pending updates, all concurrently, and makes findings: each
//! with its severity, where it is, what it is and the command that shows more. The CLI's
//! `pxagent health` and the MCP tool `health` both run [`report`].
//!
//! Every read is a catalog read op: the caller's policy judges each (one it denies is listed
//! as not checked, with why), and the host's sudoers and gate admit each as they would alone.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::base::error::{Error, Result};
use crate::catalog::{Op, ops};
use crate::output::units;
use crate::remote::Remote;

/// What `health` looks at and how strict it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Failed tasks that started at or after this time (Unix seconds) are findings.
    pub since: u64,
    /// A storage this full (percent of its size) or fuller is a finding.
    pub storage_threshold: u8,
}

impl Options {
    /// From what a caller gives (the CLI's `--since` and `--storage-threshold`, the MCP tool's
    /// arguments), `None` for the defaults: `since` is Unix seconds, an age (`24h`, the
    /// default), a date or an RFC 3339 time; `storage_threshold` a percentage 1-100 (default
    /// 90). Anything else is invalid input (exit 2).
    pub fn parse(since: Option<&str>, storage_threshold: Option<&str>) -> Result<Options> {
        let now = std::time::SystemTime::now();
        let since = match since {
            None => now - std::time::Duration::from_secs(24 * 3600),
            // Unix seconds, as `cluster tasks --since` takes them.
            Some(s) if !s.is_empty() && s.len() <= 11 && s.bytes().all(|b| b.is_ascii_digit()) => {
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(s.parse().unwrap_or(0))
            }
            Some(s) => crate::base::time::parse_since(s, now)?,
        };
        let since = since
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| Error::usage("since: before 1970"))?
            .as_secs();
        let storage_threshold = match storage_threshold {
            None => 90,
            Some(t) => t
                .parse::<u8>()
                .ok()
                .filter(|t| (1..=100).contains(t))
                .ok_or_else(|| {
                    Error::usage(format!(
                        "storage threshold: expected a percentage 1-100, got '{}'",
                        crate::base::text::printable(t)
                    ))
                })?,
        };
        Ok(Options {
            since,
            storage_threshold,
        })
    }
}

/// Whether `policy` lets `op`'s read run: `None` if it does, else why not (a check whose read
/// is denied is listed as not checked).
pub fn denied_by(policy: &crate::policy::Policy, op: &'static Op) -> Option<String> {
    let inv =
        crate::catalog::invocation::Invocation::new(op, crate::catalog::example_values(op)).ok()?;
    policy.check(&inv, None).err().map(|e| e.to_string())
}

/// The `-o json` document of a report (the CLI prints it, the MCP tool returns it): `ok` when
/// healthy; otherwise the error `unhealthy` (exit 5) beside the report in `data`.
pub fn document(report: &Report, host: &str) -> Value {
    let data = serde_json::to_value(report).unwrap_or(Value::Null);
    if report.healthy {
        return json!({"ok": true, "op": "health", "host": host, "data": data});
    }
    json!({"ok": false, "op": "health", "host": host, "error": unhealthy(report).to_json(), "data": data})
}

/// The error of an unhealthy report: how many problems (warnings and criticals).
pub fn unhealthy(report: &Report) -> Error {
    let n = report
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Info)
        .count();
    Error::Unhealthy(format!("health: {n} problem(s) found"))
}

/// How much a finding matters: `critical` and `warning` make the host unhealthy (exit 5);
/// `info` is reported and does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

/// One thing found.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The check that found it: `quorum`, `nodes`, `tasks`, `storage`, `smart`, `services`,
    /// `ha` or `updates`.
    pub check: &'static str,
    pub severity: Severity,
    /// The node it is on, when it is on one.
    pub node: Option<String>,
    /// What it is about: a node, a storage, a disk, a service, a task's UPID, an HA resource.
    pub subject: String,
    pub message: String,
    /// The pxagent command that shows more.
    pub more: String,
}

/// A check that could not be made, and why (the local policy denies its read, the host
/// refused it, the node did not answer).
#[derive(Debug, Clone, Serialize)]
pub struct Unchecked {
    pub check: &'static str,
    pub node: Option<String>,
    pub reason: String,
}

/// Services a node may have enabled and not running without anything being wrong:
/// `proxmox-firewall` runs only when the host firewall's nftables option is on (PVE 9's
/// default is off), and `corosync` only on a node that is in a cluster.
fn idle_by_design(service: &str, clustered: bool) -> bool {
    service == "proxmox-firewall" || (service == "corosync" && !clustered)
}

/// At most this many failed tasks are findings of their own; the rest are counted in one.
const MAX_TASK_FINDINGS: usize = 20;

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// No finding is a warning or critical.
    pub healthy: bool,
    /// The checks made.
    pub checked: Vec<&'static str>,
    /// Worst first.
    pub findings: Vec<Finding>,
    pub unchecked: Vec<Unchecked>,
    /// Failed tasks counted from this time on (Unix seconds).
    pub since: u64,
    pub storage_threshold: u8,
}

/// The reads and what they tell. `denied` says why the local policy refuses an op's read.
pub async fn report(
    remote: &Remote,
    denied: &(dyn Fn(&'static Op) -> Option<String> + Sync),
    opts: &Options,
) -> Result<Report> {
    let mut r = Report {
        healthy: true,
        checked: Vec::new(),
        findings: Vec::new(),
        unchecked: Vec::new(),
        since: opts.since,
        storage_threshold: opts.storage_threshold,
    };
    let read = |op: &'static Op, values: Vec<(&'static str, String)>| {
        let remote = remote.clone();
        let why = denied(op);
        async move {
            if let Some(why) = why {
                return Err(Error::Policy(why));
            }
            let v: Vec<(&'static str, &str)> =
                values.iter().map(|(k, v)| (*k, v.as_str())).collect();
            remote.read_op(op, &v).await
        }
    };
    let (cluster, resources, tasks, ha) = tokio::join!(
        read(&ops::CLUSTER_STATUS, vec![]),
        read(&ops::CLUSTER_RESOURCES, vec![]),
        read(&ops::CLUSTER_TASKS, vec![]),
        read(&ops::HA_STATUS, vec![]),
    );
    // Without the cluster's membership there is nothing to go on: a lost connection or a
    // refused login is the answer itself.
    let cluster = cluster?;
    let members: Vec<&serde_json::Map<String, Value>> = cluster
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .collect();
    let cluster_entry = members
        .iter()
        .find(|e| e.get("type").and_then(Value::as_str) == Some("cluster"));
    let clustered = cluster_entry.is_some();
    r.checked.extend(["quorum", "nodes"]);
    if let Some(c) = cluster_entry
        && num(c, "quorate") != Some(1.0)
    {
        r.findings.push(Finding {
            check: "quorum",
            severity: Severity::Critical,
            node: None,
            subject: text(c, "name"),
            message:
                "the cluster is not quorate: guests cannot start and its configuration is read-only"
                    .into(),
            more: "pxagent cluster status".into(),
        });
    }
    let mut online: Vec<String> = Vec::new();
    for n in members
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("node"))
    {
        let name = text(n, "name");
        // A standalone node lists itself without `online` (FORMATS.md §2.3): it answers.
        if num(n, "online").unwrap_or(1.0) == 1.0 {
            online.push(name);
        } else {
            r.findings.push(Finding {
                check: "nodes",
                severity: Severity::Critical,
                node: Some(name.clone()),
                subject: name.clone(),
                message: format!("node {name} is offline"),
                more: "pxagent node list".into(),
            });
        }
    }
    match resources {
        Ok(list) => {
            r.checked.push("storage");
            storages(&mut r, &list, opts.storage_threshold);
        }
        Err(e) => unchecked(&mut r, "storage", None, &e)?,
    }
    match tasks {
        Ok(list) => {
            r.checked.push("tasks");
            failed_tasks(&mut r, &list, opts.since)?;
        }
        Err(e) => unchecked(&mut r, "tasks", None, &e)?,
    }
    match ha {
        Ok(list) => {
            r.checked.push("ha");
            ha_problems(&mut r, &list);
        }
        Err(e) => unchecked(&mut r, "ha", None, &e)?,
    }
    // Each online node's own reads, all at once.
    let mut per_node = tokio::task::JoinSet::new();
    for node in &online {
        for (check, op) in [
            ("smart", &ops::NODE_DISKS),
            ("services", &ops::NODE_SERVICES),
            ("updates", &ops::NODE_UPDATES),
        ] {
            let fut = read(op, vec![("node", node.clone())]);
            let node = node.clone();
            per_node.spawn(async move { (check, node, fut.await) });
        }
    }
    let mut answers: BTreeMap<(&'static str, String), Result<Value>> = BTreeMap::new();
    while let Some(joined) = per_node.join_next().await {
        let (check, node, answer) =
            joined.map_err(|e| Error::Internal(format!("a health read failed: {e}")))?;
        answers.insert((check, node), answer);
    }
    for ((check, node), answer) in answers {
        match answer {
            Err(e) => unchecked(&mut r, check, Some(&node), &e)?,
            Ok(v) => {
                if !r.checked.contains(&check) {
                    r.checked.push(check);
                }
                match check {
                    "smart" => smart(&mut r, &node, &v),
                    "services" => services(&mut r, &node, &v, clustered),
                    _ => updates(&mut r, &node, &v),
                }
            }
        }
    }
    r.findings.sort_by(|a, b| {
        (a.severity, a.check, &a.node, &a.subject).cmp(&(b.severity, b.check, &b.node, &b.subject))
    });
    r.healthy = r.findings.iter().all(|f| f.severity == Severity::Info);
    Ok(r)
}

/// A read that failed: listed as not checked, unless the connection itself failed (the whole
/// report would be a guess then).
fn unchecked(r: &mut Report, check: &'static str, node: Option<&str>, e: &Error) -> Result<()> {
    if matches!(e.exit_code(), 6 | 7) {
        return Err(Error::from_exit_code(e.exit_code(), e.to_string()));
    }
    r.unchecked.push(Unchecked {
        check,
        node: node.map(String::from),
        reason: e.to_string(),
    });
    Ok(())
}

fn num(o: &serde_json::Map<String, Value>, k: &str) -> Option<f64> {
    match o.get(k)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn text(o: &serde_json::Map<String, Value>, k: &str) -> String {
    match o.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn objects(v: &Value) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

/// Storages that are not available, or fuller than the threshold (`/cluster/resources` entries
/// of type `storage`: `disk` used and `maxdisk` size in bytes, `status`).
fn storages(r: &mut Report, list: &Value, threshold: u8) {
    for s in objects(list).filter(|s| s.get("type").and_then(Value::as_str) == Some("storage")) {
        let (name, node) = (text(s, "storage"), text(s, "node"));
        let more = format!("pxagent storage list {node}");
        let status = text(s, "status");
        if !status.is_empty() && status != "available" {
            r.findings.push(Finding {
                check: "storage",
                severity: Severity::Warning,
                node: Some(node.clone()),
                subject: name.clone(),
                message: format!("storage {name} on {node} is {status}"),
                more,
            });
            continue;
        }
        let (Some(used), Some(size)) = (num(s, "disk"), num(s, "maxdisk")) else {
            continue;
        };
        if size <= 0.0 {
            continue;
        }
        let pct = used / size * 100.0;
        if pct >= f64::from(threshold) {
            r.findings.push(Finding {
                check: "storage",
                severity: if pct >= 98.0 { Severity::Critical } else { Severity::Warning },
                node: Some(node.clone()),
                subject: name.clone(),
                message: format!(
                    "storage {name} on {node} is {pct:.0}% full ({} of {}; the threshold is {threshold}%)",
                    units::bytes(used),
                    units::bytes(size)
                ),
                more,
            });
        }
    }
}

/// Tasks that failed since `since`, newest first (`/cluster/tasks`).
fn failed_tasks(r: &mut Report, list: &Value, since: u64) -> Result<()> {
    let list = crate::views::normalize(crate::catalog::View::Tasks, list, None)?;
    let failed: Vec<&serde_json::Map<String, Value>> = objects(&list)
        .filter(|t| t.get("failed") == Some(&Value::Bool(true)))
        .filter(|t| num(t, "starttime").unwrap_or(0.0) >= since as f64)
        .collect();
    for t in failed.iter().take(MAX_TASK_FINDINGS) {
        let (kind, id, node) = (text(t, "type"), text(t, "id"), text(t, "node"));
        let when = num(t, "starttime")
            .map(|s| crate::base::time::human_utc(s as u64))
            .unwrap_or_default();
        let what = if id.is_empty() {
            kind
        } else {
            format!("{kind} {id}")
        };
        r.findings.push(Finding {
            check: "tasks",
            severity: Severity::Warning,
            node: Some(node),
            subject: text(t, "upid"),
            message: format!("{what} failed ({when}): {}", text(t, "status")),
            more: format!("pxagent task log {}", text(t, "upid")),
        });
    }
    if failed.len() > MAX_TASK_FINDINGS {
        r.findings.push(Finding {
            check: "tasks",
            severity: Severity::Warning,
            node: None,
            subject: "more".into(),
            message: format!("{} more failed tasks", failed.len() - MAX_TASK_FINDINGS),
            more: format!("pxagent cluster tasks --errors --since {since}"),
        });
    }
    Ok(())
}

/// The HA manager's problems (`/cluster/ha/status/current`): no quorum, a node's agent not
/// active or idle, a resource in `error`, being fenced or recovered.
fn ha_problems(r: &mut Report, list: &Value) {
    for e in objects(list) {
        let (kind, id, status) = (text(e, "type"), text(e, "id"), text(e, "status"));
        let node = e.get("node").and_then(Value::as_str).map(String::from);
        let (severity, message) = match kind.as_str() {
            "quorum" if status != "OK" => (
                Severity::Critical,
                format!("the HA manager has no quorum: {status}"),
            ),
            "lrm" | "master"
                if status.contains("dead")
                    || status.contains("old timestamp")
                    || status.contains("fence") =>
            {
                (Severity::Warning, format!("HA {id}: {status}"))
            }
            "service" => {
                let state = e
                    .get("state")
                    .and_then(Value::as_str)
                    .unwrap_or(&status)
                    .to_string();
                match state.as_str() {
                    "error" => (
                        Severity::Critical,
                        format!(
                            "HA resource {} is in error",
                            id.trim_start_matches("service:")
                        ),
                    ),
                    "fence" | "recovery" => (
                        Severity::Warning,
                        format!(
                            "HA resource {} is in {state}",
                            id.trim_start_matches("service:")
                        ),
                    ),
                    _ => continue,
                }
            }
            _ => continue,
        };
        r.findings.push(Finding {
            check: "ha",
            severity,
            node,
            subject: id,
            message,
            more: "pxagent ha status".into(),
        });
    }
}

/// Disks whose SMART health is neither `PASSED`/`OK` nor unknown (`/nodes/N/disks/list`).
fn smart(r: &mut Report, node: &str, list: &Value) {
    for d in objects(list) {
        let health = text(d, "health");
        if matches!(
            health.to_ascii_uppercase().as_str(),
            "" | "PASSED" | "OK" | "UNKNOWN"
        ) {
            continue;
        }
        let dev = text(d, "devpath");
        let serial = text(d, "serial");
        r.findings.push(Finding {
            check: "smart",
            severity: Severity::Critical,
            node: Some(node.to_string()),
            subject: dev.clone(),
            message: format!(
                "disk {dev} ({}, serial {serial}) on {node}: SMART health {health}",
                text(d, "model").trim()
            ),
            more: format!("pxagent node smart {node} {dev}"),
        });
    }
}

/// Services enabled but not running, or failed (`/nodes/N/services`).
fn services(r: &mut Report, node: &str, list: &Value, clustered: bool) {
    for s in objects(list) {
        let (name, active, unit) = (
            text(s, "name"),
            text(s, "active-state"),
            text(s, "unit-state"),
        );
        let problem = active == "failed"
            || (unit == "enabled" && active != "active" && !idle_by_design(&name, clustered));
        if !problem {
            continue;
        }
        r.findings.push(Finding {
            check: "services",
            severity: Severity::Warning,
            node: Some(node.to_string()),
            subject: name.clone(),
            message: format!("service {name} on {node} is {active} (unit {unit})"),
            more: format!("pxagent node service {node} {name}"),
        });
    }
}

/// Pending package updates (`/nodes/N/apt/update`): one `info` finding per node that has any.
fn updates(r: &mut Report, node: &str, list: &Value) {
    let n = objects(list).count();
    if n == 0 {
        return;
    }
    r.findings.push(Finding {
        check: "updates",
        severity: Severity::Info,
        node: Some(node.to_string()),
        subject: node.to_string(),
        message: format!("{n} package update(s) pending on {node}"),
        more: format!("pxagent node updates {node}"),
    });
}

/// The report for people: one line per finding, worst first, then what was not checked.
pub fn human(d: &Value) -> String {
    let mut s = String::new();
    let findings = d["findings"].as_array().cloned().unwrap_or_default();
    if d["healthy"] == json!(true) {
        s.push_str("healthy: no problems found");
    } else {
        let n = findings.iter().filter(|f| f["severity"] != "info").count();
        s.push_str(&format!("unhealthy: {n} problem(s)"));
    }
    let checked: Vec<&str> = d["checked"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    s.push_str(&format!(" (checked: {})\n", checked.join(", ")));
    if !findings.is_empty() {
        let rows: Vec<Vec<String>> = findings
            .iter()
            .map(|f| {
                let cell =
                    |k: &str| crate::output::escape::cell(f[k].as_str().unwrap_or("")).to_string();
                vec![
                    cell("severity").to_uppercase(),
                    cell("check"),
                    cell("message"),
                    cell("more"),
                ]
            })
            .collect();
        s.push('\n');
        s.push_str(&crate::output::table(
            &["SEVERITY", "CHECK", "FINDING", "MORE"],
            &rows,
        ));
        s.push('\n');
    }
    for u in d["unchecked"].as_array().into_iter().flatten() {
        let node = u["node"]
            .as_str()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default();
        s.push_str(&format!(
            "not checked: {}{node}: {}\n",
            crate::output::escape::cell(u["check"].as_str().unwrap_or("")),
            crate::output::escape::cell(u["reason"].as_str().unwrap_or(""))
        ));
    }
    s.trim_end().to_string()
}
