//! The observation reads: a VM's interfaces from its guest agent, RRD metrics history, every
//! node's tasks, the HA manager's status and a node's network interfaces. Sources (FORMATS §0
//! snapshot commits):
//!
//! * `GET …/qemu/{vmid}/agent/network-get-interfaces`: qemu-server `API2/Qemu/Agent.pm`
//!   (`assert_agent_available`, then `{ result => <agent answer> }`); the answer's shape is qemu
//!   `qga/qapi-schema.json` GuestNetworkInterface (`tests/fixtures/pve/
//!   qga_network_get_interfaces_schema_sample.json`, not a capture).
//! * `GET /nodes/{node}/rrddata`, `…/{qemu,lxc}/{vmid}/rrddata --timeframe T [--cf C]`:
//!   pve-cluster 7091d92e5949 `PVE::RRD::create_rrd_data` (PVE 9 steps: hour 60×60 s, day
//!   1440×60 s, week 336×30 min, month 1440×30 min, year 1440×6 h; one row per step with
//!   `time` and the sources that have a value; the newest row is dropped when it holds only
//!   `time`), sources from pmxcfs `status.c` (`pve-node-9.0`, `pve-vm-9.0`); what pvestatd
//!   stores for a stopped guest (only maxcpu, maxmem, maxdisk, disk: pve-manager
//!   `PVE/Service/pvestatd.pm`); REAL `https_api_node_rrddata_pve9_capture.json` for the
//!   values' form (floats, fractions for cpu/iowait, bytes per second for net/disk I/O).
//!   The numbers are deterministic stand-ins, like the rest of the simulator's statistics.
//! * `GET /cluster/tasks`: pve-manager 14a22df35955 `PVE/API2/Cluster.pm` `tasks` →
//!   pve-cluster `get_tasklist` (every node's list, in node order) → pve-common
//!   `RESTEnvironment::active_workers` (running tasks, then the 25 newest finished ones, newest
//!   first; finished ones lose `pid`/`pstart` and carry `endtime`, `status` and `saved` — the
//!   string `"1"`, a regex capture in `INotify::read_active_workers`).
//! * `GET /cluster/ha/status/current`: pve-ha-manager b71218f279d5 `src/PVE/API2/HA/Status.pm`
//!   (`quorum`, `master`, `fencing`, one `lrm:<node>`, one `service:<sid>` entry each); the
//!   texts match the simulator's `ha-manager status` (FORMATS §3.13).
//! * `GET /nodes/{node}/network`: pve-manager `PVE/API2/Network.pm` `index`; the shape of REAL
//!   `pvesh_nodes_network_json_pve9.1.json` (no `lo`, 0/1 booleans, `bridge_fd`/`netmask` as
//!   strings, hash order).

use serde_json::{Map, Value, json};

use crate::state::{Guest, Kind, Node, State};
use crate::{Ctx, Failure, guest, timefmt};

/// `…/agent/network-get-interfaces`: `lo`, then one `ethN` per `netN` of the VM, with the
/// MAC of its config, an IPv4 address from the VM's id and the EUI-64 link-local IPv6.
pub fn agent_interfaces(st: &State, node: &str, vmid: u32, now: i64) -> Result<Value, Failure> {
    let g = guest::available(st, node, vmid)?;
    let up = u64::try_from(g.uptime(now)).unwrap_or(0);
    let stats = |rx: u64, tx: u64| {
        json!({"rx-bytes": rx, "rx-dropped": 0, "rx-errs": 0, "rx-packets": rx / 600,
               "tx-bytes": tx, "tx-dropped": 0, "tx-errs": 0, "tx-packets": tx / 600})
    };
    let mut out = vec![json!({
        "hardware-address": "00:00:00:00:00:00", "name": "lo",
        "ip-addresses": [
            {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
            {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128}
        ],
        "statistics": stats(5408, 5408)
    })];
    for i in 0..32 {
        let Some(net) = g.config.get(&format!("net{i}")).and_then(Value::as_str) else {
            continue;
        };
        let Some(mac) = net
            .split(',')
            .next()
            .and_then(|m| m.split_once('='))
            .map(|(_, mac)| mac.to_ascii_lowercase())
        else {
            continue;
        };
        let ipv4 = format!("192.168.{}.{}", 100 + i, vmid % 200 + 20);
        out.push(json!({
            "hardware-address": mac, "name": format!("eth{i}"),
            "ip-addresses": [
                {"ip-address": ipv4, "ip-address-type": "ipv4", "prefix": 24},
                {"ip-address": link_local(&mac), "ip-address-type": "ipv6", "prefix": 64}
            ],
            "statistics": stats(up * 12_345, up * 2_345)
        }));
    }
    Ok(json!({ "result": out }))
}

/// The EUI-64 link-local address of a MAC (`fe80::be24:11ff:fe5a:64`).
fn link_local(mac: &str) -> String {
    let b: Vec<u8> = mac
        .split(':')
        .filter_map(|x| u8::from_str_radix(x, 16).ok())
        .collect();
    if b.len() != 6 {
        return "fe80::1".into();
    }
    let words = [
        u16::from_be_bytes([b[0] ^ 0x02, b[1]]),
        u16::from_be_bytes([b[2], 0xff]),
        u16::from_be_bytes([0xfe, b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
    ];
    format!(
        "fe80::{:x}:{:x}:{:x}:{:x}",
        words[0], words[1], words[2], words[3]
    )
}

/// `(step seconds, steps)` of a time frame in PVE 9's RRD layout.
fn frame(timeframe: &str) -> (i64, i64) {
    match timeframe {
        "day" => (60, 1440),
        "week" => (1800, 336),
        "month" => (1800, 1440),
        "year" => (21_600, 1440),
        "decade" => (604_800, 570),
        _ => (60, 60),
    }
}

/// A smooth deterministic wiggle in 0..1 for step `t` of series `seed`.
fn wave(seed: u64, t: i64) -> f64 {
    let x = (t as f64 / 3600.0) + seed as f64 * 0.7;
    0.5 + 0.35 * x.sin() + 0.15 * (x * 3.1).cos()
}

fn rows(now: i64, timeframe: &str, mut row: impl FnMut(i64) -> Map<String, Value>) -> Vec<Value> {
    let (step, count) = frame(timeframe);
    let ctime = step * (now / step);
    let mut out: Vec<Value> = (0..count)
        .map(|i| {
            let t = ctime - step * (count - i);
            let mut m = row(t);
            m.insert("time".into(), json!(t));
            Value::Object(m)
        })
        .collect();
    if out
        .last()
        .is_some_and(|r| r.as_object().is_some_and(|m| m.len() == 1))
    {
        out.pop();
    }
    out
}

/// `/nodes/{node}/rrddata`: a `pve-node-9.0` row per step.
pub fn node_rrd(n: &Node, now: i64, timeframe: &str) -> Value {
    let seed = u64::from(n.nodeid);
    Value::Array(rows(now, timeframe, |t| {
        let mut m = Map::new();
        if t < n.boot_time {
            return m;
        }
        let w = wave(seed, t);
        let mem = n.mem as f64 * (0.9 + 0.2 * w);
        let vals = [
            ("loadavg", json!(0.2 + 1.5 * w)),
            ("maxcpu", json!(n.maxcpu)),
            ("cpu", json!(n.cpu * (0.5 + w))),
            ("iowait", json!(0.0009 * w)),
            ("memtotal", json!(n.maxmem)),
            ("memused", json!(mem)),
            ("memavailable", json!(n.maxmem as f64 - mem)),
            ("arcsize", json!(0)),
            ("swaptotal", json!(8_589_930_496u64)),
            ("swapused", json!(0)),
            ("roottotal", json!(n.maxdisk)),
            ("rootused", json!(n.disk)),
            ("netin", json!(95_589.45 * w)),
            ("netout", json!(35_853.73 * w)),
            ("pressurecpusome", json!(0.07 * w)),
            ("pressureiosome", json!(1.1 * w)),
            ("pressureiofull", json!(1.0 * w)),
            ("pressurememorysome", json!(0)),
            ("pressurememoryfull", json!(0)),
        ];
        for (k, v) in vals {
            m.insert(k.into(), v);
        }
        m
    }))
}

/// `…/{vmid}/rrddata`: a `pve-vm-9.0` row per step; while the guest did not run, only its
/// sizes.
pub fn guest_rrd(g: &Guest, now: i64, timeframe: &str) -> Value {
    let seed = u64::from(g.vmid);
    let since = if g.running { g.started_at } else { None };
    Value::Array(rows(now, timeframe, |t| {
        let mut m = Map::new();
        m.insert("maxcpu".into(), json!(g.cpus()));
        m.insert("maxmem".into(), json!(g.maxmem()));
        m.insert("maxdisk".into(), json!(g.maxdisk));
        let disk = if g.kind == Kind::Lxc {
            g.maxdisk / 6
        } else {
            0
        };
        m.insert("disk".into(), json!(disk));
        if since.is_none_or(|s| t < s) {
            return m;
        }
        let w = wave(seed, t);
        let mem = g.maxmem() as f64 * (0.3 + 0.2 * w);
        let vals = [
            ("cpu", json!(0.02 + 0.1 * w)),
            ("mem", json!(mem)),
            ("netin", json!(12_345.0 * w)),
            ("netout", json!(2_345.0 * w)),
            ("diskread", json!(4_096.0 * w)),
            ("diskwrite", json!(8_192.0 * w)),
            ("pressurecpusome", json!(0.05 * w)),
            ("pressurecpufull", json!(0.01 * w)),
            ("pressureiosome", json!(0.2 * w)),
            ("pressureiofull", json!(0.1 * w)),
            ("pressurememorysome", json!(0)),
            ("pressurememoryfull", json!(0)),
        ];
        for (k, v) in vals {
            m.insert(k.into(), v);
        }
        if g.kind == Kind::Qemu {
            m.insert("memhost".into(), json!(mem));
        }
        m
    }))
}

/// Finished tasks a node shares with the cluster (`$MAX_FINISHED` in `active_workers`).
const MAX_FINISHED: usize = 25;

/// `/cluster/tasks`: each node's shared list, nodes in order.
pub fn cluster_tasks(st: &State) -> Value {
    let mut out = Vec::new();
    for n in &st.nodes {
        out.extend(
            st.tasks
                .iter()
                .rev()
                .filter(|t| t.node == n.name)
                .take(MAX_FINISHED)
                .map(|t| {
                    json!({
                        "endtime": t.endtime, "id": t.id, "node": t.node, "saved": "1",
                        "starttime": t.starttime, "status": t.exitstatus, "type": t.kind,
                        "upid": t.upid, "user": t.user
                    })
                }),
        );
    }
    Value::Array(out)
}

/// `/cluster/ha/status/current`, as the simulator's `ha-manager status` prints it.
pub fn ha_status(st: &State, ctx: &Ctx) -> Value {
    let now = ctx.now;
    let master = st.local_node.clone();
    let services: Vec<(String, &Guest)> = st
        .guests
        .values()
        .filter(|g| g.ha.is_some())
        .map(|g| {
            let kind = if g.kind == Kind::Qemu { "vm" } else { "ct" };
            (format!("{kind}:{}", g.vmid), g)
        })
        .collect();
    let mut out = vec![json!({
        "id": "quorum", "node": st.local_node, "quorate": 1, "status": "OK", "type": "quorum"
    })];
    let active = !services.is_empty();
    let (state, ts) = if active {
        ("active", now - 3)
    } else {
        ("idle", now - 7)
    };
    out.push(json!({
        "id": "master", "node": master, "status": format!("{master} ({state}, {})", timefmt::ctime(ts)),
        "timestamp": ts, "type": "master"
    }));
    let (armed, wd) = if active {
        ("armed", "CRM watchdog active")
    } else {
        ("standby", "CRM watchdog standby")
    };
    out.push(json!({
        "armed-state": armed, "id": "fencing", "node": master,
        "status": format!("{armed} ({wd})"), "type": "fencing"
    }));
    if active {
        for (i, n) in st.nodes.iter().enumerate() {
            let lrm = if services.iter().any(|(_, g)| g.node == n.name) {
                "active, watchdog active"
            } else {
                "idle, watchdog standby"
            };
            let ts = now - 1 - i as i64;
            out.push(json!({
                "id": format!("lrm:{}", n.name), "node": n.name,
                "status": format!("{} ({lrm}, {})", n.name, timefmt::ctime(ts)),
                "timestamp": ts, "type": "lrm"
            }));
        }
    }
    for (sid, g) in services {
        let ha =
            g.ha.as_ref()
                .map(|h| (h.service_state(), h.request.clone()));
        let (state, request) = ha.unwrap_or(("stopped", "stopped".into()));
        out.push(json!({
            "crm_state": state, "id": format!("service:{sid}"), "node": g.node,
            "request_state": request, "sid": sid, "state": state,
            "status": format!("{sid} ({}, {state})", g.node), "type": "service"
        }));
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    const NOW: i64 = 1_790_000_000;

    #[test]
    fn agent_interfaces_follow_the_config_and_the_agent() {
        let st = initial(NOW);
        let v = agent_interfaces(&st, "pve1", 100, NOW).unwrap();
        let list = v["result"].as_array().unwrap();
        assert_eq!(list[0]["name"], "lo");
        assert_eq!(list[1]["hardware-address"], "bc:24:11:5a:00:64");
        assert_eq!(list[1]["ip-addresses"][0]["ip-address"], "192.168.100.120");
        assert_eq!(
            list[1]["ip-addresses"][1]["ip-address"],
            "fe80::be24:11ff:fe5a:64"
        );
        // The fixture's keys, nothing else.
        let sample: Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/fixtures/pve/qga_network_get_interfaces_schema_sample.json"
            ))
            .unwrap(),
        )
        .unwrap();
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(keys(&list[1]), keys(&sample["result"][1]));
        assert_eq!(
            keys(&list[1]["statistics"]),
            keys(&sample["result"][1]["statistics"])
        );
        assert_eq!(
            agent_interfaces(&st, "pve1", 110, NOW).unwrap_err().msg,
            "QEMU guest agent is not running"
        );
        assert_eq!(
            agent_interfaces(&st, "pve1", 102, NOW).unwrap_err().msg,
            "No QEMU guest agent configured"
        );
    }

    #[test]
    fn rrd_rows_follow_pve9_steps_and_the_real_sources() {
        let st = initial(NOW);
        let n = st.node("pve1").unwrap();
        let hour = node_rrd(n, NOW, "hour");
        let rows = hour.as_array().unwrap();
        assert_eq!(rows.len(), 60);
        assert_eq!(
            rows[1]["time"].as_i64().unwrap() - rows[0]["time"].as_i64().unwrap(),
            60
        );
        let real: Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/fixtures/pve/https_api_node_rrddata_pve9_capture.json"
            ))
            .unwrap(),
        )
        .unwrap();
        let mut want: Vec<&String> = real["data"][0].as_object().unwrap().keys().collect();
        let mut got: Vec<&String> = rows[5].as_object().unwrap().keys().collect();
        want.sort();
        got.sort();
        assert_eq!(got, want);
        assert_eq!(node_rrd(n, NOW, "week").as_array().unwrap().len(), 336);
        // A stopped VM has only its sizes.
        let stopped = guest_rrd(&st.guests[&102], NOW, "hour");
        let keys: Vec<&String> = stopped[0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["disk", "maxcpu", "maxdisk", "maxmem", "time"]);
        let running = guest_rrd(&st.guests[&100], NOW, "hour");
        assert!(running[0]["cpu"].as_f64().unwrap() > 0.0);
        assert!(running[0]["memhost"].is_number());
    }

    #[test]
    fn cluster_tasks_and_ha_status() {
        let st = initial(NOW);
        let tasks = cluster_tasks(&st);
        let list = tasks.as_array().unwrap();
        assert_eq!(list.len(), st.tasks.len());
        assert!(
            list.iter()
                .all(|t| t["saved"] == "1" && t.get("pid").is_none())
        );
        assert_eq!(list[0]["node"], "pve1");
        assert_eq!(list.last().unwrap()["node"], "pve2");
        let ha = ha_status(&st, &Ctx::new(NOW));
        let types: Vec<&str> = ha
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "quorum", "master", "fencing", "lrm", "lrm", "lrm", "service"
            ]
        );
        let svc = ha.as_array().unwrap().last().unwrap();
        assert_eq!(svc["status"], "vm:104 (pve2, stopped)");
        assert_eq!(svc["sid"], "vm:104");
    }
}
