//! The JSON shapes of the API endpoints pxagent reads, built from the state exactly as pvesh
//! prints them (FORMATS §1.6, §2): one line, keys sorted, no spaces, no `{"data":…}` envelope,
//! booleans as 0/1, optional keys absent, a few numbers as strings.
//!
//! Key order is produced by [`canonical`] itself (not by serde_json's map type), so a workspace
//! build that turns on serde_json's `preserve_order` cannot change the output.

use serde_json::{Map, Value, json};

use crate::Failure;
use crate::state::{Guest, Kind, Node, State, Storage, disks_of};
use crate::task;

/// `to_json($data, {canonical => 1})` + `"\n"`: compact, keys sorted at every level.
pub fn canonical(v: &Value) -> String {
    let mut s = String::new();
    write_canonical(v, &mut s);
    s
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            out.push('{');
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        // Perl prints a number without a fraction as an integer (`0`, not `0.0`).
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => out.push_str(&format!("{f:.0}")),
            _ => out.push_str(&n.to_string()),
        },
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Map<_, _>>(),
    )
}

fn insert(v: &mut Value, k: &str, x: Value) {
    if let Value::Object(m) = v {
        m.insert(k.to_string(), x);
    }
}

/// A 40-hex-digit stand-in for the SHA-1 `digest` of a config or firewall file (same shape,
/// not a real SHA-1).
pub fn digest(config: &impl serde::Serialize) -> String {
    let text = canonical(&serde_json::to_value(config).unwrap_or(Value::Null));
    let mut out = String::new();
    for seed in 0u64..3 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out.truncate(40);
    out
}

/// `/version` (FORMATS §2.1).
pub fn version(st: &State) -> Value {
    json!({"release": st.version.release, "repoid": st.version.repoid, "version": st.version.version})
}

fn uptime(n: &Node, now: i64) -> i64 {
    (now - n.boot_time).max(0)
}

/// One `/nodes` entry (FORMATS §2.2, REAL `https_api_nodes_pve7.4-8.0_capture.json`).
fn node_entry(n: &Node, now: i64) -> Value {
    let mut v = obj(vec![
        ("id", json!(format!("node/{}", n.name))),
        ("node", json!(n.name)),
        ("type", json!("node")),
        ("status", json!(if n.online { "online" } else { "offline" })),
        ("level", json!("")),
        ("ssl_fingerprint", json!(n.ssl_fingerprint)),
        ("maxcpu", json!(n.maxcpu)),
        ("maxmem", json!(n.maxmem)),
        ("maxdisk", json!(n.maxdisk)),
    ]);
    if n.online {
        insert(&mut v, "uptime", json!(uptime(n, now)));
        insert(&mut v, "cpu", json!(n.cpu));
        insert(&mut v, "mem", json!(n.mem));
        insert(&mut v, "disk", json!(n.disk));
    }
    v
}

/// `/nodes` (FORMATS §2.2).
pub fn nodes(st: &State, now: i64) -> Value {
    Value::Array(st.nodes.iter().map(|n| node_entry(n, now)).collect())
}

/// `/nodes/{node}/status` (FORMATS §2.3 [SRC, no real capture]): loadavg and cpuinfo.mhz etc. as
/// strings.
pub fn node_status(st: &State, n: &Node, now: i64) -> Value {
    let kernel_release = "6.17.2-1-pve";
    let kernel_version = "#1 SMP PREEMPT_DYNAMIC PMX 6.17.2-1 (2025-10-21T11:55Z)";
    let swap_total: u64 = 8_589_930_496;
    json!({
        "boot-info": {"mode": "efi", "secureboot": 0},
        "cpu": n.cpu,
        "cpuinfo": {
            "cores": n.maxcpu / 2,
            "cpus": n.maxcpu,
            "family": "25",
            "flags": "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf pni pclmulqdq monitor ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba ibrs ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf xsaveerptr rdpru wbnoinvd arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif v_spec_ctrl umip pku ospke vaes vpclmulqdq rdpid overflow_recov succor smca fsrm",
            "hvm": "1",
            "mhz": "3792.874",
            "model": "AMD Ryzen 7 5800X 8-Core Processor",
            "sockets": 1,
            "user_hz": 100
        },
        "current-kernel": {"machine": "x86_64", "release": kernel_release, "sysname": "Linux", "version": kernel_version},
        "idle": 0,
        "ksm": {"shared": 0},
        "kversion": format!("Linux {kernel_release} {kernel_version}"),
        "loadavg": ["0.15", "0.25", "0.30"],
        "memory": {"available": n.maxmem - n.mem, "free": n.maxmem - n.mem - n.maxmem / 10, "total": n.maxmem, "used": n.mem},
        "pveversion": format!("pve-manager/{}/{}", st.version.version, st.version.repoid),
        "rootfs": {"avail": n.maxdisk - n.disk, "free": n.maxdisk - n.disk, "total": n.maxdisk, "used": n.disk},
        "swap": {"free": swap_total, "total": swap_total, "used": 0},
        "uptime": uptime(n, now),
        "wait": 0.000_812_345_679_012_346
    })
}

/// `/cluster/status` (FORMATS §2.5, REAL `https_api_cluster_status_pve7.4-8.0_capture.json`).
pub fn cluster_status(st: &State) -> Value {
    let mut out = vec![json!({
        "id": "cluster", "name": st.cluster, "nodes": st.nodes.len(),
        "quorate": 1, "type": "cluster", "version": st.config_version
    })];
    for n in &st.nodes {
        out.push(json!({
            "id": format!("node/{}", n.name), "ip": n.ip, "level": "",
            "local": i32::from(n.name == st.local_node), "name": n.name, "nodeid": n.nodeid,
            "online": i32::from(n.online), "type": "node"
        }));
    }
    Value::Array(out)
}

/// Runtime numbers of a guest (deterministic stand-ins for RRD / QMP data).
struct Stats {
    cpu: f64,
    mem: u64,
    netin: u64,
    netout: u64,
    diskread: u64,
    diskwrite: u64,
    uptime: i64,
}

fn stats(g: &Guest, now: i64) -> Stats {
    let up = g.uptime(now);
    let u = u64::try_from(up).unwrap_or(0);
    if !g.running {
        return Stats {
            cpu: 0.0,
            mem: 0,
            netin: 0,
            netout: 0,
            diskread: 0,
            diskwrite: 0,
            uptime: 0,
        };
    }
    Stats {
        cpu: 0.003_141_592_653_589_79 * f64::from(g.vmid % 7 + 1),
        mem: g.maxmem() / 100 * (30 + u64::from(g.vmid % 20)),
        netin: u * 12_345,
        netout: u * 2_345,
        diskread: 512 * 1024 * 1024 + u * 4_096,
        diskwrite: 128 * 1024 * 1024 + u * 8_192,
        uptime: up,
    }
}

/// One `/cluster/resources` guest entry (FORMATS §2.4, REAL `https_api_cluster_resources_…json`).
fn resource_guest(g: &Guest, now: i64) -> Value {
    let s = stats(g, now);
    let mut v = json!({
        "id": format!("{}/{}", g.kind.api(), g.vmid), "type": g.kind.api(), "vmid": g.vmid,
        "node": g.node, "status": if g.running { "running" } else { "stopped" },
        "name": g.name(), "uptime": s.uptime, "template": i32::from(g.is_template()),
        "maxcpu": g.cpus(), "cpu": s.cpu, "maxmem": g.maxmem(), "mem": s.mem,
        "maxdisk": g.maxdisk, "disk": if g.kind == Kind::Lxc { g.maxdisk / 6 } else { 0 },
        "netin": s.netin, "netout": s.netout, "diskread": s.diskread, "diskwrite": s.diskwrite
    });
    if g.kind == Kind::Qemu {
        insert(&mut v, "memhost", json!(s.mem));
    }
    if let Some(tags) = g.config.get("tags") {
        insert(&mut v, "tags", tags.clone());
    }
    if let Some(lock) = g.config.get("lock") {
        insert(&mut v, "lock", lock.clone());
    }
    if let Some(ha) = &g.ha {
        insert(&mut v, "hastate", json!(ha.service_state()));
    }
    v
}

/// One `/cluster/resources` storage entry (FORMATS §2.4).
fn resource_storage(st: &State, node: &Node, s: &Storage) -> Value {
    json!({
        "id": format!("storage/{}/{}", node.name, s.id), "storage": s.id, "node": node.name,
        "type": "storage", "plugintype": s.kind, "status": "available",
        "shared": i32::from(s.shared), "content": s.content.join(","),
        "disk": st.storage_used(&node.name, s), "maxdisk": s.total
    })
}

/// `/cluster/resources [--type vm|node|storage|sdn]` (FORMATS §2.4): guests, then nodes, then
/// storages, then the per-node `localnetwork` SDN zone.
pub fn cluster_resources(st: &State, now: i64, ty: Option<&str>) -> Value {
    let want = |t: &str| ty.is_none() || ty == Some(t);
    let mut out = Vec::new();
    if want("vm") {
        // A guest of a pool carries its `pool` (FORMATS §2.4, optional keys).
        out.extend(st.guests.values().map(|g| {
            let mut v = resource_guest(g, now);
            if let Some((pool, _)) = st.pools.iter().find(|(_, m)| m.contains(&g.vmid)) {
                insert(&mut v, "pool", json!(pool));
            }
            v
        }));
    }
    if want("node") {
        for n in &st.nodes {
            let mut v = node_entry(n, now);
            if let Value::Object(m) = &mut v {
                m.remove("ssl_fingerprint");
                m.insert("cgroup-mode".into(), json!(2));
            }
            out.push(v);
        }
    }
    if want("storage") {
        for n in &st.nodes {
            out.extend(st.storages.iter().map(|s| resource_storage(st, n, s)));
        }
    }
    if want("sdn") {
        for n in &st.nodes {
            out.push(json!({
                "id": format!("sdn/{}/localnetwork", n.name), "node": n.name,
                "sdn": "localnetwork", "status": "ok", "type": "sdn"
            }));
        }
    }
    Value::Array(out)
}

/// `/cluster/nextid [--vmid N]` (FORMATS §2.13): a JSON *string*, like go-proxmox's capture.
pub fn nextid(st: &State, vmid: Option<i64>) -> Result<Value, Failure> {
    if let Some(v) = vmid {
        if u32::try_from(v).is_ok_and(|v| st.guests.contains_key(&v)) {
            return Err(Failure::die(format!(
                "400 Parameter verification failed.\nvmid: VM {v} already exists\n"
            )));
        }
        return Ok(json!(v.to_string()));
    }
    let free = (100u32..1_000_000)
        .find(|i| !st.guests.contains_key(i))
        .unwrap_or(100);
    Ok(json!(free.to_string()))
}

const PRESSURE: [&str; 6] = [
    "pressurecpufull",
    "pressurecpusome",
    "pressureiofull",
    "pressureiosome",
    "pressurememoryfull",
    "pressurememorysome",
];

/// `/nodes/{node}/qemu` entry (FORMATS §2.6 [SRC]).
fn qemu_entry(g: &Guest, now: i64) -> Value {
    let s = stats(g, now);
    let mut v = json!({
        "vmid": g.vmid, "status": if g.running { "running" } else { "stopped" }, "name": g.name(),
        "cpus": g.cpus(), "maxmem": g.maxmem(), "maxdisk": g.maxdisk, "disk": 0, "mem": s.mem,
        "memhost": s.mem, "cpu": s.cpu, "uptime": s.uptime, "netin": s.netin, "netout": s.netout
    });
    if g.running {
        insert(&mut v, "pid", json!(g.pid.unwrap_or(0)));
        for (i, k) in PRESSURE.iter().enumerate() {
            insert(&mut v, k, json!(0.01 * i as f64));
        }
    }
    if g.is_template() {
        insert(&mut v, "template", json!(1));
    }
    if let Some(tags) = g.config.get("tags") {
        insert(&mut v, "tags", tags.clone());
    }
    if let Some(lock) = g.config.get("lock") {
        insert(&mut v, "lock", lock.clone());
    }
    v
}

/// `/nodes/{node}/lxc` entry (FORMATS §2.7 [SRC]); LXC pressure values are strings.
fn lxc_entry(g: &Guest, now: i64) -> Value {
    let s = stats(g, now);
    let maxswap = g.config.get("swap").and_then(Value::as_u64).unwrap_or(512) * 1024 * 1024;
    let mut v = json!({
        "vmid": g.vmid, "type": "lxc", "status": if g.running { "running" } else { "stopped" },
        "name": g.name(), "cpus": g.cpus(), "maxmem": g.maxmem(), "maxswap": maxswap,
        "mem": s.mem, "swap": 0, "disk": g.maxdisk / 6, "maxdisk": g.maxdisk, "uptime": s.uptime,
        "cpu": s.cpu, "netin": s.netin, "netout": s.netout, "diskread": s.diskread,
        "diskwrite": s.diskwrite
    });
    if g.running {
        insert(&mut v, "pid", json!(g.pid.unwrap_or(0)));
        for k in PRESSURE {
            insert(&mut v, k, json!("0.00"));
        }
    }
    if g.is_template() {
        insert(&mut v, "template", json!(1));
    }
    if let Some(tags) = g.config.get("tags") {
        insert(&mut v, "tags", tags.clone());
    }
    if let Some(lock) = g.config.get("lock") {
        insert(&mut v, "lock", lock.clone());
    }
    v
}

/// `/nodes/{node}/qemu` or `/lxc`: the node's guests of that type, in (stable) map order.
pub fn guest_list(st: &State, node: &str, kind: Kind, now: i64) -> Value {
    Value::Array(
        st.guests
            .values()
            .filter(|g| g.node == node && g.kind == kind)
            .map(|g| match kind {
                Kind::Qemu => qemu_entry(g, now),
                Kind::Lxc => lxc_entry(g, now),
            })
            .collect(),
    )
}

/// `…/{vmid}/status/current` (FORMATS §2.8 [SRC; INFER example]).
pub fn status_current(g: &Guest, now: i64) -> Value {
    let mut v = match g.kind {
        Kind::Qemu => qemu_entry(g, now),
        Kind::Lxc => lxc_entry(g, now),
    };
    // `PVE::HA::Config::get_service_status` [SRC pve-ha-manager]: `{managed:0}` or
    // `{managed:1, state:<CRM service state>}` (FORMATS §2.8).
    let ha = match &g.ha {
        Some(h) => json!({"managed": 1, "state": h.service_state()}),
        None => json!({"managed": 0}),
    };
    insert(&mut v, "ha", ha);
    if g.kind == Kind::Lxc {
        return v;
    }
    let qmp = match (g.running, g.paused) {
        (false, _) => "stopped",
        (true, true) => "paused",
        (true, false) => "running",
    };
    insert(&mut v, "qmpstatus", json!(qmp));
    if g.agent() {
        insert(&mut v, "agent", json!(1));
    }
    if g.running {
        let s = stats(g, now);
        insert(&mut v, "diskread", json!(s.diskread));
        insert(&mut v, "diskwrite", json!(s.diskwrite));
        insert(&mut v, "running-machine", json!("pc-i440fx-10.1+pve0"));
        insert(&mut v, "running-qemu", json!("10.1.2"));
        insert(&mut v, "balloon", json!(g.maxmem()));
        insert(&mut v, "freemem", json!(g.maxmem() - s.mem));
        insert(
            &mut v,
            "ballooninfo",
            json!({"actual": g.maxmem(), "max_mem": g.maxmem(), "free_mem": g.maxmem() - s.mem, "total_mem": g.maxmem()}),
        );
        let mut blockstat = Map::new();
        for (key, _) in g.disks() {
            blockstat.insert(
                key,
                json!({"rd_bytes": s.diskread, "wr_bytes": s.diskwrite, "rd_operations": s.diskread / 4096, "wr_operations": s.diskwrite / 4096}),
            );
        }
        insert(&mut v, "blockstat", Value::Object(blockstat));
        insert(
            &mut v,
            "nics",
            json!({format!("tap{}i0", g.vmid): {"netin": s.netin, "netout": s.netout}}),
        );
        insert(
            &mut v,
            "proxmox-support",
            json!({"backup-max-workers": true, "pbs-dirty-bitmap": true, "pbs-library-version": "1.5.2", "query-bitmap-info": true}),
        );
    }
    v
}

/// `…/{vmid}/config` (FORMATS §2.13): the config keys plus `digest`.
pub fn config(g: &Guest) -> Value {
    let mut m: Map<String, Value> = g
        .config
        .clone()
        .into_iter()
        .filter(|(k, _)| k != crate::cloudinit::SECTION)
        .collect();
    m.insert("digest".into(), json!(digest(&g.config)));
    Value::Object(m)
}

/// `…/{vmid}/snapshot` (FORMATS §2.9 [SRC]): snapshots, then the `current` entry.
pub fn snapshot_list(g: &Guest) -> Value {
    let mut out = Vec::new();
    for s in &g.snapshots {
        let mut v = json!({"description": s.description, "name": s.name, "snaptime": s.snaptime});
        if g.kind == Kind::Qemu {
            insert(&mut v, "vmstate", json!(i32::from(s.vmstate)));
        }
        if let Some(p) = &s.parent {
            insert(&mut v, "parent", json!(p));
        }
        out.push(v);
    }
    let mut cur = json!({
        "description": "You are here!", "digest": digest(&g.config), "name": "current",
        "running": i32::from(g.running)
    });
    if let Some(p) = g.parent() {
        insert(&mut cur, "parent", json!(p));
    }
    out.push(cur);
    Value::Array(out)
}

/// `/nodes/{node}/storage [--content T] [--enabled 1]` (FORMATS §2.10 [SRC]).
pub fn storage_list(st: &State, node: &str, content: Option<&str>) -> Value {
    let mut out = Vec::new();
    for s in &st.storages {
        if content.is_some_and(|c| !s.content.iter().any(|x| x == c)) {
            continue;
        }
        // Inactive or disabled: no space figures but zeros, and no `used_fraction` (FORMATS
        // §2.10).
        if !s.active() {
            out.push(json!({
                "active": 0, "avail": 0, "content": s.content.join(","),
                "enabled": i32::from(!s.disable), "shared": i32::from(s.shared), "storage": s.id,
                "total": 0, "type": s.kind, "used": 0
            }));
            continue;
        }
        let used = st.storage_used(node, s);
        out.push(json!({
            "active": 1, "avail": s.total - used, "content": s.content.join(","), "enabled": 1,
            "shared": i32::from(s.shared), "storage": s.id, "total": s.total, "type": s.kind,
            "used": used, "used_fraction": used as f64 / s.total as f64
        }));
    }
    Value::Array(out)
}

/// `/nodes/{node}/storage/{sid}/content [--content T] [--vmid N]` (FORMATS §2.11 [SRC]): files
/// first, then the guest disks living on that storage.
pub fn storage_content(
    st: &State,
    node: &str,
    sid: &str,
    content: Option<&str>,
    vmid: Option<u32>,
) -> Result<Value, Failure> {
    let Some(storage) = st.storage(sid) else {
        return Err(Failure::die(format!("storage '{sid}' does not exist")));
    };
    let mut out = Vec::new();
    for v in st
        .volumes
        .iter()
        .filter(|v| v.storage == sid && (storage.shared || v.node == node))
    {
        if content.is_some_and(|c| c != v.content) || vmid.is_some_and(|id| Some(id) != v.vmid) {
            continue;
        }
        let mut e = json!({"volid": v.volid(), "format": v.format, "size": v.size, "ctime": v.ctime, "content": v.content});
        if let Some(id) = v.vmid {
            insert(&mut e, "vmid", json!(id));
        }
        if let Some(s) = &v.subtype {
            insert(&mut e, "subtype", json!(s));
        }
        out.push(e);
    }
    for g in st.guests.values().filter(|g| g.node == node) {
        if vmid.is_some_and(|id| id != g.vmid) {
            continue;
        }
        let kind_content = if g.kind == Kind::Qemu {
            "images"
        } else {
            "rootdir"
        };
        if content.is_some_and(|c| c != kind_content) {
            continue;
        }
        for (_, volid) in disks_of(&g.config) {
            if volid.split(':').next() != Some(sid) {
                continue;
            }
            // LVM-thin lists the LV itself; the base of a linked clone is not in its name
            // (LvmThinPlugin `list_images` [SRC]).
            let volid = match (volid.split_once(':'), storage.path.is_none()) {
                (Some((s, v)), true) if v.contains('/') => {
                    format!("{s}:{}", v.rsplit('/').next().unwrap_or(v))
                }
                _ => volid,
            };
            let mut e = json!({"volid": volid, "format": "raw", "size": g.maxdisk, "used": g.maxdisk / 5, "content": kind_content, "vmid": g.vmid, "ctime": 1_761_900_000});
            if volid.contains(":base-") {
                // A template's base volume has no parent; linked clones would carry `parent`.
                insert(&mut e, "used", json!(g.maxdisk / 8));
            }
            out.push(e);
        }
    }
    Ok(Value::Array(out))
}

/// One task list entry; a running task has `"status":"RUNNING"` and no `endtime` (`node_tasks`
/// adds `status => 'RUNNING'` to active tasks [SRC pve-manager PVE/API2/Tasks.pm]).
fn task_entry(t: &crate::state::Task) -> Value {
    if t.running.is_some() {
        return json!({
            "id": t.id, "node": t.node, "pid": t.pid, "pstart": t.pstart,
            "starttime": t.starttime, "status": "RUNNING", "type": t.kind, "upid": t.upid,
            "user": t.user
        });
    }
    json!({
        "endtime": t.endtime, "id": t.id, "node": t.node, "pid": t.pid, "pstart": t.pstart,
        "starttime": t.starttime, "status": t.exitstatus, "type": t.kind, "upid": t.upid,
        "user": t.user
    })
}

/// Filters of `/nodes/{node}/tasks`.
#[derive(Debug, Default)]
pub struct TaskFilter {
    /// `--limit` (default 50).
    pub limit: Option<usize>,
    /// `--start` (default 0).
    pub start: Option<usize>,
    /// `--vmid`.
    pub vmid: Option<String>,
    /// `--typefilter`.
    pub typefilter: Option<String>,
    /// `--errors 1`.
    pub errors: bool,
    /// `--source archive|active|all` (default `archive`).
    pub source: Option<String>,
}

/// `/nodes/{node}/tasks` (FORMATS §2.12 [SRC]): newest first; `--source archive` (the default)
/// lists finished tasks, `active` the running ones, `all` both, running ones first (`node_tasks`
/// reads the active list before the index).
pub fn tasks(st: &State, node: &str, f: &TaskFilter) -> Value {
    let source = f.source.as_deref().unwrap_or("archive");
    let active = st.tasks.iter().rev().filter(|t| t.running.is_some());
    let archive = st.tasks.iter().rev().filter(|t| t.running.is_none());
    let listed: Vec<&crate::state::Task> = match source {
        "active" => active.collect(),
        "all" => active.chain(archive).collect(),
        _ => archive.collect(),
    };
    Value::Array(
        listed
            .into_iter()
            .filter(|t| t.node == node)
            .filter(|t| f.vmid.as_ref().is_none_or(|v| &t.id == v))
            .filter(|t| f.typefilter.as_ref().is_none_or(|v| &t.kind == v))
            .filter(|t| {
                !f.errors
                    || t.running.is_some()
                    || (t.exitstatus != "OK" && !t.exitstatus.starts_with("WARNINGS"))
            })
            .skip(f.start.unwrap_or(0))
            .take(f.limit.unwrap_or(50))
            .map(task_entry)
            .collect(),
    )
}

/// The task `upid` of `node`: a UPID PVE cannot parse, or one without a log file on the node, is
/// the parameter error `upid: unable to parse worker upid` / `upid: no such task` (pve-manager
/// `PVE/API2/Tasks.pm` `read_task_status`, `stop_task` [SRC]).
fn find_task<'a>(st: &'a State, node: &str, upid: &str) -> Result<&'a crate::state::Task, Failure> {
    let param = |m: &str| Failure::die(format!("400 Parameter verification failed.\nupid: {m}\n"));
    if task::parse_upid(upid).is_none() {
        return Err(param("unable to parse worker upid"));
    }
    st.tasks
        .iter()
        .find(|t| t.upid == upid && t.node == node)
        .ok_or_else(|| param("no such task"))
}

/// `/nodes/{node}/tasks/{upid}/status` (FORMATS §1.5, §2.12 [SRC]).
pub fn task_status(st: &State, node: &str, upid: &str) -> Result<Value, Failure> {
    let t = find_task(st, node, upid)?;
    if t.running.is_some() {
        // Still running: no `exitstatus` (`read_task_status` [SRC]).
        return Ok(json!({
            "id": t.id, "node": t.node, "pid": t.pid, "pstart": t.pstart,
            "starttime": t.starttime, "status": "running", "type": t.kind, "upid": t.upid,
            "user": t.user
        }));
    }
    Ok(json!({
        "exitstatus": t.exitstatus, "id": t.id, "node": t.node, "pid": t.pid, "pstart": t.pstart,
        "starttime": t.starttime, "status": "stopped", "type": t.kind, "upid": t.upid, "user": t.user
    }))
}

/// `/nodes/{node}/tasks/{upid}/log [--start N] [--limit N]` (FORMATS §1.5): `[{"n":1,"t":"…"}]`,
/// line numbers counted from 1, default limit 50.
pub fn task_log(
    st: &State,
    node: &str,
    upid: &str,
    start: usize,
    limit: usize,
) -> Result<Value, Failure> {
    let t = find_task(st, node, upid)?;
    Ok(Value::Array(
        t.log
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(i, l)| json!({"n": i + 1, "t": l}))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sorts_nested_keys_compactly() {
        let v =
            json!({"b": 1, "a": {"z": [1, {"y": true, "x": null}], "c": "s"}, "f": 0.0, "g": 0.25});
        assert_eq!(
            canonical(&v),
            r#"{"a":{"c":"s","z":[1,{"x":null,"y":true}]},"b":1,"f":0,"g":0.25}"#
        );
    }

    #[test]
    fn digest_is_forty_hex() {
        let d = digest(&std::collections::BTreeMap::<String, serde_json::Value>::new());
        assert_eq!(d.len(), 40);
        assert!(d.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
