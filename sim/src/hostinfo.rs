//! The host observation reads of a node: its disks and their SMART data, its system
//! journal, the states of the Proxmox services and the pending package updates. Each node has
//! the same fixed hardware and services; the values are derived from the node's name so that
//! two nodes differ. Shapes follow the `returns` of the API methods (pve-manager 9.x, checked by
//! tests/pve_schema) and the handlers cited on each function (FORMATS.md §2.14).

use serde_json::{Value, json};

use crate::Failure;
use crate::state::Node;

/// The services of `GET /nodes/{node}/services` (pve-manager `PVE/API2/Services.pm`
/// `$service_name_list`): the `service` enum of its `{service}/state` method in PVE 9.1.11 and
/// 9.2, with the description each unit file gives (`systemctl show -p Description`).
const SERVICES: &[(&str, &str)] = &[
    ("chrony", "chrony, an NTP client/server"),
    ("corosync", "Corosync Cluster Engine"),
    ("cron", "Regular background program processing daemon"),
    ("ksmtuned", "Kernel Samepage Merging (KSM) Tuning Daemon"),
    ("lxcfs", "FUSE filesystem for LXC"),
    ("postfix", "Postfix Mail Transport Agent (instance -)"),
    ("proxmox-firewall", "Proxmox nftables firewall"),
    ("pve-cluster", "The Proxmox VE cluster filesystem"),
    ("pve-firewall", "Proxmox VE firewall"),
    ("pve-ha-crm", "PVE Cluster HA Resource Manager Daemon"),
    ("pve-ha-lrm", "PVE Local HA Resource Manager Daemon"),
    ("pve-lxc-syscalld", "Proxmox VE LXC Syscall Daemon"),
    ("pvedaemon", "PVE API Daemon"),
    ("pvefw-logger", "Proxmox VE firewall logger"),
    ("pveproxy", "PVE API Proxy Server"),
    ("pvescheduler", "Proxmox VE scheduler"),
    ("pvestatd", "PVE Status Daemon"),
    ("qmeventd", "PVE Qemu Event Daemon"),
    ("spiceproxy", "PVE SPICE Proxy Server"),
    ("sshd", "OpenBSD Secure Shell server"),
    ("syslog", "System Logging Service"),
    ("systemd-journald", "Journal Service"),
    ("systemd-timesyncd", "Network Time Synchronization"),
];

/// Units a default PVE 9 install does not run: `proxmox-firewall` (the nftables firewall is
/// opt-in) and `systemd-timesyncd` (chrony replaces it) are inactive; `ksmtuned` runs.
fn service_state(name: &str) -> (&'static str, &'static str, &'static str) {
    match name {
        "proxmox-firewall" => ("inactive", "dead", "enabled"),
        "systemd-timesyncd" => ("inactive", "dead", "not-found"),
        "syslog" => ("inactive", "dead", "not-found"),
        _ => ("active", "running", "enabled"),
    }
}

fn service_entry(n: &Node, name: &str, desc: &str) -> Value {
    let (active, state, unit) = match n.broken.iter().any(|b| *b == format!("service:{name}")) {
        // A crashed daemon: `systemctl show` gives ActiveState=failed, SubState=failed.
        true => ("failed", "failed", "enabled"),
        false => service_state(name),
    };
    json!({"active-state": active, "desc": desc, "name": name, "service": name,
           "state": state, "unit-state": unit})
}

/// `GET /nodes/{node}/services`: every service of [`SERVICES`], sorted by name as the
/// handler does.
pub fn services(n: &Node) -> Value {
    Value::Array(
        SERVICES
            .iter()
            .map(|(name, desc)| service_entry(n, name, desc))
            .collect(),
    )
}

/// `GET /nodes/{node}/services/{service}/state`: one entry of [`services`]. The path's
/// `service` is checked against the enum before this runs.
pub fn service(node: &Node, name: &str) -> Result<Value, Failure> {
    SERVICES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, d)| service_entry(node, n, d))
        .ok_or_else(|| Failure::die(format!("unknown service '{name}'")))
}

/// The service names, for the enum check of the `{service}` path parameter.
pub fn service_names() -> Vec<&'static str> {
    SERVICES.iter().map(|(n, _)| *n).collect()
}

/// A stand-in serial of `len` characters derived from the node and the slot.
fn serial(node: &str, slot: u32, len: usize) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ u64::from(slot);
    for b in node.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let alphabet = b"0123456789ABCDEFGHJKLMNPRSTVWXYZ";
    (0..len)
        .map(|i| {
            let v = h.rotate_left((i * 5) as u32) as usize;
            alphabet[v % alphabet.len()] as char
        })
        .collect()
}

/// The node's disks: an NVMe drive with the system (LVM, `pve` volume group) and a SATA SSD
/// with a ZFS pool. (devpath, model, vendor, serial, wwn, size, used, rpm, type).
fn drives(n: &Node) -> Vec<Value> {
    let nvme_serial = format!("S6B0NL0W{}", serial(&n.name, 0, 6));
    let ssd_serial = format!("2215E{}", serial(&n.name, 1, 7));
    vec![
        json!({"by_id_link": format!("/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB_{nvme_serial}"),
               "devpath": "/dev/nvme0n1", "gpt": 1, "health": "PASSED",
               "model": "Samsung SSD 980 PRO 1TB", "mounted": 0, "osdid": -1, "osdid-list": null,
               "rpm": 0, "serial": nvme_serial, "size": 1_000_204_886_016u64, "type": "nvme",
               "used": "LVM", "vendor": "unknown", "wearout": 97,
               "wwn": format!("eui.002538b{}", serial(&n.name, 2, 9).to_ascii_lowercase())}),
        json!({"by_id_link": format!("/dev/disk/by-id/ata-CT2000MX500SSD1_{ssd_serial}"),
               "devpath": "/dev/sda", "gpt": 1, "health": "PASSED", "model": "CT2000MX500SSD1",
               "mounted": 0, "osdid": -1, "osdid-list": null, "rpm": 0, "serial": ssd_serial,
               "size": 2_000_398_934_016u64, "type": "ssd", "used": "ZFS", "vendor": "ATA     ",
               "wearout": 99, "wwn": format!("0x500a0751{}", serial(&n.name, 3, 8).to_ascii_lowercase())}),
    ]
}

/// `GET /nodes/{node}/disks/list` (pve-manager `PVE/API2/Disks.pm` `list`, from
/// `PVE::Diskmanage::get_disks`: `health` from smartctl, `used` the first user found, `wearout`
/// in percent left, `osdid` -1 and `osdid-list` null without Ceph). The keys and their forms
/// are those of the REAL capture `pvesh_nodes_disks_list_json_pretty_pve8.json` (PVE 8.1),
/// plus `mounted`, which the PVE 9.1.11 and 9.2 schemas require and that capture predates: 0,
/// since neither whole disk is itself mounted (the root file system is on LVM, the pool on
/// ZFS) [INFER the value] (FORMATS.md §2.14).
pub fn disks(n: &Node) -> Value {
    let mut list = drives(n);
    for d in &mut list {
        let dev = format!("disk:{}", d["devpath"].as_str().unwrap_or(""));
        if n.broken.contains(&dev) {
            // smartctl's overall-health self-assessment when a drive predicts its failure.
            d["health"] = json!("FAILED");
        }
    }
    Value::Array(list)
}

/// `GET /nodes/{node}/disks/smart --disk DEV [--healthonly 1]` (pve-manager `Disks.pm` `smart`,
/// `PVE::Diskmanage::get_smart_data`): `health` and, unless `healthonly`, `type` (`ata` with
/// `attributes`, or `text` with smartctl's own text for NVMe). A device that is no disk of the
/// node dies like `verify_blockdev_path` (`no such block device`).
pub fn smart(n: &Node, disk: &str, healthonly: bool) -> Result<Value, Failure> {
    let drive = drives(n)
        .into_iter()
        .find(|d| d["devpath"] == disk)
        .ok_or_else(|| Failure::die(format!("no such block device '{disk}'")))?;
    // A disk `pve-sim break` failed: smartctl's overall assessment, and for a SATA drive the
    // attribute below its threshold (`WHEN_FAILED` `FAILING_NOW`).
    let failing = n.broken.contains(&format!("disk:{disk}"));
    let health = if failing { "FAILED" } else { "PASSED" };
    if healthonly {
        return Ok(json!({"health": health}));
    }
    if drive["type"] == "nvme" {
        let text = "\nSMART/Health Information (NVMe Log 0x02)\nCritical Warning:                   0x00\nTemperature:                        38 Celsius\nAvailable Spare:                    100%\nAvailable Spare Threshold:          10%\nPercentage Used:                    3%\nData Units Read:                    12,345,678 [6.32 TB]\nData Units Written:                 23,456,789 [12.0 TB]\nPower Cycles:                       42\nPower On Hours:                     8,760\nUnsafe Shutdowns:                   7\nMedia and Data Integrity Errors:    0\nError Information Log Entries:      0\n";
        return Ok(json!({"health": health, "text": text, "type": "text"}));
    }
    let attr = |id: u32, name: &str, value: u32, worst: u32, thresh: u32, raw: &str| {
        json!({"fail": "-", "flags": "-O--CK", "id": format!("{id:>3}"), "name": name,
               "normalized": value, "raw": raw, "threshold": thresh,
               "value": format!("{value:03}"), "worst": format!("{worst:03}")})
    };
    Ok(json!({
        "attributes": [
            attr(1, "Raw_Read_Error_Rate", 100, 100, 0, "0"),
            if failing {
                let mut a = attr(5, "Reallocate_NAND_Blk_Cnt", 3, 3, 10, "1788");
                a["fail"] = json!("FAILING_NOW");
                a
            } else {
                attr(5, "Reallocate_NAND_Blk_Cnt", 100, 100, 10, "0")
            },
            attr(9, "Power_On_Hours", 100, 100, 0, "8760"),
            attr(12, "Power_Cycle_Count", 100, 100, 0, "42"),
            attr(194, "Temperature_Celsius", 65, 52, 0, "35 (Min/Max 20/48)"),
            attr(202, "Percent_Lifetime_Remain", 99, 99, 1, "1"),
        ],
        "health": health,
        "type": "ata"
    }))
}

/// `GET /nodes/{node}/journal [--since E] [--until E] [--lastentries N]` (pve-manager
/// `PVE/API2/Nodes.pm` `journal`, which runs `mini-journalreader`): an array of strings,
/// oldest first, each a journal line `Mon DD HH:MM:SS node unit[pid]: message`; with no range
/// and no `lastentries`, the last 500 (its `-n` default, [INFER]). The node logs one line
/// every ten minutes since boot: pvestatd, pveproxy and cron in turn.
pub fn journal(
    n: &Node,
    now: i64,
    since: Option<i64>,
    until: Option<i64>,
    last: Option<usize>,
) -> Value {
    let step = 600;
    let first = n.boot_time + step;
    let from = since.unwrap_or(first).max(first);
    let to = until.unwrap_or(now).min(now);
    let mut lines = Vec::new();
    let mut t = first + (from - first + step - 1).div_euclid(step) * step;
    let mut i = 0u64;
    while t <= to {
        let k = (t - first) / step;
        let (unit, pid, msg) = match k % 3 {
            0 => ("pvestatd", 1203, "auth key pair too old, rotating.".to_string()),
            1 => (
                "pveproxy",
                1311,
                "worker 1412 finished".to_string(),
            ),
            _ => (
                "CRON",
                2000 + u32::try_from(k % 1000).unwrap_or(0),
                "(root) CMD (test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r)"
                    .to_string(),
            ),
        };
        let stamp = chrono::DateTime::from_timestamp(t, 0)
            .map(|d| {
                d.with_timezone(&chrono::Local)
                    .format("%b %d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_default();
        lines.push(format!("{stamp} {} {unit}[{pid}]: {msg}", n.name));
        t += step;
        i += 1;
        if i > 100_000 {
            break;
        }
    }
    let keep = match (since, until, last) {
        (_, _, Some(n)) => n,
        (None, None, None) => 500,
        _ => lines.len(),
    };
    let skip = lines.len().saturating_sub(keep);
    Value::Array(lines.into_iter().skip(skip).map(Value::String).collect())
}

/// `GET /nodes/{node}/apt/update` (pve-manager `PVE/API2/APT.pm` `list_updates`): the
/// packages the last `apt update` found newer versions of. Two pending updates.
pub fn updates() -> Value {
    json!([
        {"Arch": "amd64", "Description": "This package contains the Proxmox Virtual Environment management tools.",
         "Origin": "Proxmox", "OldVersion": "9.1.1", "Package": "pve-manager", "Priority": "optional",
         "Section": "admin", "Title": "Proxmox Virtual Environment Management Tools", "Version": "9.1.2"},
        {"Arch": "all", "Description": "Time zone and daylight-saving time data",
         "Origin": "Debian", "OldVersion": "2025b-4", "Package": "tzdata", "Priority": "required",
         "Section": "localization", "Title": "time zone and daylight-saving time data", "Version": "2025b-4+deb13u1"}
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    const NOW: i64 = 1_790_000_000;

    #[test]
    fn disks_smart_journal_services() {
        let st = initial(NOW);
        let n = st.node("pve1").unwrap().clone();
        let d = disks(&n);
        assert_eq!(d.as_array().unwrap().len(), 2);
        assert_ne!(d[0]["serial"], disks(st.node("pve2").unwrap())[0]["serial"]);
        assert_eq!(smart(&n, "/dev/sda", false).unwrap()["type"], "ata");
        assert_eq!(smart(&n, "/dev/nvme0n1", false).unwrap()["type"], "text");
        assert_eq!(
            smart(&n, "/dev/sda", true).unwrap(),
            json!({"health": "PASSED"})
        );
        assert!(smart(&n, "/dev/sdz", false).is_err());
        let all = journal(&n, NOW, None, None, None);
        assert_eq!(all.as_array().unwrap().len(), 500);
        let last = journal(&n, NOW, None, None, Some(3));
        assert_eq!(last.as_array().unwrap().len(), 3);
        assert_eq!(last[2], all[499]);
        let range = journal(&n, NOW, Some(NOW - 3600), Some(NOW), None);
        // One line every ten minutes, both ends included.
        assert!(
            (6..=7).contains(&range.as_array().unwrap().len()),
            "{range}"
        );
        assert!(
            journal(&n, NOW, Some(NOW + 10), None, None)
                .as_array()
                .unwrap()
                .is_empty()
        );
        assert_eq!(services(&n).as_array().unwrap().len(), SERVICES.len());
        assert_eq!(service(&n, "pveproxy").unwrap()["state"], "running");
        assert!(service(&n, "nginx").is_err());
        let mut broken = n.clone();
        broken.broken = vec!["service:pveproxy".into(), "disk:/dev/sda".into()];
        assert_eq!(
            service(&broken, "pveproxy").unwrap()["active-state"],
            "failed"
        );
        assert_eq!(
            smart(&broken, "/dev/sda", true).unwrap()["health"],
            "FAILED"
        );
        assert_eq!(disks(&broken)[1]["health"], "FAILED");
        assert_eq!(disks(&broken)[0]["health"], "PASSED");
    }
}
