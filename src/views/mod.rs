//! Results as typed data and as tables.
//!
//! pvesh JSON is parsed leniently (FORMATS.md §2): numbers may be ints, floats or
//! numeric strings (`loadavg`, `cpuinfo.mhz`, `cpus` of a container), booleans are 0/1,
//! optional keys are absent, unknown keys are kept. Each list endpoint gets a typed struct
//! whose serialisation is the `-o json` data (normalised numbers, unknown keys kept under
//! their own names), and a table for people.
//!
//! Human views never show a raw byte count, fraction or epoch: units and
//! times come from [`crate::output::units`], states are painted by
//! [`crate::output::style::state`], and every cell is escaped by the output layer's
//! [`table`]. Objects (statuses, configs) are laid out in [`status`].
//!
//! Layer: views. May import: `base`, `catalog`, `output`.

pub mod observe;
pub mod status;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::base::error::{Error, Result};
use crate::catalog::View;
use crate::output::{style, table, units};

/// A number that pvesh may print as an int, a float or a numeric string.
fn lenient<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
        _ => None,
    })
}

/// A whole number, leniently.
fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    Ok(lenient(d)?.filter(|f| *f >= 0.0).map(|f| f as u64))
}

/// One entry of `/cluster/resources` (FORMATS.md §2.4): a guest, node, storage, pool or sdn.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Resource {
    /// `qemu/100`, `node/pve1`, `storage/pve1/local` …
    pub id: String,
    /// `qemu`, `lxc`, `node`, `storage`, `pool`, `sdn`, `network`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Guest id.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub vmid: Option<u64>,
    /// Guest name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `running`, `stopped`, `online`, `available`, `unknown` …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Storage id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// CPU use, 0..maxcpu.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu: Option<f64>,
    /// CPUs.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub maxcpu: Option<f64>,
    /// Memory used, bytes.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub mem: Option<u64>,
    /// Memory size, bytes.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub maxmem: Option<u64>,
    /// Disk used, bytes.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk: Option<u64>,
    /// Disk size, bytes.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub maxdisk: Option<u64>,
    /// Seconds up.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub uptime: Option<u64>,
    /// 1 for templates.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub template: Option<u64>,
    /// Everything else pvesh sent (tags, lock, hastate, netin …), kept as is.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One entry of `/nodes` (FORMATS.md §2.2).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeEntry {
    /// Node name.
    pub node: String,
    /// `online`, `offline`, `unknown`.
    #[serde(default)]
    pub status: String,
    /// CPU use, 0..1.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu: Option<f64>,
    /// CPUs.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub maxcpu: Option<f64>,
    /// Memory used.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub mem: Option<u64>,
    /// Memory size.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub maxmem: Option<u64>,
    /// Seconds up.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub uptime: Option<u64>,
    /// The rest.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One entry of `/nodes/N/storage` (FORMATS.md §2.10).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StorageEntry {
    /// Storage id.
    pub storage: String,
    /// Plugin type (`dir`, `lvmthin`, `nfs` …).
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Content types, comma-separated.
    #[serde(default)]
    pub content: String,
    /// 1 when active.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub active: Option<u64>,
    /// 1 when shared between nodes.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub shared: Option<u64>,
    /// Bytes used.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub used: Option<u64>,
    /// Bytes total.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub total: Option<u64>,
    /// Bytes available.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub avail: Option<u64>,
    /// The rest.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One snapshot (FORMATS.md §2.9), including the `current` entry.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Snapshot {
    /// Name (`current` for "You are here!").
    pub name: String,
    /// Parent snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Description (may contain newlines).
    #[serde(default)]
    pub description: String,
    /// Unix time taken.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub snaptime: Option<u64>,
    /// 1 when RAM was saved.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub vmstate: Option<u64>,
    /// The rest.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One volume on a storage (FORMATS.md §2.11): a backup, ISO, template or disk.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContentEntry {
    /// `local:backup/vzdump-qemu-100-….vma.zst`.
    pub volid: String,
    /// `backup`, `iso`, `vztmpl`, `images`, `rootdir`.
    #[serde(default)]
    pub content: String,
    /// `vma.zst`, `iso`, `tzst`, `raw` …
    #[serde(default)]
    pub format: String,
    /// Bytes.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub size: Option<u64>,
    /// Unix time created (backups: from the file name, node-local time).
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub ctime: Option<u64>,
    /// The guest a backup or disk belongs to.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub vmid: Option<u64>,
    /// The rest (notes, subtype, protected, verification …).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One line of a task log (`{"n":1,"t":"…"}`, FORMATS.md §1.5).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogLine {
    /// Line number.
    #[serde(default, deserialize_with = "lenient_u64")]
    pub n: Option<u64>,
    /// Text.
    #[serde(default)]
    pub t: String,
}

/// The result of an action (`View::Task`): the task it ran — its UPID, its node and its final
/// status (`…/tasks/UPID/status`, FORMATS.md §2.12) — or, when the guest already was where
/// the action would take it, `changed: false` and the guest's state (no task ran).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskResult {
    /// The task's UPID (absent when nothing had to be done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upid: Option<String>,
    /// The node the task ran on, or the guest's node.
    #[serde(default)]
    pub node: Option<String>,
    /// The task's status once it ended: `status` `stopped`, `exitstatus` `OK` or
    /// `WARNINGS: N`, and the UPID's fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Value>,
    /// Whether the action ran (`false`: the guest was already in that state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    /// What the task's log names that the result carries: `backup create`'s archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// The rest (a no-op's `vmid`, `status`, `message`).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// What `network apply` did (`View::Applied`): the change is applied, and pxagent proved over
/// a new connection that it can still reach the host, so the host keeps it. (When that proof
/// fails, the result is an error that names when the host reverts.)
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppliedResult {
    /// Always true.
    pub changed: bool,
    /// The node whose network changed.
    pub node: String,
    /// Always true: the host called its revert off.
    pub confirmed: bool,
    /// The reload task.
    pub upid: Option<String>,
    /// The revert window the host had, seconds.
    pub window: u64,
    /// One sentence for humans.
    pub message: String,
}

/// What `backup job run` did (`View::JobRun`): one vzdump task per node that holds the job's
/// guests. (When a node's run fails, the result is an error that says what each node did.)
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRunResult {
    /// Whether any backup ran (false: the job names no guest the cluster has).
    pub changed: bool,
    /// The job's id.
    pub job: String,
    /// The storage the backups went to.
    pub storage: String,
    /// One entry per node, in node order.
    pub runs: Vec<JobNodeRun>,
    /// VMIDs the job names that no node holds (PVE would fail them as `unable to find VM`).
    pub missing: Vec<u64>,
    /// The job's notification settings, which a run from pxagent does not pass on (no mail
    /// for this run; its scheduled runs still send them).
    pub not_passed: Vec<String>,
    /// One sentence for humans.
    pub message: String,
}

/// One node's part of a [`JobRunResult`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobNodeRun {
    /// The node.
    pub node: String,
    /// The job's guests on it, backed up by this run.
    pub vmids: Vec<u64>,
    /// Its vzdump task.
    pub upid: Option<String>,
    /// How the task ended (`OK`).
    pub exitstatus: Option<String>,
}

/// A node's pending network change (`View::Pending`), as pxagent's helper reads it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingResult {
    /// Whether `interfaces.new` differs from `interfaces`.
    pub pending: bool,
    /// The unified diff PVE would apply (empty when nothing is pending).
    pub diff: String,
    /// An applied change the host reverts unless confirmed: `{id, armed_at, deadline}` (Unix
    /// seconds), or null.
    pub armed: Option<Value>,
}

/// What `iso upload` made (`View::Upload`): the helper published exactly these bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UploadResult {
    /// Always true: the image is on the storage.
    pub changed: bool,
    /// The new volume (`local:iso/NAME.iso`): `vm create --iso` takes it.
    pub volid: String,
    /// The storage it is on.
    pub storage: String,
    /// The bytes sent, all of which arrived.
    pub size: u64,
    /// The SHA-256 the helper computed as it wrote, equal to the file's.
    pub sha256: String,
    /// The local file that was sent.
    pub file: String,
}

/// The result of an action that ran no task (`View::Done`): its exit status was 0.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoneResult {
    /// Always true.
    pub done: bool,
    /// What the command printed, trimmed.
    pub output: String,
}

/// The JSON Schema of an op's `data` (MCP `outputSchema`), from the same types that shape
/// it. Views whose data is the host's JSON as pvesh returned it (config, status, the next
/// VMID …) get a schema that admits any value.
pub fn data_schema(view: View) -> Value {
    fn of<T: schemars::JsonSchema>() -> Value {
        serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Bool(true))
    }
    let mut schema = match view {
        View::Resources(_) => of::<Vec<Resource>>(),
        View::Brief => of::<Resource>(),
        View::Nodes => of::<Vec<NodeEntry>>(),
        View::Storages => of::<Vec<StorageEntry>>(),
        View::Snapshots => of::<Vec<Snapshot>>(),
        View::Content => of::<Vec<ContentEntry>>(),
        View::Log => of::<Vec<LogLine>>(),
        View::Lines => serde_json::json!({
            "type": "array",
            "items": {"type": "string"},
            "description": "the host's lines, oldest first, as pvesh returned them"
        }),
        View::Task => of::<TaskResult>(),
        View::Done => of::<DoneResult>(),
        View::Upload => of::<UploadResult>(),
        View::Applied => of::<AppliedResult>(),
        View::JobRun => of::<JobRunResult>(),
        View::Pending => of::<PendingResult>(),
        View::ClusterStatus | View::Tasks | View::Table(_) => serde_json::json!({
            "type": "array",
            "items": {"type": "object"},
            "description": "the host's entries, as pvesh returned them"
        }),
        // The shape `observe::interfaces` gives the guest agent's answer.
        View::Interfaces => serde_json::json!({
            "type": "array",
            "description": "the guest's network interfaces and their addresses",
            "items": {
                "type": "object",
                "required": ["name", "ipv4", "ipv6", "addresses", "loopback"],
                "properties": {
                    "name": {"type": "string"},
                    "mac": {"type": "string"},
                    "ipv4": {"type": "array", "items": {"type": "string"}},
                    "ipv6": {"type": "array", "items": {"type": "string"}},
                    "addresses": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["address", "type"],
                            "properties": {
                                "address": {"type": "string"},
                                "type": {"type": "string"},
                                "prefix": {"type": "integer"}
                            }
                        }
                    },
                    "loopback": {"type": "boolean"},
                    "statistics": {"type": "object"}
                }
            }
        }),
        // `observe::rrd`: the host's rows sorted by time; which metrics a row has depends on
        // the RRD format (node or guest, PVE 8 or 9) and on what was recorded at that step.
        View::Rrd => serde_json::json!({
            "type": "array",
            "description": "the host's RRD samples, oldest first: `time` (Unix seconds) and the metrics recorded at that step",
            "items": {
                "type": "object",
                "required": ["time"],
                "properties": {"time": {"type": "number"}},
                "additionalProperties": {"type": ["number", "string", "null"]}
            }
        }),
        View::GuestStatus | View::NodeStatus | View::TaskStatus | View::Config => {
            serde_json::json!({
                "type": "object",
                "description": "the host's JSON object, as pvesh returned it"
            })
        }
        View::Number => serde_json::json!({"type": "integer"}),
        View::Wait => serde_json::json!({
            "type": "object",
            "description": "the task's status once it stopped (FORMATS.md §2.12)"
        }),
        View::Object => serde_json::json!({
            "description": "the host's JSON, as pvesh returned it"
        }),
    };
    if let Some(o) = schema.as_object_mut() {
        o.remove("$schema");
    }
    schema
}

fn parse<T: for<'de> Deserialize<'de>>(data: &Value, what: &str) -> Result<T> {
    serde_json::from_value(data.clone())
        .map_err(|e| Error::Remote(format!("unexpected {what} from the host: {e}")))
}

/// Whether a task entry failed: its status is of type `error` by pve-common
/// `PVE::Tools::upid_normalize_status_type` (neither `OK` nor `WARNINGS: N`, and not the
/// `unknown` of an empty status or `unexpected status`). A running task has no status yet.
pub fn task_failed(t: &serde_json::Map<String, Value>) -> bool {
    let status = t.get("status").and_then(Value::as_str).unwrap_or("");
    let warnings = status
        .strip_prefix("WARNINGS: ")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    !matches!(status, "" | "OK" | "RUNNING" | "unexpected status") && !warnings
}

/// Task entries newest first, each with `failed` ([`task_failed`]).
fn tasks(data: &Value) -> Result<Value> {
    let list = data
        .as_array()
        .ok_or_else(|| Error::Remote("unexpected task list from the host: not a list".into()))?;
    let start = |t: &Value| t.get("starttime").and_then(Value::as_f64).unwrap_or(0.0);
    let mut out: Vec<Value> = list
        .iter()
        .filter_map(Value::as_object)
        .map(|t| {
            let mut t = t.clone();
            let failed = task_failed(&t);
            t.insert("failed".into(), Value::Bool(failed));
            Value::Object(t)
        })
        .collect();
    out.sort_by(|a, b| start(b).total_cmp(&start(a)));
    Ok(Value::Array(out))
}

/// What an op's client-side filters ([`crate::catalog::Op::local`]) keep of its normalised
/// answer: for task lists, `errors` (failed only), `since` (started then or later), `vmid`
/// (the task's `id` is the guest's) and `limit` (the newest N, applied last). Any other data
/// passes unchanged.
pub fn keep_local(
    view: View,
    local: &[&str],
    values: &BTreeMap<&'static str, String>,
    data: Value,
) -> Value {
    let View::Tasks = view else { return data };
    let Value::Array(list) = data else {
        return data;
    };
    let values: BTreeMap<&str, &String> = values
        .iter()
        .filter(|(k, _)| local.contains(k))
        .map(|(k, v)| (*k, v))
        .collect();
    let since = values.get("since").and_then(|s| s.parse::<f64>().ok());
    let limit = values.get("limit").and_then(|s| s.parse::<usize>().ok());
    let kept = list.into_iter().filter(|t| {
        let Some(o) = t.as_object() else { return false };
        (!values.contains_key("errors") || task_failed(o))
            && since.is_none_or(|s| o.get("starttime").and_then(Value::as_f64).unwrap_or(0.0) >= s)
            && values.get("vmid").is_none_or(|v| {
                o.get("id").is_some_and(|id| match id {
                    Value::String(s) => s == *v,
                    Value::Number(n) => n.to_string() == **v,
                    _ => false,
                })
            })
    });
    Value::Array(match limit {
        Some(n) => kept.take(n).collect(),
        None => kept.collect(),
    })
}

/// Parse raw pvesh JSON into the op's typed form; `keep_type` filters resource entries.
/// Field names come out in one case style ([`snake_keys`]), except a guest config's keys,
/// which are PVE's parameter names as `vm set` takes them.
pub fn normalize(view: View, data: &Value, keep_type: Option<&str>) -> Result<Value> {
    let typed = typed(view, data, keep_type)?;
    Ok(match view {
        View::Config => typed,
        _ => snake_keys(typed),
    })
}

fn typed(view: View, data: &Value, keep_type: Option<&str>) -> Result<Value> {
    Ok(match view {
        View::Tasks => tasks(data)?,
        View::Resources(only) => {
            let mut list: Vec<Resource> = parse(data, "resource list")?;
            if let Some(t) = keep_type.or(only) {
                list.retain(|r| r.kind == t);
            }
            list.sort_by(|a, b| (a.vmid, &a.id).cmp(&(b.vmid, &b.id)));
            value(&list)
        }
        View::Brief => value(&parse::<Resource>(data, "guest entry")?),
        View::Nodes => {
            let mut list: Vec<NodeEntry> = parse(data, "node list")?;
            list.sort_by(|a, b| a.node.cmp(&b.node));
            value(&list)
        }
        View::Storages => {
            let mut list: Vec<StorageEntry> = parse(data, "storage list")?;
            list.sort_by(|a, b| a.storage.cmp(&b.storage));
            value(&list)
        }
        View::Snapshots => {
            let mut list: Vec<Snapshot> = parse(data, "snapshot list")?;
            // Oldest first; `current` (no snaptime) last, as `qm listsnapshot` shows it.
            list.sort_by_key(|s| s.snaptime.unwrap_or(u64::MAX));
            value(&list)
        }
        View::Content => {
            let mut list: Vec<ContentEntry> = parse(data, "storage content")?;
            list.sort_by(|a, b| {
                (a.content.as_str(), a.vmid, a.ctime, a.volid.as_str()).cmp(&(
                    b.content.as_str(),
                    b.vmid,
                    b.ctime,
                    b.volid.as_str(),
                ))
            });
            value(&list)
        }
        View::Log => {
            let list: Vec<LogLine> = parse(data, "task log")?;
            value(&list)
        }
        View::Lines => {
            let list: Vec<String> = parse(data, "lines")?;
            value(&list)
        }
        View::Interfaces => crate::views::observe::interfaces(data)?,
        View::Rrd => crate::views::observe::rrd(data)?,
        View::Number => {
            let n = data
                .as_u64()
                .or_else(|| data.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(|| {
                    Error::Remote(format!("expected a number from the host, got {data}"))
                })?;
            Value::from(n)
        }
        View::Object
        | View::GuestStatus
        | View::NodeStatus
        | View::TaskStatus
        | View::Config
        | View::ClusterStatus
        | View::Task
        | View::Done
        | View::Upload
        | View::Applied
        | View::JobRun
        | View::Pending
        | View::Wait
        | View::Table(_) => data.clone(),
    })
}

/// One case style for every field name pxagent hands out: PVE's kebab-case keys
/// (`active-state`, `running-qemu`, the guest agent's `rx-bytes`) and apt's PascalCase ones
/// (`OldVersion`) become snake_case (`active_state`, `old_version`), at any depth. Only keys
/// that read as field names change: a key that is data (a drive `scsi0`, a tap device
/// `tap100i0`) has neither a `-` between lower-case words nor an upper-case letter.
pub fn snake_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (snake_key(&k), snake_keys(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(snake_keys).collect()),
        v => v,
    }
}

/// A field name in snake_case: `a-b` → `a_b`, `OldVersion` → `old_version`; anything else
/// (digits first, other characters, already snake) unchanged.
pub fn snake_key(k: &str) -> String {
    let field = k.starts_with(|c: char| c.is_ascii_alphabetic())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !field {
        return k.to_string();
    }
    let mut out = String::with_capacity(k.len() + 4);
    let mut prev_lower = false;
    for c in k.chars() {
        if c == '-' {
            out.push('_');
            prev_lower = false;
        } else if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        }
    }
    out
}

/// A typed view as its JSON (`data`).
pub fn value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

/// Render normalised data for people.
pub fn human(view: View, data: &Value) -> String {
    let s = |v: &Value, k: &str| -> String {
        match v.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    };
    let rows = |v: &Value| -> Vec<Value> { v.as_array().cloned().unwrap_or_default() };
    match view {
        View::Resources(_) => {
            let list = rows(data);
            let guests = list.iter().all(|r| r.get("vmid").is_some());
            if guests && !list.is_empty() {
                table(
                    &[
                        "VMID", "NAME", "TYPE", "NODE", "STATUS", "CPU", "MEMORY", "UPTIME",
                    ],
                    &list
                        .iter()
                        .map(|r| {
                            vec![
                                s(r, "vmid"),
                                s(r, "name"),
                                s(r, "type"),
                                s(r, "node"),
                                style::state(&s(r, "status")),
                                percent(r.get("cpu")),
                                usage(r.get("mem"), r.get("maxmem")),
                                duration(r.get("uptime")),
                            ]
                        })
                        .collect::<Vec<_>>(),
                )
            } else {
                table(
                    &["ID", "TYPE", "NODE", "STATUS", "USAGE"],
                    &list
                        .iter()
                        .map(|r| {
                            let used = if r.get("maxdisk").is_some() && r.get("maxmem").is_none() {
                                usage(r.get("disk"), r.get("maxdisk"))
                            } else {
                                usage(r.get("mem"), r.get("maxmem"))
                            };
                            vec![
                                s(r, "id"),
                                s(r, "type"),
                                s(r, "node"),
                                style::state(&s(r, "status")),
                                used,
                            ]
                        })
                        .collect::<Vec<_>>(),
                )
            }
        }
        View::Nodes => table(
            &["NODE", "STATUS", "CPU", "MEMORY", "UPTIME"],
            &rows(data)
                .iter()
                .map(|n| {
                    vec![
                        s(n, "node"),
                        style::state(&s(n, "status")),
                        percent(n.get("cpu")),
                        usage(n.get("mem"), n.get("maxmem")),
                        duration(n.get("uptime")),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
        View::Storages => table(
            &["STORAGE", "TYPE", "CONTENT", "ACTIVE", "USED", "FREE"],
            &rows(data)
                .iter()
                .map(|st| {
                    vec![
                        s(st, "storage"),
                        s(st, "type"),
                        s(st, "content"),
                        if s(st, "active") == "1" {
                            "yes".into()
                        } else {
                            "no".into()
                        },
                        usage(st.get("used"), st.get("total")),
                        // A disabled or inactive storage reports no space (FORMATS.md §2.10).
                        num(st.get("avail"))
                            .filter(|_| s(st, "active") == "1")
                            .map(bytes)
                            .unwrap_or_default(),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
        View::Snapshots => table(
            &["NAME", "PARENT", "TAKEN", "RAM", "DESCRIPTION"],
            &rows(data)
                .iter()
                .map(|sn| {
                    vec![
                        s(sn, "name"),
                        s(sn, "parent"),
                        sn.get("snaptime")
                            .and_then(Value::as_i64)
                            .map(units::local_time)
                            .unwrap_or_default(),
                        if s(sn, "vmstate") == "1" {
                            "yes".into()
                        } else {
                            String::new()
                        },
                        s(sn, "description")
                            .lines()
                            .next()
                            .unwrap_or("")
                            .to_string(),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
        View::ClusterStatus => table(
            &["TYPE", "NAME", "ID", "ONLINE/QUORATE", "LOCAL", "IP"],
            &rows(data)
                .iter()
                .map(|e| {
                    let online = if s(e, "type") == "cluster" {
                        s(e, "quorate")
                    } else {
                        s(e, "online")
                    };
                    vec![
                        s(e, "type"),
                        s(e, "name"),
                        s(e, "nodeid"),
                        yes_no(&online),
                        yes_no(&s(e, "local")),
                        s(e, "ip"),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
        View::Content => table(
            &["VOLUME", "FORMAT", "SIZE", "CREATED", "VMID"],
            &rows(data)
                .iter()
                .map(|c| {
                    vec![
                        s(c, "volid"),
                        s(c, "format"),
                        num(c.get("size")).map(bytes).unwrap_or_default(),
                        c.get("ctime")
                            .and_then(Value::as_i64)
                            .map(units::local_time)
                            .unwrap_or_default(),
                        s(c, "vmid"),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
        // Columns are humanised by what their key means (a `starttime` column shows local
        // times, a `size` column sizes), and a `status` column is painted.
        View::Table(columns) => table(
            &columns.iter().map(|(_, h)| *h).collect::<Vec<_>>(),
            &rows(data)
                .iter()
                .map(|r| {
                    columns
                        .iter()
                        .map(|(k, _)| match (*k, r.get(*k)) {
                            (_, None) => String::new(),
                            ("status" | "state", Some(v)) => {
                                style::state(&status::humane(k, v, status::Context::Runtime))
                            }
                            (_, Some(v)) => status::humane(k, v, status::Context::Runtime),
                        })
                        .collect()
                })
                .collect::<Vec<_>>(),
        ),
        // Each line escaped on its own (a task log is host text).
        View::Log => rows(data)
            .iter()
            .map(|l| crate::output::escape::cell(&s(l, "t")).into_owned())
            .collect::<Vec<_>>()
            .join("\n"),
        // Each line escaped on its own (the journal is host text).
        View::Lines => rows(data)
            .iter()
            .map(|l| crate::output::escape::cell(l.as_str().unwrap_or_default()).into_owned())
            .collect::<Vec<_>>()
            .join("\n"),
        View::GuestStatus | View::Brief => status::layout(status::Layout::Guest, data),
        View::NodeStatus => status::layout(status::Layout::Node, data),
        View::TaskStatus => status::layout(status::Layout::Task, data),
        View::Config => status::config(data),
        View::Tasks => status::tasks(data),
        View::Interfaces => crate::views::observe::interfaces_human(data),
        View::Rrd => crate::views::observe::rrd_human(data),
        View::Object
        | View::Task
        | View::Done
        | View::Upload
        | View::Applied
        | View::JobRun
        | View::Wait => status::fields(data, status::Context::Runtime),
        View::Number => data.to_string(),
        View::Pending => pending_human(data),
    }
}

/// `network pending` for a person: the diff's lines (escaped), or that nothing is pending,
/// and an armed revert's deadline.
fn pending_human(data: &Value) -> String {
    let mut out = Vec::new();
    if let Some(deadline) = data["armed"]["deadline"].as_u64() {
        out.push(format!(
            "armed: an applied change is reverted at {} unless confirmed",
            crate::base::time::format_rfc3339(deadline)
        ));
    }
    match data["diff"].as_str().filter(|d| !d.is_empty()) {
        Some(diff) => out.extend(
            diff.lines()
                .map(|l| crate::output::escape::cell(l).into_owned()),
        ),
        None => out.push("nothing pending".into()),
    }
    out.join("\n")
}

fn yes_no(v: &str) -> String {
    match v {
        "1" => "yes".into(),
        "0" => "no".into(),
        other => other.into(),
    }
}

/// Key/value lines of an object, nested keys dotted, sorted, values humanised by what their
/// key means (`prefix` is prepended to every key).
pub fn fields(v: &Value, prefix: &str) -> String {
    if prefix.is_empty() {
        return status::fields(v, status::Context::Runtime);
    }
    let mut wrapped = serde_json::Map::new();
    wrapped.insert(prefix.to_string(), v.clone());
    status::fields(&Value::Object(wrapped), status::Context::Runtime)
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(|v| {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    })
}

/// CPU fraction as a percentage.
pub fn percent(v: Option<&Value>) -> String {
    num(v).map(units::percent).unwrap_or_default()
}

/// Bytes in binary units.
pub fn bytes(n: f64) -> String {
    units::bytes(n)
}

/// `used / total (pct)`.
pub fn usage(used: Option<&Value>, total: Option<&Value>) -> String {
    match (num(used), num(total)) {
        (u, Some(t)) => units::usage(u, Some(t)),
        _ => String::new(),
    }
}

/// Seconds as `3d 4h`, `5h 2m`, `42s`.
pub fn duration(v: Option<&Value>) -> String {
    num(v)
        .map(|f| units::duration(f.max(0.0) as u64))
        .unwrap_or_default()
}

/// Client-side filters of a list of guests, nodes and storages (`vm list --status running
/// --tag web --name 'db*' --node pve1`): applied to the entries of the one read the
/// list makes, so they ask nothing more of the host. Every filter given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only entries on this node.
    pub node: Option<String>,
    /// Only entries with this status (`running`, `stopped`, `online`, `available` …).
    pub status: Option<String>,
    /// Only guests carrying this tag (compared without case, as Proxmox stores tags).
    pub tag: Option<String>,
    /// Only entries whose name matches this glob (`*` any run of characters, `?` one).
    pub name: Option<String>,
}

impl Filter {
    /// The flags, their value names and help, for the command line.
    pub const FLAGS: [(&'static str, &'static str, &'static str); 4] = [
        ("node", "NODE", "Only entries on this node"),
        (
            "status",
            "STATUS",
            "Only entries with this status (running, stopped, online, available …)",
        ),
        ("tag", "TAG", "Only guests with this tag"),
        (
            "name",
            "GLOB",
            "Only entries whose name matches (`*` any characters, `?` one; quote it)",
        ),
    ];

    /// Whether a list of this view can be filtered.
    pub fn applies_to(view: View) -> bool {
        matches!(view, View::Resources(_))
    }

    /// Validated filters from what the user typed (exit 2 for a bad value).
    pub fn parse(
        node: Option<String>,
        status: Option<String>,
        tag: Option<String>,
        name: Option<String>,
    ) -> Result<Filter> {
        let check = |flag: &str, v: Option<String>, ok: &dyn Fn(&str) -> bool, want: &str| match v {
            Some(v) if !ok(&v) => Err(Error::usage(format!(
                "invalid --{flag} '{}': expected {want}",
                crate::base::text::printable(&v)
            ))),
            v => Ok(v),
        };
        let node_ok = |v: &str| crate::catalog::Kind::Node.parse("node", v).is_ok();
        let word =
            |v: &str| !v.is_empty() && v.len() <= 32 && v.chars().all(|c| c.is_ascii_lowercase());
        let tag_ok = |v: &str| {
            let mut c = v.chars();
            c.next()
                .is_some_and(|f| f.is_ascii_alphanumeric() || f == '_')
                && c.all(|c| c.is_ascii_alphanumeric() || "_-+.".contains(c))
                && v.len() <= 128
        };
        let glob_ok = |v: &str| {
            !v.is_empty()
                && v.len() <= 253
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.*?_".contains(c))
        };
        Ok(Filter {
            node: check("node", node, &node_ok, "a node name")?,
            status: check(
                "status",
                status,
                &word,
                "a status word such as running or stopped",
            )?,
            tag: check(
                "tag",
                tag,
                &tag_ok,
                "a Proxmox tag (letters, digits, _ - + .)",
            )?,
            name: check(
                "name",
                name,
                &glob_ok,
                "a name or a glob of letters, digits, - . _ with * and ?",
            )?,
        })
    }

    /// Whether no filter was given.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// The entries of a normalised list that pass every filter (anything but a list passes
    /// unchanged). A node's name is its `node`, a storage's its `storage`.
    pub fn apply(&self, data: Value) -> Value {
        let Value::Array(list) = data else {
            return data;
        };
        let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
        let keep = |e: &Value| {
            let node_ok = self
                .node
                .as_ref()
                .is_none_or(|n| text(e, "node").as_ref() == Some(n));
            let status_ok = self
                .status
                .as_ref()
                .is_none_or(|s| text(e, "status").as_ref() == Some(s));
            let tag_ok = self.tag.as_ref().is_none_or(|t| {
                text(e, "tags").is_some_and(|tags| {
                    tags.split([';', ',', ' '])
                        .any(|have| have.eq_ignore_ascii_case(t))
                })
            });
            let name = match text(e, "type").as_deref() {
                Some("node") => text(e, "node"),
                Some("storage") => text(e, "storage"),
                _ => text(e, "name"),
            };
            let name_ok = self
                .name
                .as_ref()
                .is_none_or(|g| name.is_some_and(|n| glob(g, &n)));
            node_ok && status_ok && tag_ok && name_ok
        };
        Value::Array(list.into_iter().filter(keep).collect())
    }
}

/// Whether `text` matches the glob `pattern`: `*` matches any run of characters (also none),
/// `?` exactly one, anything else itself. Iterative, with one backtrack point per `*`, so a
/// pattern of many stars cannot take exponential time.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One case style: PVE's kebab-case and apt's PascalCase field names
    /// become snake_case at any depth; names that are data stay as they are; a guest config
    /// keeps PVE's parameter names.
    #[test]
    fn field_names_come_out_in_snake_case() {
        for (k, want) in [
            ("active-state", "active_state"),
            ("rx-bytes", "rx_bytes"),
            ("OldVersion", "old_version"),
            ("Package", "package"),
            ("ip-address-type", "ip_address_type"),
            ("scsi0", "scsi0"),
            ("tap100i0", "tap100i0"),
            ("already_snake", "already_snake"),
            ("0-weird", "0-weird"),
            ("a.b", "a.b"),
        ] {
            assert_eq!(snake_key(k), want, "{k}");
        }
        let raw = serde_json::json!({"proxmox-support": {"pbs-dirty-bitmap": true},
            "nics": {"tap100i0": {"netin": 1}}, "list": [{"Priority": "optional"}]});
        let out = normalize(View::GuestStatus, &raw, None).unwrap();
        assert_eq!(out["proxmox_support"]["pbs_dirty_bitmap"], true);
        assert_eq!(out["nics"]["tap100i0"]["netin"], 1);
        assert_eq!(out["list"][0]["priority"], "optional");
        let config = serde_json::json!({"net0": "virtio,bridge=vmbr0", "x-odd": 1});
        assert_eq!(normalize(View::Config, &config, None).unwrap(), config);
        // Every table column names a field as normalize hands it on.
        for op in crate::catalog::OPS {
            if let View::Table(cols) = op.view {
                for (key, _) in cols {
                    assert_eq!(snake_key(key), *key, "{}: column {key}", op.id);
                }
            }
        }
    }

    fn fixture_data(name: &str) -> Value {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/pve/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        // The HTTPS captures carry a {"data": …} envelope that pvesh does not print.
        v.get("data").cloned().unwrap_or(v)
    }

    #[test]
    fn real_cluster_resources_parse_and_filter() {
        let raw = fixture_data("https_api_cluster_resources_pve7.4-8.0_capture.json");
        let vms = normalize(View::Resources(Some("qemu")), &raw, None).unwrap();
        let list = vms.as_array().unwrap();
        assert!(!list.is_empty());
        assert!(
            list.iter()
                .all(|r| r["type"] == "qemu" && r["vmid"].is_u64())
        );
        let all = normalize(View::Resources(None), &raw, None).unwrap();
        assert!(all.as_array().unwrap().len() > list.len());
        let text = human(View::Resources(Some("qemu")), &vms);
        assert!(text.starts_with("VMID"), "{text}");
    }

    #[test]
    fn real_nodes_parse() {
        let raw = fixture_data("https_api_nodes_pve7.4-8.0_capture.json");
        let nodes = normalize(View::Nodes, &raw, None).unwrap();
        assert!(
            nodes
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["node"].is_string())
        );
        assert!(human(View::Nodes, &nodes).contains("NODE"));
    }

    #[test]
    fn lenient_numbers() {
        let raw = serde_json::json!([{"id":"lxc/200","type":"lxc","vmid":"200","cpu":"0.5","maxmem":1024,"extra":"kept"}]);
        let v = normalize(View::Resources(None), &raw, None).unwrap();
        assert_eq!(v[0]["vmid"], 200);
        assert_eq!(v[0]["cpu"], 0.5);
        assert_eq!(v[0]["extra"], "kept");
    }

    #[test]
    fn keep_type_filters() {
        let raw = serde_json::json!([{"id":"qemu/100","type":"qemu","vmid":100},{"id":"lxc/200","type":"lxc","vmid":200}]);
        let v = normalize(View::Resources(None), &raw, Some("lxc")).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 1);
        assert_eq!(v[0]["vmid"], 200);
    }

    #[test]
    fn formatting() {
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(duration(Some(&serde_json::json!(90_061))), "1d 1h");
        assert_eq!(
            fields(&serde_json::json!({"a":{"b":1},"c":["x","y"]}), ""),
            "a.b  1\nc    x y"
        );
        assert_eq!(
            fields(&serde_json::json!({"size":1536,"starttime":0}), "")
                .lines()
                .next(),
            Some("size       1.5 KiB")
        );
    }

    #[test]
    fn nextid_is_a_bare_number() {
        // pvesh prints `148` or `"148"` (FORMATS.md §2.13).
        for raw in [serde_json::json!(148), serde_json::json!("148")] {
            let v = normalize(View::Number, &raw, None).unwrap();
            assert_eq!(v, serde_json::json!(148));
            assert_eq!(human(View::Number, &v), "148");
        }
        assert!(normalize(View::Number, &serde_json::json!("x"), None).is_err());
    }

    #[test]
    fn globs() {
        for (p, t, want) in [
            ("web", "web", true),
            ("web", "web1", false),
            ("web*", "web01", true),
            ("*db*", "main-db-2", true),
            ("w?b", "wab", true),
            ("w?b", "wb", false),
            ("*", "", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
        ] {
            assert_eq!(glob(p, t), want, "{p} {t}");
        }
    }

    #[test]
    fn filters_keep_what_matches_every_one_given() {
        let raw = fixture_data("https_api_cluster_resources_pve7.4-8.0_capture.json");
        let all = normalize(View::Resources(None), &raw, None).unwrap();
        let f =
            |node: Option<&str>, status: Option<&str>, tag: Option<&str>, name: Option<&str>| {
                Filter::parse(
                    node.map(String::from),
                    status.map(String::from),
                    tag.map(String::from),
                    name.map(String::from),
                )
                .unwrap()
            };
        let ids = |v: Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(f(None, None, None, None).apply(all.clone()), all);
        // VM 100 (`server1`) runs on node2 in the capture; VM 102 carries one tag,
        // `go-proxmox+cloud-init` (`+` is a tag character, not a separator).
        assert_eq!(
            ids(f(Some("node2"), Some("running"), None, Some("server*")).apply(all.clone())),
            ["qemu/100"]
        );
        assert_eq!(
            ids(f(None, None, Some("Go-Proxmox+Cloud-Init"), None).apply(all.clone())),
            ["qemu/102"]
        );
        assert!(ids(f(None, None, Some("cloud-init"), None).apply(all.clone())).is_empty());
        assert!(ids(f(None, None, None, Some("nomatch*")).apply(all.clone())).is_empty());
        assert_eq!(
            ids(f(Some("node2"), None, None, None).apply(all)),
            [
                "node/node2",
                "storage/node2/cloud-init",
                "storage/node2/local",
                "storage/node2/local-zfs",
                "qemu/100"
            ]
        );
        for (node, status, tag, name) in [
            (Some("a;b"), None, None, None),
            (None, Some("Running!"), None, None),
            (None, None, Some("-x"), None),
            (None, None, None, Some("a b")),
        ] {
            let e = Filter::parse(
                node.map(String::from),
                status.map(String::from),
                tag.map(String::from),
                name.map(String::from),
            )
            .unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
        }
    }
}

#[cfg(test)]
mod task_tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        // `/cluster/tasks` entries (FORMATS.md §2.12): finished ones carry `status` and
        // `endtime`; a running one has neither.
        json!([
            {"upid": "a", "id": "100", "starttime": 100, "endtime": 101, "status": "OK", "node": "pve1", "type": "qmstart"},
            {"upid": "b", "id": "101", "starttime": 300, "endtime": 305, "status": "command 'qm' failed", "node": "pve1", "type": "qmstart"},
            {"upid": "c", "id": "", "starttime": 200, "endtime": 220, "status": "WARNINGS: 2", "node": "pve2", "type": "vzdump"},
            {"upid": "d", "id": "100", "starttime": 400, "node": "pve1", "type": "vzdump"},
            {"upid": "e", "id": "102", "starttime": 250, "endtime": 251, "status": "unexpected status", "node": "pve1", "type": "qmstop"},
            {"upid": "f", "id": "100", "starttime": 150, "endtime": 151, "status": "WARNINGS: x", "node": "pve1", "type": "qmstop"}
        ])
    }

    fn upids(v: &Value) -> Vec<&str> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["upid"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn tasks_come_newest_first_and_say_whether_they_failed() {
        let v = normalize(View::Tasks, &list(), None).unwrap();
        assert_eq!(upids(&v), ["d", "b", "e", "c", "f", "a"]);
        let failed: Vec<bool> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["failed"].as_bool().unwrap())
            .collect();
        assert_eq!(failed, [false, true, false, false, true, false]);
    }

    #[test]
    fn local_filters_apply_only_where_the_op_names_them() {
        let v = normalize(View::Tasks, &list(), None).unwrap();
        let all = ["errors", "since", "limit", "vmid"];
        let vals = |pairs: &[(&'static str, &str)]| -> BTreeMap<&'static str, String> {
            pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
        };
        let keep = |local: &[&str], pairs: &[(&'static str, &str)]| {
            upids(&keep_local(View::Tasks, local, &vals(pairs), v.clone()))
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(keep(&all, &[("errors", "1")]), ["b", "f"]);
        assert_eq!(keep(&all, &[("since", "200")]), ["d", "b", "e", "c"]);
        assert_eq!(keep(&all, &[("vmid", "100")]), ["d", "f", "a"]);
        assert_eq!(keep(&all, &[("vmid", "100"), ("limit", "2")]), ["d", "f"]);
        assert_eq!(keep(&all, &[("errors", "1"), ("since", "200")]), ["b"]);
        // Where the op sends a value itself (task list --vmid), the client does not filter.
        assert_eq!(keep(&[], &[("vmid", "100")]).len(), 6);
        // Other views pass unchanged.
        let obj = json!({"a": 1});
        assert_eq!(
            keep_local(View::Object, &all, &vals(&[("limit", "1")]), obj.clone()),
            obj
        );
    }
}
