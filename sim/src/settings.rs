//! Changing a guest: `pvesh set …/{qemu,lxc}/{vmid}/config` (the safe options pxagent sends)
//! and `pvesh set …/resize` (grow a disk); moving one is in [`crate::migrate`]. Sources
//! (FORMATS §0 snapshot commits):
//!
//! * qemu-server e6352be67f70 `src/PVE/API2/Qemu.pm`: `update_vm` (PUT config, synchronous:
//!   `$update_vm_api` prints `update VM <id>: -<key> <value> …` with the keys sorted, checks the
//!   lock and `balloon value too large (must be smaller than assigned memory)`, returns null),
//!   `resize_vm` (everything inside a `resize` task: `disk '<d>' does not exist`,
//!   `you can't resize a cdrom`, `shrinking disks is not supported`).
//! * pve-container 94f558522ef6 `src/PVE/API2/LXC/Config.pm` `update_vm` (PUT config: returns
//!   null, prints nothing [INFER]) and `src/PVE/API2/LXC.pm` `resize_vm` (pre-fork
//!   `unable to shrink disk size`, `disk is already at specified size`; then a `resize` task).
//! * The lock check (pve-guest-common `AbstractConfig::check_lock`): `VM is locked (<lock>)`,
//!   `CT is locked (<lock>)`.
//! * The lvresize lines: REAL `qm_status_snapshot_listsnapshot_shutdown_resize_start_pve9.
//!   transcript.txt`.
//!
//! Simplifications, marked [INFER]: a changed option is applied at once (PVE keeps changes a
//! running VM cannot hot-plug as pending, and `GET …/config` shows pending values applied, so
//! a read sees the same); the resize2fs lines of a container are representative.

use serde_json::{Value, json};

use crate::args::Parsed;
use crate::ops::{self, TaskRun, run_task};
use crate::state::{Guest, Kind, State};
use crate::{Ctx, Failure};

/// The VM disk names Proxmox can resize (qemu-server `Drive.pm` `valid_drive_names`).
pub fn vm_disk_names() -> Vec<String> {
    let mut v = Vec::new();
    v.extend((0..4).map(|i| format!("ide{i}")));
    v.extend((0..6).map(|i| format!("sata{i}")));
    v.extend((0..31).map(|i| format!("scsi{i}")));
    v.extend((0..16).map(|i| format!("virtio{i}")));
    v.push("efidisk0".into());
    v.push("tpmstate0".into());
    v
}

/// The container volume names (pve-container `valid_volume_keys`).
pub fn ct_disk_names() -> Vec<String> {
    let mut v = vec!["rootfs".to_string()];
    v.extend((0..256).map(|i| format!("mp{i}")));
    v
}

pub(crate) fn param_exc(key: &str, msg: &str) -> Failure {
    Failure::die(format!(
        "400 Parameter verification failed.\n{key}: {msg}\n"
    ))
}

/// The guest's lock, as `check_lock` refuses it ([`crate::locks::check_lock`]).
pub(crate) fn check_lock(g: &Guest) -> Result<(), Failure> {
    crate::locks::check_lock(g).map_err(Failure::die)
}

/// `pve-tag-list`: split on `;`, `,` or space, lower-cased, de-duplicated and sorted, joined
/// by `;` (pve-guest-common `GuestHelpers::get_unique_tags` with the default tag style).
fn unique_tags(list: &str) -> String {
    let mut tags: Vec<String> = list
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    tags.sort();
    tags.dedup();
    tags.join(";")
}

/// `$PVE_TAG_RE` (pve-common JSONSchema.pm): `[a-z0-9_][a-z0-9_\-\+\.]*`, any case.
fn tag_ok(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-+.".contains(c))
}

fn dns_name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// The options `PUT …/config` takes here, in the order pxagent can send them (and
/// `protection`, which only the admin sets: tests set it as root).
pub const QEMU_SETTABLE: [&str; 13] = [
    "cores",
    "memory",
    "balloon",
    "name",
    "description",
    "tags",
    "onboot",
    "ciuser",
    "sshkeys",
    "ipconfig0",
    "nameserver",
    "searchdomain",
    "protection",
];
/// The container options.
pub const LXC_SETTABLE: [&str; 8] = [
    "cores",
    "memory",
    "swap",
    "hostname",
    "description",
    "tags",
    "onboot",
    "protection",
];

/// `PUT /nodes/{node}/{qemu,lxc}/{vmid}/config`: returns what the handler printed (a VM's
/// `update VM <id>: …` line; nothing for a container).
pub fn config_set(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    o: &Parsed,
) -> Result<String, Failure> {
    let keys: &[&str] = match kind {
        Kind::Qemu => &QEMU_SETTABLE,
        Kind::Lxc => &LXC_SETTABLE,
    };
    let given: Vec<(&str, &str)> = keys
        .iter()
        .filter_map(|k| o.get(k).map(|v| (*k, v)))
        .collect();
    ops::load(st, node, kind, vmid)?;
    if given.is_empty() {
        return Err(Failure::die("no options specified"));
    }
    for (k, v) in &given {
        match *k {
            "name" if !dns_name_ok(v) => {
                return Err(param_exc(
                    k,
                    "invalid format - value does not look like a valid DNS name",
                ));
            }
            "hostname" if !dns_name_ok(v) => {
                return Err(param_exc(
                    k,
                    "invalid format - value does not look like a valid DNS name",
                ));
            }
            "tags"
                if v.split([';', ',', ' '])
                    .any(|t| !t.is_empty() && !tag_ok(t)) =>
            {
                return Err(param_exc(k, "invalid format - invalid characters in tag"));
            }
            "memory" if kind == Kind::Qemu && v.parse::<u64>().map_or(true, |m| m < 16) => {
                return Err(param_exc(
                    "memory",
                    "invalid format - value must have a minimum value of 16",
                ));
            }
            _ => {}
        }
    }
    // `update_vm` runs under `lock_config`: a running snapshot, clone or backup that holds the
    // guest's flock makes it wait, then `got timeout` (qemu-server `API2/Qemu.pm`).
    crate::locks::flock(st, ctx, kind, vmid, true).map_err(Failure::die)?;
    let g = ops::load(st, node, kind, vmid)?;
    check_lock(g)?;
    // Under the config lock, before anything is written: a digest that is not the config's
    // is someone else's change in between (pve-common `PVE::Tools::assert_if_modified`, called
    // by qemu-server `update_vm_api` and pve-container `update_pct_config`).
    if let Some(d) = o.get("digest")
        && d != crate::api::digest(&g.config)
    {
        return Err(Failure::die(
            "detected modified configuration - file changed by other user? Try again.",
        ));
    }
    if kind == Kind::Qemu && (o.get("memory").is_some() || o.get("balloon").is_some()) {
        let maxmem = o
            .get("memory")
            .and_then(|m| m.parse::<u64>().ok())
            .unwrap_or(g.maxmem() / (1024 * 1024));
        let balloon = o
            .get("balloon")
            .and_then(|b| b.parse::<u64>().ok())
            .or_else(|| g.config.get("balloon").and_then(Value::as_u64))
            .unwrap_or(0);
        if balloon > 0 && balloon > maxmem {
            return Err(Failure::die(
                "balloon value too large (must be smaller than assigned memory)",
            ));
        }
    }
    let g = st
        .guest_on_mut(node, kind, vmid)
        .ok_or_else(|| Failure::die("guest vanished"))?;
    let mut printed: Vec<String> = Vec::new();
    let mut sorted = given.clone();
    sorted.sort();
    for (k, v) in &sorted {
        printed.push(format!("-{k} {v}"));
    }
    for (k, v) in given {
        // Typed like the simulator's configs: a VM's memory is a property string, the other
        // integers are integers.
        let value = match (k, kind) {
            ("memory", Kind::Qemu) => json!(v),
            ("cores" | "memory" | "balloon" | "swap" | "onboot" | "protection", _) => {
                json!(v.parse::<u64>().unwrap_or(0))
            }
            ("tags", _) => json!(unique_tags(v)),
            _ => json!(v),
        };
        g.config.insert(k.to_string(), value);
    }
    Ok(match kind {
        Kind::Qemu => format!("update VM {vmid}: {}\n", printed.join(" ")),
        Kind::Lxc => String::new(),
    })
}

/// Bytes of a size string (`32G`, `512M`, `1.5G`, `1073741824`), as `parse_size` reads it.
fn parse_size(s: &str) -> Option<f64> {
    let (num, unit) = match s.chars().last() {
        Some(c @ ('K' | 'M' | 'G' | 'T')) => (&s[..s.len() - 1], Some(c)),
        _ => (s, None),
    };
    let n: f64 = num.parse().ok()?;
    let mul = match unit {
        Some('K') => 1024.0,
        Some('M') => 1024.0 * 1024.0,
        Some('G') => 1024.0 * 1024.0 * 1024.0,
        Some('T') => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => 1.0,
    };
    Some(n * mul)
}

/// `PVE::JSONSchema::format_size`: the largest unit that divides the size.
fn format_size(bytes: u64) -> String {
    for (unit, div) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if bytes.is_multiple_of(div) {
            return format!("{}{unit}", bytes / div);
        }
    }
    bytes.to_string()
}

/// The `size=` of a disk's property string, in bytes.
fn disk_size(g: &Guest, value: &str) -> u64 {
    value
        .split(',')
        .find_map(|p| p.strip_prefix("size="))
        .and_then(parse_size)
        .map(|b| b as u64)
        .unwrap_or(g.maxdisk)
}

fn with_size(value: &str, bytes: u64) -> String {
    let mut parts: Vec<String> = value
        .split(',')
        .filter(|p| !p.starts_with("size="))
        .map(String::from)
        .collect();
    parts.push(format!("size={}", format_size(bytes)));
    parts.join(",")
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The lvresize lines of a thin volume (REAL `qm_status_snapshot_listsnapshot_shutdown_resize_
/// start_pve9.transcript.txt`: `Size of logical volume VG/LV changed from 150.00 GiB (38400
/// extents) to 200.00 GiB (51200 extents).` and `Logical volume VG/LV successfully resized.`).
fn lvresize_log(volid: &str, from: u64, to: u64, log: &mut Vec<String>) {
    let lv = volid.split_once(':').map_or(volid, |(_, v)| v);
    let lv = lv.rsplit('/').next().unwrap_or(lv);
    let extents = |b: u64| b / (4 << 20);
    log.push(format!(
        "  Size of logical volume pve/{lv} changed from {} ({} extents) to {} ({} extents).",
        gib(from),
        extents(from),
        gib(to),
        extents(to)
    ));
    log.push(format!("  Logical volume pve/{lv} successfully resized."));
}

/// The new size for `+N[KMGT]` or `N[KMGT]` (the API's pattern `\+?\d+(\.\d+)?[KMGT]?`).
fn new_size(current: u64, sizestr: &str) -> u64 {
    let (ext, rest) = match sizestr.strip_prefix('+') {
        Some(r) => (true, r),
        None => (false, sizestr),
    };
    let n = parse_size(rest).unwrap_or(0.0) as u64;
    if ext { current + n } else { n }
}

/// `size` must match `\+?\d+(\.\d+)?[KMGT]?` (the schema pattern of both resize APIs).
pub fn size_ok(s: &str) -> bool {
    let body = s.strip_prefix('+').unwrap_or(s);
    let body = body.strip_suffix(['K', 'M', 'G', 'T']).unwrap_or(body);
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    !int.is_empty()
        && int.chars().all(|c| c.is_ascii_digit())
        && frac.is_none_or(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()))
}

/// `PUT /nodes/{node}/{qemu,lxc}/{vmid}/resize --disk D --size S`.
pub fn resize(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    disk: &str,
    sizestr: &str,
) -> Result<TaskRun, Failure> {
    let node_s = node.to_string();
    let disk = disk.to_string();
    let sizestr = sizestr.to_string();
    if kind == Kind::Lxc {
        // pve-container checks before forking.
        let g = ops::load(st, node, kind, vmid)?;
        check_lock(g)?;
        let Some(value) = g.config.get(&disk).and_then(Value::as_str) else {
            return Err(Failure::die(format!(
                "format error\n{disk}.volume: property is missing and it is not optional"
            )));
        };
        let size = disk_size(g, value);
        let newsize = new_size(size, &sizestr);
        if newsize < size {
            return Err(Failure::die("unable to shrink disk size"));
        }
        if newsize == size {
            return Err(Failure::die("disk is already at specified size"));
        }
    }
    Ok(run_task(
        st,
        ctx,
        node,
        "resize",
        &vmid.to_string(),
        |st, log| {
            let g = st
                .guest_on_mut(&node_s, kind, vmid)
                .ok_or_else(|| ops::conf_missing(&node_s, kind, vmid))?;
            crate::locks::check_lock(g)?;
            let value = g
                .config
                .get(&disk)
                .and_then(Value::as_str)
                .map(String::from)
                .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
            if value.contains("media=cdrom") {
                return Err("you can't resize a cdrom".into());
            }
            let volid = value.split(',').next().unwrap_or_default().to_string();
            let size = disk_size(g, &value);
            let newsize = new_size(size, &sizestr);
            if newsize < size {
                return Err("shrinking disks is not supported".into());
            }
            if newsize == size {
                return Ok(());
            }
            lvresize_log(&volid, size, newsize, log);
            if kind == Kind::Lxc {
                let dev = format!("/dev/pve/{}", volid.rsplit([':', '/']).next().unwrap_or(""));
                let blocks = newsize / 4096;
                log.push("resize2fs 1.47.2 (1-Jan-2025)".into());
                log.push(format!(
                    "Resizing the filesystem on {dev} to {blocks} (4k) blocks."
                ));
                log.push(format!(
                    "The filesystem on {dev} is now {blocks} (4k) blocks long."
                ));
            }
            let first = g.disks().first().map(|(k, _)| k.clone());
            g.config
                .insert(disk.clone(), json!(with_size(&value, newsize)));
            if first.as_deref() == Some(disk.as_str()) {
                g.maxdisk = newsize;
            }
            Ok(())
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Ty, p};
    use crate::state::initial;

    const NOW: i64 = 1_790_000_000;

    fn opts(args: &[&str]) -> Parsed {
        let schema: Vec<_> = QEMU_SETTABLE
            .iter()
            .chain(LXC_SETTABLE.iter())
            .map(|k| p(k, Ty::Str))
            .collect();
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        crate::args::parse(&argv, &schema).unwrap()
    }

    #[test]
    fn config_set_applies_prints_and_checks() {
        let mut st = initial(NOW);
        let out = config_set(
            &mut st,
            &Ctx::new(NOW),
            "pve1",
            Kind::Qemu,
            100,
            &opts(&["--tags", "web;Prod;web", "--cores", "3"]),
        )
        .unwrap();
        assert_eq!(out, "update VM 100: -cores 3 -tags web;Prod;web\n");
        assert_eq!(st.guests[&100].config["cores"], json!(3));
        assert_eq!(st.guests[&100].config["tags"], json!("prod;web"));
        let f = config_set(
            &mut st,
            &Ctx::new(NOW),
            "pve1",
            Kind::Qemu,
            100,
            &opts(&["--balloon", "4096"]),
        )
        .unwrap_err();
        assert_eq!(
            f.msg,
            "balloon value too large (must be smaller than assigned memory)"
        );
        let f = config_set(
            &mut st,
            &Ctx::new(NOW),
            "pve2",
            Kind::Qemu,
            100,
            &opts(&["--cores", "1"]),
        )
        .unwrap_err();
        assert_eq!(f.code, 2);
        let f =
            config_set(&mut st, &Ctx::new(NOW), "pve1", Kind::Qemu, 100, &opts(&[])).unwrap_err();
        assert_eq!(f.msg, "no options specified");
        st.guests
            .get_mut(&200)
            .unwrap()
            .config
            .insert("lock".into(), json!("backup"));
        let f = config_set(
            &mut st,
            &Ctx::new(NOW),
            "pve1",
            Kind::Lxc,
            200,
            &opts(&["--swap", "0"]),
        )
        .unwrap_err();
        assert_eq!(f.msg, "CT is locked (backup)");
        st.guests.get_mut(&200).unwrap().config.remove("lock");
        let out = config_set(
            &mut st,
            &Ctx::new(NOW),
            "pve1",
            Kind::Lxc,
            200,
            &opts(&["--swap", "0"]),
        )
        .unwrap();
        assert_eq!(out, "");
        assert_eq!(st.guests[&200].config["swap"], json!(0));
    }

    #[test]
    fn resize_grows_and_refuses_to_shrink() {
        let mut st = initial(NOW);
        let ctx = Ctx::new(NOW);
        let t = resize(&mut st, &ctx, "pve1", Kind::Qemu, 100, "scsi0", "+1G").unwrap();
        assert!(t.error.is_none(), "{:?}", t.error);
        assert_eq!(
            t.log[0],
            "  Size of logical volume pve/vm-100-disk-0 changed from 32.00 GiB (8192 extents) to 33.00 GiB (8448 extents)."
        );
        assert!(
            st.guests[&100].config["scsi0"]
                .as_str()
                .unwrap()
                .ends_with("size=33G")
        );
        assert_eq!(st.guests[&100].maxdisk, 33 << 30);
        let t = resize(&mut st, &ctx, "pve1", Kind::Qemu, 100, "scsi0", "1G").unwrap();
        assert_eq!(t.error.as_deref(), Some("shrinking disks is not supported"));
        let t = resize(&mut st, &ctx, "pve1", Kind::Qemu, 100, "scsi5", "+1G").unwrap();
        assert_eq!(t.error.as_deref(), Some("disk 'scsi5' does not exist"));
        let t = resize(&mut st, &ctx, "pve1", Kind::Qemu, 100, "ide2", "+1G").unwrap();
        assert_eq!(t.error.as_deref(), Some("you can't resize a cdrom"));
        let f = resize(&mut st, &ctx, "pve1", Kind::Lxc, 200, "rootfs", "1G").unwrap_err();
        assert_eq!(f.msg, "unable to shrink disk size");
        let t = resize(&mut st, &ctx, "pve1", Kind::Lxc, 200, "rootfs", "+512M").unwrap();
        assert!(t.error.is_none());
        assert!(
            st.guests[&200].config["rootfs"]
                .as_str()
                .unwrap()
                .ends_with("size=8704M")
        );
        assert!(size_ok("+1.5G") && size_ok("10") && !size_ok("+G") && !size_ok("1.G"));
    }
}
