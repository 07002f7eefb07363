//! Humane views of one object: a guest's, a node's and a task's status, a
//! guest's config, the task list, and any other object. Key fields come first, each with its
//! unit (`2.0 GiB`, `35.0%`, `3d 4h`, local times); the remaining fields follow, humanised by
//! what their key means ([`humane`]). `-o json` keeps the raw values: only these texts change.
//!
//! Each layout is data: a list of [`Line`]s naming the keys it consumes and how it shows them.
//! Host strings are escaped by the output layer's [`pairs`] and [`table`]; states are painted
//! by [`style::state`].

use serde_json::{Map, Value};

use crate::output::{pairs, style, table, units};

/// How a field is read: the key path's last part decides, plus the kind of object it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Runtime data (status, lists): sizes in bytes.
    Runtime,
    /// A guest's configuration: `memory`, `balloon`, `swap` in MiB.
    Config,
}

/// Keys whose numbers are bytes wherever they appear in runtime data.
const BYTE_KEYS: &[&str] = &[
    "mem",
    "maxmem",
    "disk",
    "maxdisk",
    "netin",
    "netout",
    "diskread",
    "diskwrite",
    "balloon",
    "balloon_min",
    "freemem",
    "memhost",
    "swap",
    "maxswap",
    "used",
    "total",
    "avail",
    "free",
    "available",
    "size",
    "rd_bytes",
    "wr_bytes",
    "actual",
    "max_mem",
    "free_mem",
    "total_mem",
    "last_update_bytes",
    "bytes",
];
/// Keys whose numbers are Unix times.
const TIME_KEYS: &[&str] = &[
    "starttime",
    "endtime",
    "snaptime",
    "ctime",
    "mtime",
    "time",
    "lastsync",
    "last_run",
    "next_run",
    "timestamp",
];
/// Keys whose numbers are fractions of one.
const FRACTION_KEYS: &[&str] = &["cpu", "wait", "iowait", "idle", "used_fraction"];
/// Keys of a guest config whose numbers are MiB.
const CONFIG_MIB_KEYS: &[&str] = &["memory", "balloon", "swap"];

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}

/// One value shown for people, by what its key means: sizes, times, durations and fractions
/// get units; `ctime=N` inside a config's `meta` becomes a local time; anything else is its
/// text. `path` is the dotted key (`memory.total`, `ksm.shared`).
pub fn humane(path: &str, v: &Value, ctx: Context) -> String {
    let leaf = path.rsplit('.').next().unwrap_or(path);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    if let Some(n) = number(v).filter(|_| !v.is_string() || ctx == Context::Config) {
        if ctx == Context::Config && CONFIG_MIB_KEYS.contains(&leaf) {
            return if n == 0.0 && leaf == "balloon" {
                "0 (ballooning off)".into()
            } else {
                units::mebibytes(n)
            };
        }
        if ctx == Context::Runtime {
            if BYTE_KEYS.contains(&leaf) || path == "ksm.shared" {
                return units::bytes(n);
            }
            if TIME_KEYS.contains(&leaf) {
                return units::local_time(n as i64);
            }
            if leaf == "uptime" {
                return units::duration(n.max(0.0) as u64);
            }
            if FRACTION_KEYS.contains(&leaf) {
                return units::percent(n);
            }
            if leaf.ends_with("_ns") {
                return nanos(n);
            }
        }
    }
    if ctx == Context::Config && leaf == "meta" {
        return meta(&text(v));
    }
    text(v)
}

/// Nanoseconds (QEMU's `*_time_ns` counters) as a duration.
fn nanos(n: f64) -> String {
    let secs = n / 1e9;
    if secs < 1.0 {
        format!("{:.1} ms", n / 1e6)
    } else {
        units::duration(secs as u64)
    }
}

/// A config's `meta: creation-qemu=9.0.2,ctime=1761900000` with the time made local.
fn meta(s: &str) -> String {
    s.split(',')
        .map(|part| match part.split_once('=') {
            Some(("ctime", t)) => match t.parse::<i64>() {
                Ok(t) => format!("created {}", units::local_time(t)),
                Err(_) => part.to_string(),
            },
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Flatten an object into `(dotted key, value)` leaves, sorted.
fn leaves<'a>(v: &'a Value, prefix: &str, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(val, &key, out);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for (i, item) in items.iter().enumerate() {
                leaves(item, &format!("{prefix}[{i}]"), out);
            }
        }
        other => out.push((prefix.to_string(), other)),
    }
}

/// Every field of an object as `key  value` lines, humanised ([`humane`]), keys dotted.
pub fn fields(v: &Value, ctx: Context) -> String {
    let mut all = Vec::new();
    leaves(v, "", &mut all);
    pairs(
        &all.iter()
            .map(|(k, val)| (k.clone(), humane(k, val, ctx)))
            .collect::<Vec<_>>(),
    )
}

/// One line of a layout: its label, the keys (top-level) it shows, and how.
struct Line {
    label: &'static str,
    keys: &'static [&'static str],
    show: fn(&Map<String, Value>) -> Option<String>,
}

fn get<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    o.get(k).filter(|v| !v.is_null())
}

fn num(o: &Map<String, Value>, k: &str) -> Option<f64> {
    get(o, k).and_then(number)
}

fn string(o: &Map<String, Value>, k: &str) -> Option<String> {
    get(o, k).map(text).filter(|s| !s.is_empty())
}

fn yes(o: &Map<String, Value>, k: &str) -> bool {
    num(o, k) == Some(1.0)
}

/// `3.5% of 2 CPUs`.
fn cpu_of(o: &Map<String, Value>, cpus: Option<f64>) -> Option<String> {
    let used = num(o, "cpu")?;
    Some(match cpus {
        Some(c) => format!(
            "{} of {c} CPU{}",
            units::percent(used),
            if c == 1.0 { "" } else { "s" }
        ),
        None => units::percent(used),
    })
}

/// `in 1.2 GiB, out 300.0 MiB`.
fn in_out(o: &Map<String, Value>, a: &str, b: &str, la: &str, lb: &str) -> Option<String> {
    match (num(o, a), num(o, b)) {
        (None, None) => None,
        (x, y) => Some(format!(
            "{la} {}, {lb} {}",
            units::bytes(x.unwrap_or(0.0)),
            units::bytes(y.unwrap_or(0.0))
        )),
    }
}

/// A guest's `status/current` (FORMATS.md §2.8; VMs and containers).
const GUEST: &[Line] = &[
    Line {
        label: "name",
        keys: &["name", "vmid"],
        show: |o| {
            let name = string(o, "name").unwrap_or_default();
            Some(match string(o, "vmid") {
                Some(id) => format!("{name} ({id})"),
                None => name,
            })
        },
    },
    Line {
        label: "status",
        keys: &["status", "qmpstatus"],
        show: |o| {
            let status = string(o, "status")?;
            let shown = style::state(&status);
            Some(match string(o, "qmpstatus").filter(|q| *q != status) {
                Some(q) => format!("{shown} ({})", style::state(&q)),
                None => shown,
            })
        },
    },
    Line {
        label: "uptime",
        keys: &["uptime"],
        show: |o| num(o, "uptime").map(|u| units::duration(u.max(0.0) as u64)),
    },
    Line {
        label: "cpu",
        keys: &["cpu", "cpus"],
        show: |o| cpu_of(o, num(o, "cpus")),
    },
    Line {
        label: "memory",
        keys: &["mem", "maxmem"],
        show: |o| Some(units::usage(num(o, "mem"), num(o, "maxmem"))).filter(|s| !s.is_empty()),
    },
    Line {
        label: "swap",
        keys: &["swap", "maxswap"],
        show: |o| {
            num(o, "maxswap")?;
            Some(units::usage(num(o, "swap"), num(o, "maxswap")))
        },
    },
    Line {
        label: "disk",
        keys: &["disk", "maxdisk"],
        // A VM's `disk` is always 0 (QEMU cannot tell); a container's is its root fs use.
        show: |o| match num(o, "disk").filter(|d| *d > 0.0) {
            Some(_) => Some(units::usage(num(o, "disk"), num(o, "maxdisk"))),
            None => num(o, "maxdisk").map(units::bytes),
        },
    },
    Line {
        label: "network",
        keys: &["netin", "netout"],
        show: |o| in_out(o, "netin", "netout", "in", "out"),
    },
    Line {
        label: "disk io",
        keys: &["diskread", "diskwrite"],
        show: |o| in_out(o, "diskread", "diskwrite", "read", "written"),
    },
    Line {
        label: "ha",
        keys: &["ha"],
        show: |o| {
            let ha = get(o, "ha")?.as_object()?;
            Some(if yes(ha, "managed") {
                format!(
                    "managed, {}",
                    style::state(&string(ha, "state").unwrap_or_else(|| "?".into()))
                )
            } else {
                "not managed".into()
            })
        },
    },
    Line {
        label: "agent",
        keys: &["agent"],
        show: |o| get(o, "agent").map(|_| if yes(o, "agent") { "enabled" } else { "off" }.into()),
    },
    Line {
        label: "pid",
        keys: &["pid"],
        show: |o| string(o, "pid"),
    },
    Line {
        label: "qemu",
        keys: &["running_qemu", "running_machine"],
        show: |o| {
            let q = string(o, "running_qemu")?;
            Some(match string(o, "running_machine") {
                Some(m) => format!("{q}, machine {m}"),
                None => q,
            })
        },
    },
    Line {
        label: "tags",
        keys: &["tags"],
        show: |o| {
            string(o, "tags").map(|t| {
                t.split([';', ',', ' '])
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
        },
    },
    Line {
        label: "lock",
        keys: &["lock"],
        show: |o| {
            string(o, "lock")
                .map(|l| style::paint(style::Tone::Warn, &crate::output::escape::cell(&l)))
        },
    },
    Line {
        label: "template",
        keys: &["template"],
        show: |o| yes(o, "template").then(|| "yes".into()),
    },
];

/// `/nodes/N/status` (FORMATS.md §2.3).
const NODE: &[Line] = &[
    Line {
        label: "version",
        keys: &["pveversion"],
        show: |o| string(o, "pveversion"),
    },
    Line {
        label: "kernel",
        keys: &["kversion", "current_kernel"],
        show: |o| {
            string(o, "kversion").or_else(|| {
                get(o, "current_kernel")?
                    .as_object()
                    .and_then(|k| string(k, "release"))
            })
        },
    },
    Line {
        label: "uptime",
        keys: &["uptime"],
        show: |o| num(o, "uptime").map(|u| units::duration(u.max(0.0) as u64)),
    },
    Line {
        label: "cpu",
        keys: &["cpu", "cpuinfo"],
        show: |o| {
            let info = get(o, "cpuinfo").and_then(Value::as_object);
            let mut s = cpu_of(o, info.and_then(|i| num(i, "cpus")))?;
            if let Some(i) = info {
                let model = string(i, "model").unwrap_or_default();
                let sockets = num(i, "sockets").unwrap_or(1.0);
                s.push_str(&format!(
                    " ({model}{}{})",
                    if model.is_empty() { "" } else { ", " },
                    if sockets == 1.0 {
                        "1 socket".to_string()
                    } else {
                        format!("{sockets} sockets")
                    }
                ));
            }
            Some(s)
        },
    },
    Line {
        label: "load",
        keys: &["loadavg"],
        show: |o| string(o, "loadavg"),
    },
    Line {
        label: "io wait",
        keys: &["wait"],
        show: |o| num(o, "wait").map(units::percent),
    },
    Line {
        label: "memory",
        keys: &["memory"],
        show: |o| used_of(o, "memory"),
    },
    Line {
        label: "swap",
        keys: &["swap"],
        show: |o| used_of(o, "swap"),
    },
    Line {
        label: "root fs",
        keys: &["rootfs"],
        // Then what is left: `avail` is `df`'s Avail (statvfs `bavail`: without the blocks
        // reserved for root), what a guest image or backup can still take; `free` is total -
        // used (pve-manager `PVE/API2/Nodes.pm` `status`, from `PVE::Tools::df('/')`).
        show: |o| {
            let used = used_of(o, "rootfs")?;
            let m = get(o, "rootfs")?.as_object()?;
            Some(match num(m, "avail") {
                Some(a) => format!("{used}, {} free", units::bytes(a)),
                None => used,
            })
        },
    },
    Line {
        label: "ksm shared",
        keys: &["ksm"],
        show: |o| {
            get(o, "ksm")?
                .as_object()
                .and_then(|k| num(k, "shared"))
                .map(units::bytes)
        },
    },
    Line {
        label: "boot",
        keys: &["boot_info"],
        show: |o| {
            let b = get(o, "boot_info")?.as_object()?;
            let mode = string(b, "mode").unwrap_or_else(|| "?".into());
            Some(match num(b, "secureboot") {
                Some(s) => format!(
                    "{mode}, secure boot {}",
                    if s == 1.0 { "on" } else { "off" }
                ),
                None => mode,
            })
        },
    },
];

/// `used / total (pct)` of a nested `{used, total}` object.
fn used_of(o: &Map<String, Value>, k: &str) -> Option<String> {
    let m = get(o, k)?.as_object()?;
    Some(units::usage(num(m, "used"), num(m, "total")))
}

/// `/nodes/N/tasks/UPID/status` (FORMATS.md §2.12).
const TASK: &[Line] = &[
    Line {
        label: "status",
        keys: &["status", "exitstatus"],
        show: |o| {
            let status = string(o, "status")?;
            Some(match string(o, "exitstatus") {
                Some(e) => format!("{status}: {}", style::exit_status(&e)),
                None => style::state(&status),
            })
        },
    },
    Line {
        label: "type",
        keys: &["type", "id"],
        show: |o| {
            let t = string(o, "type")?;
            Some(match string(o, "id") {
                Some(id) => format!("{t} {id}"),
                None => t,
            })
        },
    },
    Line {
        label: "started",
        keys: &["starttime"],
        show: |o| num(o, "starttime").map(|t| units::local_time(t as i64)),
    },
    Line {
        label: "node",
        keys: &["node"],
        show: |o| string(o, "node"),
    },
    Line {
        label: "user",
        keys: &["user", "tokenid"],
        show: |o| {
            let u = string(o, "user")?;
            Some(match string(o, "tokenid") {
                Some(t) => format!("{u} (token {t})"),
                None => u,
            })
        },
    },
    Line {
        label: "upid",
        keys: &["upid"],
        show: |o| string(o, "upid"),
    },
];

/// Keys a guest config shows first, in this order; the rest follow sorted.
const CONFIG_FIRST: &[&str] = &[
    "name",
    "hostname",
    "description",
    "tags",
    "ostype",
    "cores",
    "sockets",
    "cpulimit",
    "memory",
    "balloon",
    "swap",
    "onboot",
    "boot",
    "agent",
    "template",
    "lock",
];
/// Keys left out of a node status's human view (`-o json` has them): the CPU flags are one
/// line of a few hundred words.
const NODE_HIDDEN: &[&str] = &["cpuinfo.flags"];
/// Left out of a task status's human view: `pstart`, the process start in clock ticks since
/// the node booted, means nothing to a person (it only makes the UPID unique).
const TASK_HIDDEN: &[&str] = &["pstart"];

/// Which layout a view uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A guest's status.
    Guest,
    /// A node's status.
    Node,
    /// A task's status.
    Task,
}

/// Key lines first, then every other field, humanised.
pub fn layout(which: Layout, data: &Value) -> String {
    let Some(o) = data.as_object() else {
        return fields(data, Context::Runtime);
    };
    let (lines, hidden): (&[Line], &[&str]) = match which {
        Layout::Guest => (GUEST, &[]),
        Layout::Node => (NODE, NODE_HIDDEN),
        Layout::Task => (TASK, TASK_HIDDEN),
    };
    let mut shown: Vec<(String, String)> = Vec::new();
    let mut used: Vec<&str> = Vec::new();
    for line in lines {
        if let Some(v) = (line.show)(o) {
            shown.push((line.label.to_string(), v));
            used.extend(line.keys);
        }
    }
    let rest = Value::Object(
        o.iter()
            .filter(|(k, _)| !used.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    let mut out = pairs(&shown);
    let mut others = Vec::new();
    leaves(&rest, "", &mut others);
    others.retain(|(k, _)| !hidden.contains(&k.as_str()));
    if !others.is_empty() {
        out.push_str("\n\nother fields\n");
        out.push_str(&indent(&pairs(
            &others
                .iter()
                .map(|(k, v)| (k.clone(), humane(k, v, Context::Runtime)))
                .collect::<Vec<_>>(),
        )));
    }
    out
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A guest's configuration: the keys people look for first, then the rest (disks, NICs …)
/// sorted; memory sizes in MiB made readable, `meta`'s creation time local.
pub fn config(data: &Value) -> String {
    let Some(o) = data.as_object() else {
        return fields(data, Context::Config);
    };
    let mut keys: Vec<&String> = o.keys().collect();
    keys.sort_by_key(|k| {
        (
            CONFIG_FIRST
                .iter()
                .position(|f| f == k)
                .unwrap_or(CONFIG_FIRST.len()),
            k.to_string(),
        )
    });
    pairs(
        &keys
            .into_iter()
            .map(|k| (k.clone(), humane(k, &o[k], Context::Config)))
            .collect::<Vec<_>>(),
    )
}

/// Tasks (`/nodes/N/tasks`, FORMATS.md §2.12): when, how long, what, and how it ended; the
/// UPID last, whole, to copy. A long error text is cut (`task status UPID` shows it whole).
pub fn tasks(data: &Value) -> String {
    const STATUS_MAX: usize = 48;
    let rows: Vec<Vec<String>> = data
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(|t| {
            let start = num(t, "starttime");
            let end = num(t, "endtime");
            let status = string(t, "status").unwrap_or_default();
            let running = status == "RUNNING" || end.is_none();
            let shown = if running {
                style::paint(style::Tone::Warn, "running")
            } else {
                let cut: String = if status.chars().count() > STATUS_MAX {
                    let mut s: String = status.chars().take(STATUS_MAX - 1).collect();
                    s.push('…');
                    s
                } else {
                    status.clone()
                };
                match status.as_str() {
                    "OK" => style::paint(style::Tone::Good, "OK"),
                    s if s.starts_with("WARNINGS") => {
                        style::paint(style::Tone::Warn, &crate::output::escape::cell(&cut))
                    }
                    _ => style::paint(style::Tone::Bad, &crate::output::escape::cell(&cut)),
                }
            };
            vec![
                start
                    .map(|s| units::local_time(s as i64))
                    .unwrap_or_default(),
                match (start, end, running) {
                    (Some(s), Some(e), false) => match (e - s).max(0.0) as u64 {
                        0 => "<1s".into(),
                        d => units::duration(d),
                    },
                    _ => String::new(),
                },
                string(t, "node").unwrap_or_default(),
                string(t, "type").unwrap_or_default(),
                string(t, "id").unwrap_or_default(),
                string(t, "user").unwrap_or_default(),
                shown,
                string(t, "upid").unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "STARTED", "TOOK", "NODE", "TYPE", "ID", "USER", "STATUS", "UPID",
        ],
        &rows,
    )
}

/// `pxagent status`'s guest counts for people. The JSON keeps them as `KIND_STATE: N`
/// (`vm_running`, `ct_stopped`, …: agents read these keys); people get one line per kind, like
/// the other key lines: `VMs         2 running, 1 stopped` and `containers  1 running`, the
/// running ones first, each state painted. A key of another form is shown as it is (escaped).
pub fn guest_counts(guests: &Value) -> String {
    const KINDS: &[(&str, &str)] = &[("vm_", "VMs"), ("ct_", "containers")];
    let Some(o) = guests.as_object() else {
        return text(guests);
    };
    let mut lines: Vec<(String, String)> = Vec::new();
    for (prefix, label) in KINDS {
        let mut states: Vec<(&str, String)> = o
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?, text(v))))
            .collect();
        states.sort_by_key(|(state, _)| (*state != "running", *state));
        if !states.is_empty() {
            let counts: Vec<String> = states
                .iter()
                .map(|(state, n)| format!("{n} {}", style::state(state)))
                .collect();
            lines.push((label.to_string(), counts.join(", ")));
        }
    }
    lines.extend(
        o.iter()
            .filter(|(k, _)| !KINDS.iter().any(|(prefix, _)| k.starts_with(prefix)))
            .map(|(k, v)| (crate::output::escape::cell(k).into_owned(), text(v))),
    );
    if lines.is_empty() {
        return "none".into();
    }
    pairs(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// No 9+-digit number (a raw byte count or epoch) in a human view.
    fn no_raw_numbers(text: &str) {
        let re = regex::Regex::new(r"[0-9]{9,}").unwrap();
        assert!(!re.is_match(text), "raw number in:\n{text}");
    }

    fn vm_status() -> Value {
        // The shape of FORMATS.md §2.8 for a running VM (as the simulator answers), with its
        // keys as `normalize` hands them on.
        crate::views::snake_keys(
            json!({"agent":1,"balloon":2147483648u64,"ballooninfo":{"actual":2147483648u64,"free_mem":1073741824,"max_mem":2147483648u64,"total_mem":2147483648u64},
            "blockstat":{"scsi0":{"rd_bytes":4510777856u64,"rd_operations":1101264,"wr_bytes":6059209728u64,"flush_total_time_ns":123456789012u64}},
            "cpu":0.0249,"cpus":2,"disk":0,"diskread":4510777856u64,"diskwrite":6059209728u64,"freemem":1073741824,
            "ha":{"managed":0},"maxdisk":34359738368u64,"maxmem":2147483648u64,"mem":1073741824,"memhost":1073741824,"name":"web",
            "netin":2456116121u64,"netout":545248946,"nics":{"tap100i0":{"netin":2456116121u64,"netout":545248946}},"pid":4242,
            "proxmox-support":{"pbs-dirty-bitmap":true},"qmpstatus":"running","running-machine":"pc-i440fx-10.1+pve0",
            "running-qemu":"10.1.2","status":"running","uptime":874350,"vmid":100,"pressurecpusome":0.01}),
        )
    }

    #[test]
    fn a_vm_status_shows_units_first_and_no_raw_numbers() {
        let text = style::render(&layout(Layout::Guest, &vm_status()), false).into_owned();
        let first: Vec<&str> = text.lines().take(4).collect();
        assert_eq!(first[0], "name     web (100)", "{text}");
        assert_eq!(first[1], "status   running");
        assert_eq!(first[2], "uptime   10d 2h");
        assert_eq!(first[3], "cpu      2.5% of 2 CPUs");
        assert!(text.contains("memory   1.0 GiB / 2.0 GiB (50%)"), "{text}");
        assert!(text.contains("disk     32.0 GiB"), "{text}");
        assert!(
            text.contains("network  in 2.3 GiB, out 520.0 MiB"),
            "{text}"
        );
        assert!(text.contains("ha       not managed"), "{text}");
        assert!(text.contains("  ballooninfo.actual"), "{text}");
        assert!(
            text.contains("blockstat.scsi0.flush_total_time_ns  2m 3s"),
            "{text}"
        );
        no_raw_numbers(&text);
    }

    #[test]
    fn a_node_status_shows_units() {
        let raw = json!({"cpu":0.12,"cpuinfo":{"cpus":16,"model":"AMD Ryzen 7 5800X","sockets":1,"flags":"fpu vme"},
            "kversion":"Linux 6.17.2-1-pve #1 SMP","loadavg":["0.15","0.25","0.30"],
            "memory":{"available":60000000000u64,"free":50000000000u64,"total":67108864000u64,"used":7108864000u64},
            "pveversion":"pve-manager/9.1.1/42db4a6cf33dac83","rootfs":{"avail":91268055040u64,"free":96636764160u64,"total":107374182400u64,"used":10737418240u64},
            "swap":{"free":8589930496u64,"total":8589930496u64,"used":0},"uptime":90061,"wait":0.0008,"ksm":{"shared":0},
            "boot-info":{"mode":"efi","secureboot":0},"idle":0});
        let raw = crate::views::snake_keys(raw);
        let text = style::render(&layout(Layout::Node, &raw), false).into_owned();
        assert!(text.starts_with("version"), "{text}");
        assert!(
            text.contains("cpu         12.0% of 16 CPUs (AMD Ryzen 7 5800X, 1 socket)"),
            "{text}"
        );
        assert!(text.contains("load        0.15 0.25 0.30"), "{text}");
        assert!(
            text.contains("root fs     10.0 GiB / 100.0 GiB (10%)"),
            "{text}"
        );
        // What is left for images and backups: `avail`, not `free` (root's reserve).
        assert!(text.contains("(10%), 85.0 GiB free"), "{text}");
        assert!(!text.contains("fpu vme"), "{text}");
        no_raw_numbers(&text);
    }

    #[test]
    fn a_task_status_and_list_show_local_times() {
        let t = json!({"exitstatus":"OK","id":"100","node":"pve1","pid":1234,"pstart":123456789,"starttime":1700000000,
            "status":"stopped","type":"qmstart","upid":"UPID:pve1:000004D2:075BCD15:6553F100:qmstart:100:root@pam:","user":"root@pam"});
        let text = style::render(&layout(Layout::Task, &t), false).into_owned();
        assert!(
            text.starts_with("status   stopped: OK\ntype     qmstart 100\nstarted  "),
            "{text}"
        );
        assert!(
            text.contains("pid  1234") && !text.contains("pstart"),
            "{text}"
        );
        let mut listed = t.clone();
        listed["endtime"] = json!(1_700_000_090);
        listed["status"] = json!("OK");
        let list = style::render(&tasks(&json!([listed])), false).into_owned();
        assert!(list.starts_with("STARTED"), "{list}");
        assert!(
            list.contains("  1m 30s  pve1  qmstart  100  root@pam  OK      UPID:"),
            "{list}"
        );
        no_raw_numbers(&list);
    }

    #[test]
    fn configs_read_memory_as_mib_and_meta_times_as_local() {
        let c = json!({"memory":"2048","balloon":0,"cores":2,"name":"web","meta":"creation-qemu=9.0.2,ctime=1761900000","scsi0":"local-lvm:vm-100-disk-0,size=32G"});
        let text = config(&c);
        assert!(
            text.starts_with(
                "name     web\ncores    2\nmemory   2.0 GiB\nballoon  0 (ballooning off)"
            ),
            "{text}"
        );
        assert!(text.contains("creation-qemu=9.0.2, created "), "{text}");
        no_raw_numbers(&text);
    }

    #[test]
    fn guest_counts_read_like_the_other_key_lines() {
        let g = json!({"ct_running": 3, "ct_stopped": 1, "vm_paused": 1, "vm_running": 2, "vm_stopped": 4});
        let text = style::render(&guest_counts(&g), false).into_owned();
        assert_eq!(
            text,
            "VMs         2 running, 1 paused, 4 stopped\ncontainers  3 running, 1 stopped"
        );
        assert!(!text.contains("_running") && !text.contains(':'), "{text}");
        // Only containers: no VM line; a state word from the host is escaped.
        let g = json!({"ct_evil\u{1b}[2J": 1});
        let text = guest_counts(&g);
        assert!(text.starts_with("containers  1 evil\\u{1b}[2J"), "{text}");
        assert_eq!(guest_counts(&json!({})), "none");
    }

    #[test]
    fn host_strings_cannot_reach_the_terminal_raw() {
        let mut s = vm_status();
        s["name"] = json!("evil\u{1b}]0;pwned\u{7}\u{202e}");
        let text = layout(Layout::Guest, &s);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert!(
            text.contains("evil\\u{1b}]0;pwned\\u{7}\\u{202e}"),
            "{text}"
        );
    }
}
