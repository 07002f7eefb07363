//! Making guests: `POST /nodes/{node}/qemu` (create, or restore with `--archive`),
//! `POST /nodes/{node}/lxc` (create, or restore with `--restore 1`), `POST …/qemu/{vmid}/clone`,
//! and the `qmrestore` CLI (which calls the same API handler).
//!
//! The checks and their order follow the sources (qemu-server `API2/Qemu.pm` `create_vm`,
//! `clone_vm`, `QemuServer.pm` `restore_vma_archive`/`restore_tar_archive`/`clone_disk`;
//! pve-container `API2/LXC.pm` `create_vm`, `LXC/Create.pm`; pve-cluster `check_vmid_unused`;
//! pve-storage `check_volume_access`, `abs_filesystem_path`, `LvmThinPlugin::alloc_image`
//! [SRC, snapshot commits in FORMATS §0]): which errors are raised before the fork (no task, exit
//! 255 / 2) and which inside the task (TASK ERROR). Log lines cite their origin; the storage-tool
//! lines (`lvcreate`, `mkfs.ext4`, `tar --totals`, `qemu-img`) are [INFER] from the tools' usual
//! output unless a fixture shows them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::args::Parsed;
use crate::ops::{self, TaskRun};
use crate::state::{Guest, Kind, State, Storage, disks_of};
use crate::{Ctx, Failure, timefmt};

/// The LVM names behind `local-lvm` (`vgname pve`, `thinpool data`, as in the REAL
/// `qm_snapshot_failure_thinpool_pve9.txt`).
const VG: &str = "pve";

/// Sizes of a disk option: `32G`, `512M`, `8192K`, `1T` or bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        'T' | 't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let f: f64 = num.parse().ok()?;
    (f >= 0.0).then_some((f * mult as f64) as u64)
}

/// `PVE::JSONSchema::format_size`: the largest unit that divides exactly (`32G`, `754M`).
pub fn format_size(bytes: u64) -> String {
    let kb = bytes / 1024;
    if kb * 1024 != bytes {
        return bytes.to_string();
    }
    let mb = kb / 1024;
    if mb * 1024 != kb {
        return format!("{kb}K");
    }
    let gb = mb / 1024;
    if gb * 1024 != mb {
        return format!("{mb}M");
    }
    let tb = gb / 1024;
    if tb * 1024 != gb {
        return format!("{gb}G");
    }
    format!("{tb}T")
}

/// `size=` of a drive / mount point string.
fn size_of(spec: &str) -> Option<u64> {
    spec.split(',')
        .find_map(|kv| kv.strip_prefix("size="))
        .and_then(parse_size)
}

/// The options of a drive string after the volume (`iothread=1,size=32G`), without `size`.
fn drive_opts(spec: &str) -> Vec<String> {
    spec.split(',')
        .skip(1)
        .filter(|kv| !kv.starts_with("size=") && !kv.starts_with("import-from="))
        .map(str::to_string)
        .collect()
}

/// `file,opts…,size=N` with the options sorted like `print_property_string` (file first).
fn print_drive(volid: &str, mut opts: Vec<String>, size: Option<u64>) -> String {
    if let Some(b) = size {
        opts.push(format!("size={}", format_size(b)));
    }
    opts.sort();
    std::iter::once(volid.to_string())
        .chain(opts)
        .collect::<Vec<_>>()
        .join(",")
}

/// A MAC in Proxmox's OUI `BC:24:11` (datacenter `mac_prefix` default), unique per call.
fn new_mac(st: &mut State, vmid: u32) -> String {
    let s = st.next_seq();
    let x = (u64::from(vmid) * 2_654_435_761 + s * 40_503) % 0x100_0000;
    format!(
        "BC:24:11:{:02X}:{:02X}:{:02X}",
        x >> 16,
        (x >> 8) & 0xff,
        x & 0xff
    )
}

/// A random-looking UUID (`generate_uuid`), unique per call.
fn new_uuid(st: &mut State, vmid: u32) -> String {
    let s = st.next_seq();
    let a = u64::from(vmid).wrapping_mul(0x9e37_79b9) ^ s.wrapping_mul(0x85eb_ca6b);
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        a & 0xffff_ffff,
        (a >> 32) & 0xffff,
        s % 0x1000,
        (a >> 20) & 0xfff,
        (a.wrapping_mul(31) ^ s) & 0xffff_ffff_ffff
    )
}

/// The LV / file name of a volid (`local-lvm:base-9000-disk-0/vm-150-disk-0` → `vm-150-disk-0`).
fn vol_name(volid: &str) -> &str {
    let v = volid.split_once(':').map_or(volid, |(_, v)| v);
    v.rsplit('/').next().unwrap_or(v)
}

/// Names of the images on `sid` as seen from `node` (guest disks, snapshot disks).
fn used_names(st: &State, node: &str, sid: &str) -> Vec<String> {
    let shared = st.storage(sid).is_some_and(|s| s.shared);
    let mut out = Vec::new();
    for g in st.guests.values().filter(|g| shared || g.node == node) {
        let configs = std::iter::once(&g.config).chain(g.snapshots.iter().map(|s| &s.config));
        for c in configs {
            for (_, volid) in disks_of(c) {
                if volid.split(':').next() == Some(sid) {
                    out.push(vol_name(&volid).to_string());
                }
            }
        }
    }
    out
}

/// Allocate an image of `size` bytes for `vmid` on `sid` (`vdisk_alloc`): the storage tool's
/// output goes to `log`; `taken` collects the names allocated earlier in the same task.
///
/// LVM-thin (`LvmThinPlugin::alloc_image` [SRC]) runs `lvcreate … --name vm-<vmid>-disk-<n>`,
/// which prints `  Logical volume "vm-150-disk-0" created.` [REAL line in
/// `qmrestore_vma_zst_pve8.txt`]. When the pool cannot hold the new disk (here: its size is more
/// than the storage's free space) it fails with the thin-pool message of the REAL
/// `qm_snapshot_failure_thinpool_pve9.txt`, wrapped as
/// `lvcreate 'pve/vm-150-disk-0' error: …` [SRC errmsg; INFER when it triggers].
pub fn alloc_disk(
    st: &State,
    node: &str,
    storage: &Storage,
    vmid: u32,
    size: u64,
    taken: &mut Vec<String>,
    log: &mut Vec<String>,
) -> Result<String, String> {
    let used = used_names(st, node, &storage.id);
    let avail = storage.total.saturating_sub(st.storage_used(node, storage));
    let file_based = storage.path.is_some();
    let name = (0..)
        .map(|n| {
            if file_based {
                format!("{vmid}/vm-{vmid}-disk-{n}.raw")
            } else {
                format!("vm-{vmid}-disk-{n}")
            }
        })
        .find(|n| {
            let short = n.rsplit('/').next().unwrap_or(n);
            !used.iter().any(|u| u == short) && !taken.iter().any(|t| t == short)
        })
        .unwrap_or_default();
    if file_based {
        let path = format!(
            "{}/images/{name}",
            storage.path.as_deref().unwrap_or_default()
        );
        if size > avail {
            // [INFER] qemu-img's ENOSPC wording.
            return Err(format!(
                "unable to create image: qemu-img: {path}: Could not preallocate data for the new file: No space left on device"
            ));
        }
        log.push(format!(
            "Formatting '{path}', fmt=raw size={size} preallocation=off"
        ));
    } else {
        if size > avail {
            return Err(format!(
                "lvcreate '{VG}/{name}' error: Cannot create new thin volume, free space in thin pool {VG}/data reached threshold."
            ));
        }
        log.push(format!("  Logical volume \"{name}\" created."));
    }
    taken.push(name.rsplit('/').next().unwrap_or(&name).to_string());
    Ok(format!("{}:{name}", storage.id))
}

/// Free an image (`vdisk_free`): LVM prints `  Logical volume "…" successfully removed.`
fn free_disk_log(st: &State, volid: &str, log: &mut Vec<String>) {
    let sid = volid.split(':').next().unwrap_or_default();
    if st.storage(sid).is_some_and(|s| s.path.is_none()) {
        log.push(format!(
            "  Logical volume \"{}\" successfully removed.",
            vol_name(volid)
        ));
    }
}

/// `PVE::Cluster::check_vmid_unused`: `VM 100 already exists on node 'pve1'` (or `CT …`).
fn vmid_used(st: &State, vmid: u32) -> Option<String> {
    st.guests.get(&vmid).map(|g| {
        format!(
            "{} {vmid} already exists on node '{}'",
            g.kind.noun(),
            g.node
        )
    })
}

fn new_guest(
    vmid: u32,
    kind: Kind,
    node: &str,
    config: BTreeMap<String, Value>,
    maxdisk: u64,
) -> Guest {
    Guest {
        vmid,
        kind,
        node: node.to_string(),
        running: false,
        paused: false,
        started_at: None,
        pid: None,
        maxdisk,
        config,
        snapshots: vec![],
        ha: None,
    }
}

/// Storage of a volid, or `storage 'x' does not exist` (`storage_config`).
fn storage_of<'a>(st: &'a State, volid: &str) -> Result<&'a Storage, Failure> {
    let sid = volid.split(':').next().unwrap_or_default();
    st.storage(sid)
        .ok_or_else(|| Failure::die(format!("storage '{sid}' does not exist")))
}

/// Content type of a file volume name (`iso/…`, `vztmpl/…`, `backup/…`), as the dir plugin's
/// `parse_volname` sees it.
fn vtype(volid: &str) -> &str {
    let v = volid.split_once(':').map_or("", |(_, v)| v);
    match v.split_once('/') {
        Some(("iso", _)) => "iso",
        Some(("vztmpl", _)) => "vztmpl",
        Some(("backup", _)) => "backup",
        Some(("snippets", _)) => "snippets",
        Some(("import", _)) => "import",
        _ => "images",
    }
}

/// `PVE::Storage::check_volume_access` with a wanted content type [SRC].
fn check_volume_access(st: &State, volid: &str, want: &str) -> Result<(), Failure> {
    if !volid.contains(':') {
        return Ok(()); // a path: root may pass arbitrary paths
    }
    storage_of(st, volid)?;
    let t = vtype(volid);
    if t != want && !(want == "rootdir" && t == "images") {
        return Err(Failure::die(format!(
            "unable to use volume {volid} - content type needs to be '{want}'"
        )));
    }
    Ok(())
}

/// The file behind a file volume on `node`, if it exists.
fn find_file<'a>(st: &'a State, node: &str, volid: &str) -> Option<&'a crate::state::Volume> {
    st.volumes.iter().find(|v| {
        v.volid() == volid && (v.node == node || st.storage(&v.storage).is_some_and(|s| s.shared))
    })
}

/// Filesystem path of a file volume (`<path>/<subdir>/<file>`, Plugin.pm `get_subdir`).
pub fn file_path(st: &State, volid: &str) -> String {
    let (sid, volname) = volid.split_once(':').unwrap_or(("", volid));
    let base = st
        .storage(sid)
        .and_then(|s| s.path.clone())
        .unwrap_or_else(|| format!("/mnt/pve/{sid}"));
    let (dir, file) = volname.split_once('/').unwrap_or(("", volname));
    let sub = match dir {
        "iso" => "template/iso",
        "vztmpl" => "template/cache",
        "backup" => "dump",
        "images" => "images",
        other => other,
    };
    format!("{base}/{sub}/{file}")
}

/// `abs_filesystem_path`: the archive must exist, else `can't find file '<volid>'` [SRC; exit 2
/// INFER: errno is ENOENT from the failed `-f`].
fn abs_filesystem_path(
    st: &State,
    node: &str,
    archive: &str,
) -> Result<(String, crate::state::Volume), Failure> {
    let found = if archive.contains(':') {
        find_file(st, node, archive).cloned()
    } else {
        st.volumes
            .iter()
            .find(|v| {
                (v.node == node || st.storage(&v.storage).is_some_and(|s| s.shared))
                    && file_path(st, &v.volid()) == archive
            })
            .cloned()
    };
    match found {
        Some(v) => Ok((file_path(st, &v.volid()), v)),
        None => Err(Failure::enoent(format!("can't find file '{archive}'"))),
    }
}

/// Option keys that `qm`'s config keeps as integers.
const QEMU_INT_KEYS: &[&str] = &["cores", "sockets", "numa", "onboot", "protection", "vcpus"];

fn is_drive_key(k: &str) -> Option<(usize, u32)> {
    const PREFIXES: [&str; 6] = ["ide", "sata", "scsi", "virtio", "efidisk", "tpmstate"];
    PREFIXES.iter().enumerate().find_map(|(i, p)| {
        k.strip_prefix(p)
            .and_then(|n| n.parse::<u32>().ok())
            .map(|n| (i, n))
    })
}

/// Drive keys of `opts` in `foreach_volume` order (ide, sata, scsi, virtio, efidisk, tpmstate).
fn drive_keys(keys: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<(usize, u32, String)> = keys
        .filter_map(|k| is_drive_key(&k).map(|(a, b)| (a, b, k)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, _, k)| k).collect()
}

/// `NEW_DISK_RE` `^(([^/:\s]+):)?(\d+(\.\d+)?)$`: `(storage, GiB)` of a new-disk request.
fn new_disk(spec: &str) -> Option<(Option<&str>, f64)> {
    let file = spec.split(',').next()?;
    let (sid, num) = match file.split_once(':') {
        Some((s, n)) => (Some(s), n),
        None => (None, file),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    Some((sid, num.parse().ok()?))
}

/// The source of a drive's `import-from=` option.
fn import_from(spec: &str) -> Option<&str> {
    spec.split(',')
        .find_map(|kv| kv.strip_prefix("import-from="))
}

/// The cloud-init drive's volume: `vm-<vmid>-cloudinit` (LVM), `<vmid>/vm-<vmid>-cloudinit.qcow2`
/// (a directory) [SRC qemu-server PVE/QemuServer/Cloudinit.pm].
fn cloudinit_volume(storage: &Storage, vmid: u32) -> String {
    match storage.path {
        Some(_) => format!("{}:{vmid}/vm-{vmid}-cloudinit.qcow2", storage.id),
        None => format!("{}:vm-{vmid}-cloudinit", storage.id),
    }
}

fn param_exc(key: &str, msg: String) -> Failure {
    Failure::die(format!(
        "400 Parameter verification failed.\n{key}: {msg}\n"
    ))
}

/// The default boot order (`get_default_bootdevices`): disks, then CD-ROMs, then NICs.
fn default_boot(config: &BTreeMap<String, Value>) -> String {
    let keys: Vec<String> = drive_keys(config.keys().cloned());
    let is_cd = |k: &String| {
        config
            .get(k)
            .and_then(Value::as_str)
            .is_some_and(|s| s.contains("media=cdrom"))
    };
    let mut order: Vec<String> = keys.iter().filter(|k| !is_cd(k)).take(1).cloned().collect();
    order.extend(keys.iter().filter(|k| is_cd(k)).cloned());
    let mut nets: Vec<&String> = config
        .keys()
        .filter(|k| {
            k.strip_prefix("net")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .collect();
    nets.sort();
    order.extend(nets.into_iter().cloned());
    format!("order={}", order.join(";"))
}

/// The boot disk's size: the first non-CD-ROM drive in `foreach_volume` order.
fn boot_disk_size(config: &BTreeMap<String, Value>) -> u64 {
    drive_keys(config.keys().cloned())
        .iter()
        .filter_map(|k| config.get(k).and_then(Value::as_str))
        .find(|s| !s.contains("media=cdrom"))
        .and_then(size_of)
        .unwrap_or(0)
}

/// `net0: virtio,bridge=vmbr0` → `virtio=<random MAC>,bridge=vmbr0` (`add_random_macs`).
fn qemu_net(st: &mut State, vmid: u32, spec: &str) -> String {
    let mut parts: Vec<String> = spec.split(',').map(str::to_string).collect();
    const MODELS: [&str; 5] = ["virtio", "e1000", "e1000e", "rtl8139", "vmxnet3"];
    if let Some(first) = parts.first_mut()
        && MODELS.contains(&first.as_str())
    {
        *first = format!("{first}={}", new_mac(st, vmid));
    }
    parts.join(",")
}

/// `POST /nodes/{node}/qemu` without `--archive`: create a VM (task `qmcreate`).
///
/// Pre-fork, in source order: drive checks (`storage 'x' does not support vm images` as a
/// parameter error, unknown storage), then `create_and_lock_config`:
/// `unable to create VM 150 - VM 150 already exists on node 'pve1'` [SRC]. In the task: an ISO
/// that does not exist (`volume local:iso/x.iso does not exist`), disk allocation (LVM line, then
/// `scsi0: successfully created disk 'local-lvm:vm-150-disk-0,size=32G'` [SRC create_disks]);
/// errors are prefixed `unable to create VM 150 - ` and allocated disks are freed again.
pub fn qemu_create(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    o: &Parsed,
) -> Result<TaskRun, Failure> {
    let mut params: BTreeMap<String, String> = o
        .opts
        .iter()
        .filter(|(k, _)| {
            ![
                "vmid",
                "archive",
                "storage",
                "force",
                "unique",
                "start",
                "pool",
                "bwlimit",
                "live-restore",
                "output-format",
                "quiet",
            ]
            .contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // resolve_cdrom_alias
    if let Some(mut cd) = params.remove("cdrom") {
        if !cd.contains("media=") {
            cd.push_str(",media=cdrom");
        }
        params.insert("ide2".into(), cd);
    }
    let default_storage = o.get("storage");
    // $check_storage_access / $check_drive_param
    for key in drive_keys(params.keys().cloned()) {
        let spec = params[&key].clone();
        let file = spec.split(',').next().unwrap_or_default();
        let cdrom = spec.contains("media=cdrom");
        if file == "none" || file == "cdrom" {
            continue;
        }
        // `import-from=VOLUME` [SRC qemu-server API2/Qemu.pm $check_storage_access /
        // import_from_volume]: the source must exist and be a disk image (`images`) or on
        // `import` content; an absolute path is root's alone, and the sandbox has none.
        if let Some(src) = import_from(&spec) {
            let t = vtype(src);
            if !src.contains(':') || find_file(st, node, src).is_none() {
                return Err(param_exc(&key, format!("volume '{src}' does not exist")));
            }
            if t != "images" && t != "import" {
                return Err(param_exc(
                    &key,
                    format!(
                        "'import-from' volume {src} has content type '{t}', needs 'images' or 'import'"
                    ),
                ));
            }
        }
        // `STORAGE:cloudinit` allocates the cloud-init drive [SRC qemu-server
        // PVE/API2/Qemu.pm create_disks, `$volid =~ /^(\S+):cloudinit$/`].
        if let Some(sid) = file.strip_suffix(":cloudinit") {
            storage_of(st, &format!("{sid}:x"))?;
            continue;
        }
        if !cdrom && let Some((sid, _)) = new_disk(&spec) {
            let Some(sid) = sid.or(default_storage) else {
                return Err(Failure::die(
                    "no storage ID specified (and no default storage)",
                ));
            };
            let s = st
                .storage(sid)
                .ok_or_else(|| Failure::die(format!("storage '{sid}' does not exist")))?;
            if !s.content.iter().any(|c| c == "images") {
                return Err(param_exc(
                    "storage",
                    format!("storage '{sid}' does not support vm images"),
                ));
            }
            continue;
        }
        if file.contains(':') {
            storage_of(st, file)?;
            let t = vtype(file);
            if t != "images" && t != "iso" {
                return Err(param_exc(
                    &key,
                    "content type needs to be 'images' or 'iso'".into(),
                ));
            }
            if t == "iso" && !cdrom {
                return Err(param_exc(
                    &key,
                    "explicit 'media=cdrom' is required for iso images".into(),
                ));
            }
        }
    }
    if let Some(used) = vmid_used(st, vmid) {
        return Err(Failure::die(format!("unable to create VM {vmid} - {used}")));
    }
    // add_random_macs
    let net_keys: Vec<String> = params
        .keys()
        .filter(|k| k.starts_with("net"))
        .cloned()
        .collect();
    for k in net_keys {
        let v = qemu_net(st, vmid, &params[&k]);
        params.insert(k, v);
    }
    let smbios = format!("uuid={}", new_uuid(st, vmid));
    let vmgenid = new_uuid(st, vmid);
    let node_s = node.to_string();
    let start = o.flag("start");
    let storage_default = default_storage.map(str::to_string);
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "qmcreate",
        &vmid.to_string(),
        |st, log| {
            let emsg = format!("unable to create VM {vmid} -");
            let mut config: BTreeMap<String, Value> = BTreeMap::new();
            let mut created: Vec<String> = Vec::new();
            let mut taken = Vec::new();
            let mut result: Result<(), String> = Ok(());
            for (k, v) in &params {
                if is_drive_key(k).is_some() {
                    continue;
                }
                let val = if QEMU_INT_KEYS.contains(&k.as_str()) {
                    v.parse::<i64>().map_or_else(|_| json!(v), |n| json!(n))
                } else {
                    json!(v)
                };
                config.insert(k.clone(), val);
            }
            for key in drive_keys(params.keys().cloned()) {
                let spec = params[&key].clone();
                let file = spec.split(',').next().unwrap_or_default().to_string();
                let cdrom = spec.contains("media=cdrom");
                if file == "none" || file == "cdrom" {
                    config.insert(key, json!(spec));
                    continue;
                }
                if let Some(sid) = file.strip_suffix(":cloudinit") {
                    let storage = st.storage(sid).cloned().ok_or("storage vanished")?;
                    let volid = cloudinit_volume(&storage, vmid);
                    if storage.path.is_none() {
                        log.push(format!(
                            "  Logical volume \"{}\" created.",
                            vol_name(&volid)
                        ));
                    }
                    let drive = format!("{volid},media=cdrom");
                    log.push(format!("{key}: successfully created disk '{drive}'"));
                    created.push(volid);
                    config.insert(key, json!(drive));
                    continue;
                }
                if !cdrom && let Some((sid, gib)) = new_disk(&spec) {
                    let sid = sid
                        .map(str::to_string)
                        .or_else(|| storage_default.clone())
                        .unwrap_or_default();
                    let storage = st.storage(&sid).cloned().ok_or("storage vanished")?;
                    // An imported disk takes its source's size (`STORAGE:0,import-from=…`).
                    let source = import_from(&spec).and_then(|src| {
                        find_file(st, &node_s, src)
                            .map(|v| (src.to_string(), v.size, v.link.clone(), v.storage.clone()))
                    });
                    // An `import` volume is an untrusted image: `file_size_info(…, $untrusted)`
                    // dies on a backing file [SRC pve-storage src/PVE/Storage/Plugin.pm
                    // file_size_info, find_string index id 11938247578; INFER that import-from
                    // of an import volume takes that path, as download-url's check does].
                    if let Some(v) = import_from(&spec)
                        .and_then(|src| find_file(st, &node_s, src))
                        .filter(|v| v.content == "import" && v.backing.is_some())
                    {
                        let path = file_path(st, &v.volid());
                        result = Err(format!(
                            "backing file not allowed for untrusted image '{path}'!"
                        ));
                        break;
                    }
                    let size = match &source {
                        Some((_, bytes, ..)) => *bytes,
                        None => (gib * 1_073_741_824.0) as u64,
                    };
                    // A source that is a symbolic link (a share's planted `host-disk.raw`):
                    // on a share mounted `nosymfollow` opening it fails with ELOOP; elsewhere
                    // qemu-img follows it and reads the host's file [INFER message: qemu-img's
                    // "Could not open" with strerror(ELOOP)].
                    if let Some((src, _, Some(target), sid)) = &source {
                        let path = file_path(st, src);
                        let nosymfollow = st
                            .storage(sid)
                            .and_then(|s| s.options.get("options"))
                            .is_some_and(|o| o.split(',').any(|x| x == "nosymfollow"));
                        if nosymfollow {
                            result = Err(format!(
                                "qemu-img: Could not open '{path}': Could not open '{path}': Too many levels of symbolic links"
                            ));
                            break;
                        }
                        log.push(format!(
                            "pve-sim: {path} is a symbolic link to {target}: the import reads the host's {target}"
                        ));
                    }
                    if let Some((src, ..)) = &source {
                        // [INFER] qemu-img convert's progress lines, as qm importdisk prints them.
                        log.push(format!("importing disk '{src}' to VM {vmid} ..."));
                        log.push(format!(
                            "transferred {0} of {0} (100.00%)",
                            format_size(size)
                        ));
                    }
                    match alloc_disk(st, &node_s, &storage, vmid, size, &mut taken, log) {
                        Ok(volid) => {
                            let drive = print_drive(&volid, drive_opts(&spec), Some(size));
                            log.push(format!("{key}: successfully created disk '{drive}'"));
                            created.push(volid);
                            config.insert(key, json!(drive));
                        }
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                    continue;
                }
                // An existing volume (ISO, image): it must be there (`volume_size_info`).
                match find_file(st, &node_s, &file) {
                    Some(v) => {
                        let drive = print_drive(&file, drive_opts(&spec), Some(v.size));
                        config.insert(key, json!(drive));
                    }
                    None => {
                        result = Err(format!("volume {file} does not exist"));
                        break;
                    }
                }
            }
            if let Err(e) = result {
                for volid in &created {
                    free_disk_log(st, volid, log);
                }
                return Err(format!("{emsg} {e}"));
            }
            if !config.contains_key("boot") {
                config.insert("boot".into(), json!(default_boot(&config)));
            }
            config.insert(
                "meta".into(),
                json!(format!("creation-qemu=10.1.2,ctime={}", ctx.now)),
            );
            config.insert("smbios1".into(), json!(smbios));
            config.insert("vmgenid".into(), json!(vmgenid));
            let maxdisk = boot_disk_size(&config);
            st.guests
                .insert(vmid, new_guest(vmid, Kind::Qemu, &node_s, config, maxdisk));
            if start {
                log.push("Execute autostart".into());
                ops::set_running(st, vmid, ctx.now);
            }
            Ok(())
        },
    ))
}

/// Where a qemu restore comes from: a volid (API) or a path (the `qmrestore` CLI).
#[derive(Debug, Clone)]
pub struct QemuRestore<'a> {
    /// Node whose storage holds the archive and that gets the VM.
    pub node: &'a str,
    /// Target VMID.
    pub vmid: u32,
    /// `local:backup/vzdump-qemu-…` or `/var/lib/vz/dump/vzdump-qemu-…`.
    pub archive: &'a str,
    /// `--storage`: where the disks go (default: where they were).
    pub storage: Option<&'a str>,
    /// `--force 1`: overwrite an existing VM.
    pub force: bool,
    /// `--start 1`.
    pub start: bool,
}

/// Restore a VM from a vzdump archive (task `qmrestore`; FORMATS §3.11, REAL
/// `qmrestore_vma_zst_pve8.txt`).
///
/// Pre-fork [SRC create_vm]: `check_volume_access` (`unable to use volume X - content type needs
/// to be 'backup'`), the archive file (`can't find file 'X'`, exit 2 [INFER]),
/// `create_and_lock_config`: `unable to restore VM 100 - VM 100 already exists on node 'pve1'`
/// without `--force` (with `--force` but the VMID owned by another node or by a CT: the same
/// text [INFER: pmxcfs refuses the duplicate config]). In the task: a running target
/// (`unable to restore VM 100 - vm is running`), a container archive
/// (`ERROR: file '…' does not look like a QemuServer vzdump backup`, restore_tar_archive), a
/// target storage without images (`Content type 'images' is not available on storage 'x'`);
/// each failure first logs `error before or during data restore, some or all disks were not
/// completely restored. VM 100 state is NOT cleaned up.` [SRC]. The restored VM gets the backed-up
/// config with its disks re-allocated; over an existing VM its old disks are freed first.
pub fn qemu_restore(st: &mut State, ctx: &Ctx, r: &QemuRestore) -> Result<TaskRun, Failure> {
    let QemuRestore {
        node,
        vmid,
        archive,
        storage,
        force,
        start,
    } = *r;
    check_volume_access(st, archive, "backup")?;
    let (path, vol) = abs_filesystem_path(st, node, archive)?;
    let emsg = format!("unable to restore VM {vmid} -");
    if let Some(g) = st.guests.get(&vmid)
        && (!force || g.node != node || g.kind != Kind::Qemu)
    {
        return Err(Failure::die(format!(
            "{emsg} {} {vmid} already exists on node '{}'",
            g.kind.noun(),
            g.node
        )));
    }
    let node_s = node.to_string();
    let target = storage.map(str::to_string);
    let tmp = format!("/var/tmp/vzdumptmp{}", 100_000 + st.seq % 900_000);
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "qmrestore",
        &vmid.to_string(),
        |st, log| {
            let r = restore_body(st, &node_s, vmid, &path, &vol, target.as_deref(), &tmp, log);
            if r.is_err() {
                log.push(format!(
                    "error before or during data restore, some or all disks were not completely restored. VM {vmid} state is NOT cleaned up."
                ));
            }
            r?;
            if start {
                log.push("Execute autostart".into());
                ops::set_running(st, vmid, ctx.now);
            }
            Ok(())
        },
    ))
}

#[allow(clippy::too_many_arguments)]
fn restore_body(
    st: &mut State,
    node: &str,
    vmid: u32,
    path: &str,
    vol: &crate::state::Volume,
    target: Option<&str>,
    tmp: &str,
    log: &mut Vec<String>,
) -> Result<(), String> {
    if let Some(g) = st.guests.get(&vmid)
        && g.running
    {
        return Err(format!("unable to restore VM {vmid} - vm is running"));
    }
    if vol.subtype.as_deref() != Some("qemu") {
        return Err(format!(
            "ERROR: file '{path}' does not look like a QemuServer vzdump backup"
        ));
    }
    let decomp = match vol.format.rsplit('.').next() {
        Some("zst") => "zstd -q -d -c ",
        Some("gz") => "zcat ",
        Some("lzo") => "lzop -d -c ",
        _ => "",
    };
    if decomp.is_empty() {
        log.push(format!(
            "restore vma archive: vma extract -v -r {tmp}.fifo {path} {tmp}"
        ));
    } else {
        log.push(format!(
            "restore vma archive: {decomp}{path} | vma extract -v -r {tmp}.fifo - {tmp}"
        ));
    }
    let backup_cfg = vol.guest_config.clone().unwrap_or_default();
    let disks = disks_of(&backup_cfg);
    log.push("CFG: size: 458 name: qemu-server.conf".into());
    for (i, (key, _)) in disks.iter().enumerate() {
        let size = backup_cfg
            .get(key)
            .and_then(Value::as_str)
            .and_then(size_of)
            .or(vol.disk_size)
            .unwrap_or(8 << 30);
        log.push(format!(
            "DEV: dev_id={} size: {size} devname: drive-{key}",
            i + 1
        ));
    }
    log.push(format!("CTIME: {}", timefmt::ctime(vol.ctime)));
    // The map lines' storages are checked before anything is allocated.
    let mut plan = Vec::new();
    for (key, volid) in &disks {
        let sid = target
            .map(str::to_string)
            .unwrap_or_else(|| volid.split(':').next().unwrap_or("local").to_string());
        let s = st
            .storage(&sid)
            .cloned()
            .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
        if !s.content.iter().any(|c| c == "images") {
            return Err(format!(
                "Content type 'images' is not available on storage '{sid}'"
            ));
        }
        let spec = backup_cfg
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let size = size_of(&spec).or(vol.disk_size).unwrap_or(8 << 30);
        plan.push((key.clone(), spec, s, size));
    }
    // Over an existing VM: its disks go first ($restore_cleanup_oldconf).
    let old = st.guests.get(&vmid).cloned();
    if let Some(g) = &old {
        for (_, volid) in g.disks() {
            free_disk_log(st, &volid, log);
        }
        if let Some(g) = st.guests.get_mut(&vmid) {
            g.config.retain(|k, _| is_drive_key(k).is_none());
            g.snapshots.clear();
        }
    }
    let mut config = backup_cfg.clone();
    config.remove("parent");
    config.remove("template");
    let mut taken = Vec::new();
    for (key, spec, storage, size) in plan {
        let volid = alloc_disk(st, node, &storage, vmid, size, &mut taken, log)?;
        log.push(format!("new volume ID is '{volid}'"));
        let dev = if let Some(p) = &storage.path {
            format!(
                "{p}/images/{}",
                volid.split_once(':').map_or("", |(_, v)| v)
            )
        } else {
            format!("/dev/{VG}/{}", vol_name(&volid))
        };
        log.push(format!("map 'drive-{key}' to '{dev}' (write zeros = 0)"));
        config.insert(
            key,
            json!(print_drive(&volid, drive_opts(&spec), Some(size))),
        );
    }
    let total: u64 = disks
        .iter()
        .filter_map(|(k, _)| backup_cfg.get(k).and_then(Value::as_str).and_then(size_of))
        .sum::<u64>()
        .max(1);
    for pct in [1u64, 50, 100] {
        log.push(format!(
            "progress {pct}% (read {} bytes, duration {} sec)",
            total / 100 * pct,
            pct / 5
        ));
    }
    log.push(format!(
        "total bytes read {total}, sparse bytes {} (73.1%)",
        total / 1000 * 731
    ));
    log.push("space reduction due to 4K zero blocks 2.95%".into());
    log.push("rescan volumes...".into());
    let maxdisk = match boot_disk_size(&config) {
        0 => vol.disk_size.unwrap_or(0),
        n => n,
    };
    let mut g = new_guest(vmid, Kind::Qemu, node, config, maxdisk);
    g.ha = old.and_then(|o| o.ha);
    st.guests.insert(vmid, g);
    Ok(())
}

/// `mkfs.ext4` lines that `PVE::LXC::mkfs` lets through (its outfunc filter [SRC]); numbers
/// [INFER] from mke2fs for the size.
fn mkfs_lines(vmid: u32, size: u64, log: &mut Vec<String>) {
    let blocks = size / 4096;
    log.push(format!(
        "Creating filesystem with {blocks} 4k blocks and {} inodes",
        blocks / 4
    ));
    log.push(format!(
        "Filesystem UUID: {:08x}-1c2d-4e5f-8a9b-{:012x}",
        (blocks ^ u64::from(vmid)).wrapping_mul(2_654_435_761) & 0xffff_ffff,
        u64::from(vmid).wrapping_mul(0x9e37_79b9_7f4a) & 0xffff_ffff_ffff
    ));
    log.push("Superblock backups stored on blocks: ".into());
    log.push("\t32768, 98304, 163840, 229376, 294912, 819200, 884736, 1605632".into());
}

/// ostype from a template file name (`PVE::LXC::Setup` detection, simplified [INFER]).
fn lxc_ostype(template: &str) -> &'static str {
    let f = template.rsplit('/').next().unwrap_or(template);
    for (prefix, os) in [
        ("debian", "debian"),
        ("devuan", "devuan"),
        ("ubuntu", "ubuntu"),
        ("alpine", "alpine"),
        ("archlinux", "archlinux"),
        ("centos", "centos"),
        ("almalinux", "centos"),
        ("rockylinux", "centos"),
        ("fedora", "fedora"),
        ("opensuse", "opensuse"),
        ("gentoo", "gentoo"),
        ("openeuler", "openeuler"),
    ] {
        if f.starts_with(prefix) {
            return os;
        }
    }
    "unmanaged"
}

/// `name=eth0,bridge=vmbr0,ip=dhcp` → with `hwaddr` and `type=veth`, keys in pve-container's
/// print order (`name` first, then sorted).
fn lxc_net(st: &mut State, vmid: u32, spec: &str) -> String {
    let mut kv: Vec<(String, String)> = spec
        .split(',')
        .filter_map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    if !kv.iter().any(|(k, _)| k == "hwaddr") {
        kv.push(("hwaddr".into(), new_mac(st, vmid)));
    }
    if !kv.iter().any(|(k, _)| k == "type") {
        kv.push(("type".into(), "veth".into()));
    }
    kv.sort_by(|a, b| (a.0 != "name", &a.0).cmp(&(b.0 != "name", &b.0)));
    kv.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `POST /nodes/{node}/lxc`: create a container from a template (task `vzcreate`), or restore
/// one from a backup with `--restore 1` (task `vzrestore`) (pve-container `create_vm` [SRC]).
///
/// Pre-fork: `CT 200 already exists on node 'pve1'` (no prefix: `check_vmid_unused` dies
/// directly) unless restoring with `--force` over a local CT, which must not run
/// (`can't overwrite running container`); `check_volume_access` of `--ostemplate` for `vztmpl`
/// / `backup`; the storage of `--rootfs`, or `--storage` (default `local`) when there is none,
/// must hold `rootdir` (`storage: storage 'local' does not support container directories`, a
/// parameter error). In the task: errors are prefixed `unable to create CT 210 - ` /
/// `unable to restore CT 210 - ` and allocated volumes are freed.
pub fn lxc_create(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    o: &Parsed,
) -> Result<TaskRun, Failure> {
    let restore = o.flag("restore");
    let force = o.flag("force");
    let ostemplate = o.get("ostemplate").unwrap_or_default().to_string();
    let same_exists = st.guest_on(node, Kind::Lxc, vmid).is_some();
    if !(same_exists && restore && force) {
        if let Some(used) = vmid_used(st, vmid) {
            return Err(Failure::die(used));
        }
    } else if st.guests.get(&vmid).is_some_and(|g| g.running) {
        return Err(Failure::die("can't overwrite running container"));
    }
    let unprivileged = match o.get("unprivileged") {
        Some(v) => Some(v == "1"),
        None if restore => None,
        None => Some(true),
    };
    let storage = o.get("storage").unwrap_or("local").to_string();
    check_volume_access(st, &ostemplate, if restore { "backup" } else { "vztmpl" })?;
    let check_rootdir = |sid: &str| -> Result<(), Failure> {
        let s = st
            .storage(sid)
            .ok_or_else(|| Failure::die(format!("storage '{sid}' does not exist")))?;
        if !s.content.iter().any(|c| c == "rootdir") {
            return Err(param_exc(
                "storage",
                format!("storage '{sid}' does not support container directories"),
            ));
        }
        Ok(())
    };
    // rootfs / mpN: a bare number means "<storage>:<GiB>".
    let mut mps: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &o.opts {
        if k == "rootfs"
            || k.strip_prefix("mp")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        {
            let v = if v.chars().all(|c| c.is_ascii_digit() || c == '.') {
                format!("{storage}:{v}")
            } else {
                v.clone()
            };
            mps.insert(k.clone(), v);
        }
    }
    if !mps.is_empty() && !mps.contains_key("rootfs") {
        return Err(Failure::die(
            "mount points configured, but 'rootfs' not set - aborting",
        ));
    }
    for spec in mps.values() {
        let sid = spec.split(':').next().unwrap_or_default();
        check_rootdir(sid)?;
    }
    if mps.is_empty() {
        check_rootdir(&storage)?;
    }
    let emsg = if restore {
        format!("unable to restore CT {vmid} -")
    } else {
        format!("unable to create CT {vmid} -")
    };
    // Plain options (update_pct_config): typed like pve-container's schema.
    const SKIP: &[&str] = &[
        "vmid",
        "ostemplate",
        "restore",
        "force",
        "storage",
        "unique",
        "start",
        "pool",
        "unprivileged",
        "password",
        "ssh-public-keys",
        "ignore-unpack-errors",
        "bwlimit",
        "ha-managed",
        "output-format",
        "quiet",
    ];
    let mut plain: BTreeMap<String, Value> = BTreeMap::new();
    for (k, v) in &o.opts {
        if SKIP.contains(&k.as_str()) || mps.contains_key(k) {
            continue;
        }
        let val = if ["memory", "swap", "cores", "onboot", "protection"].contains(&k.as_str()) {
            v.parse::<i64>().map_or_else(|_| json!(v), |n| json!(n))
        } else if k.starts_with("net") {
            json!(lxc_net(st, vmid, v))
        } else {
            json!(v)
        };
        plain.insert(k.clone(), val);
    }
    let node_s = node.to_string();
    let start = o.flag("start");
    let ttype = if restore { "vzrestore" } else { "vzcreate" };
    Ok(ops::run_task(
        st,
        ctx,
        node,
        ttype,
        &vmid.to_string(),
        |st, log| {
            let mut created = Vec::new();
            let r = lxc_body(
                st,
                ctx,
                &LxcJob {
                    node: &node_s,
                    vmid,
                    restore,
                    ostemplate: &ostemplate,
                    storage: &storage,
                    unprivileged,
                    mps: &mps,
                    plain: &plain,
                },
                &mut created,
                log,
            );
            if let Err(e) = r {
                for volid in &created {
                    free_disk_log(st, volid, log);
                }
                return Err(format!("{emsg} {e}"));
            }
            if start {
                ops::set_running(st, vmid, ctx.now);
            }
            Ok(())
        },
    ))
}

struct LxcJob<'a> {
    node: &'a str,
    vmid: u32,
    restore: bool,
    ostemplate: &'a str,
    storage: &'a str,
    unprivileged: Option<bool>,
    mps: &'a BTreeMap<String, String>,
    plain: &'a BTreeMap<String, Value>,
}

fn lxc_body(
    st: &mut State,
    ctx: &Ctx,
    j: &LxcJob,
    created: &mut Vec<String>,
    log: &mut Vec<String>,
) -> Result<(), String> {
    let vmid = j.vmid;
    let mut conf: BTreeMap<String, Value> = BTreeMap::new();
    let mut mps = j.mps.clone();
    let mut archive_vol = None;
    if j.restore {
        log.push(format!(
            "recovering backed-up configuration from '{}'",
            j.ostemplate
        ));
        let (path, vol) = abs_filesystem_path(st, j.node, j.ostemplate).map_err(|f| f.msg)?;
        if vol.subtype.as_deref() != Some("lxc") {
            return Err("ERROR: archive contains no configuration file".into());
        }
        let orig = vol.guest_config.clone().unwrap_or_default();
        if mps.is_empty() {
            // storage-only mode: the backed-up mount points, re-created on --storage.
            for (k, v) in &orig {
                if k == "rootfs"
                    || k.strip_prefix("mp")
                        .is_some_and(|n| n.parse::<u32>().is_ok())
                {
                    let s = v.as_str().unwrap_or_default();
                    let size = size_of(s).or(vol.disk_size).ok_or_else(|| {
                        format!("unable to detect disk size - please specify {k} (size)")
                    })?;
                    let gib = size as f64 / 1_073_741_824.0;
                    let rest: Vec<String> = drive_opts(s);
                    let mut spec = format!("{}:{gib}", j.storage);
                    for r in rest {
                        spec.push(',');
                        spec.push_str(&r);
                    }
                    mps.insert(k.clone(), spec);
                }
            }
        }
        for (k, v) in orig {
            if k == "rootfs" || k.starts_with("mp") || k == "parent" || k == "template" {
                continue;
            }
            conf.insert(k, v);
        }
        if let Some(u) = j.unprivileged {
            if u {
                conf.insert("unprivileged".into(), json!(1));
            } else {
                conf.remove("unprivileged");
            }
        }
        archive_vol = Some((path, vol));
    } else if j.unprivileged == Some(true) {
        conf.insert("unprivileged".into(), json!(1));
    }
    if mps.is_empty() {
        mps.insert("rootfs".into(), format!("{}:4", j.storage)); // defaults to 4GB
    }
    // create_disks
    let mut taken = Vec::new();
    let mut rootfs_size = 0;
    for (k, spec) in &mps {
        let Some((Some(sid), gib)) = new_disk(spec) else {
            // an existing volume / bind mount: kept as given
            conf.insert(k.clone(), json!(spec));
            continue;
        };
        let storage = st
            .storage(sid)
            .cloned()
            .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
        let size = (gib * 1_073_741_824.0) as u64;
        let volid = alloc_disk(st, j.node, &storage, vmid, size, &mut taken, log)?;
        created.push(volid.clone());
        mkfs_lines(vmid, size, log);
        if k == "rootfs" {
            rootfs_size = size;
        }
        conf.insert(
            k.clone(),
            json!(print_drive(&volid, drive_opts(spec), Some(size))),
        );
    }
    // Over an existing CT: its old volumes go now (destroy_lxc_container).
    let old = st.guests.get(&vmid).cloned();
    if let Some(g) = &old {
        for (_, volid) in g.disks() {
            free_disk_log(st, &volid, log);
        }
    }
    let tar_bytes = rootfs_size / 5;
    match &archive_vol {
        Some((path, _)) => {
            log.push(format!("restoring '{}' now..", j.ostemplate));
            log.push(format!("extracting archive '{path}'"));
        }
        None => {
            let path = match find_file(st, j.node, j.ostemplate) {
                Some(v) => file_path(st, &v.volid()),
                None if j.ostemplate.contains(':') => {
                    return Err(format!("can't find file '{}'", j.ostemplate));
                }
                None => j.ostemplate.to_string(),
            };
            log.push(format!("extracting archive '{path}'"));
        }
    }
    // `tar --totals` (like the REAL "Total bytes written" line of vzdump_lxc_stop_gzip_pve7.txt).
    log.push(format!(
        "Total bytes read: {tar_bytes} ({}MiB, {}MiB/s)",
        tar_bytes >> 20,
        (tar_bytes >> 20) / 3
    ));
    log.push("Detected container architecture: amd64".into());
    if j.restore {
        log.push("merging backed-up and given configuration..".into());
    } else {
        // post_create_hook: SSH host keys [INFER from the usual pct create output].
        let host = j
            .plain
            .get("hostname")
            .and_then(Value::as_str)
            .map_or_else(|| format!("CT{vmid}"), str::to_string);
        for key in ["rsa", "ecdsa", "ed25519"] {
            log.push(format!(
                "Creating SSH host key 'ssh_host_{key}_key' - this may take some time ..."
            ));
            log.push(format!(
                "done: SHA256:{} root@{host}",
                ssh_fp(vmid, key, ctx.now)
            ));
        }
        conf.insert("arch".into(), json!("amd64"));
        conf.insert("ostype".into(), json!(lxc_ostype(j.ostemplate)));
    }
    for (k, v) in j.plain {
        conf.insert(k.clone(), v.clone());
    }
    conf.entry("hostname".into())
        .or_insert_with(|| json!(format!("CT{vmid}")));
    conf.entry("memory".into()).or_insert_with(|| json!(512));
    conf.entry("swap".into()).or_insert_with(|| json!(512));
    let mut g = new_guest(vmid, Kind::Lxc, j.node, conf, rootfs_size);
    g.ha = old.and_then(|o| o.ha);
    st.guests.insert(vmid, g);
    Ok(())
}

fn ssh_fp(vmid: u32, key: &str, now: i64) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ u64::from(vmid) ^ (now as u64);
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (0..43)
        .map(|i| {
            h = h.rotate_left(7).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i;
            B64[(h >> 58) as usize] as char
        })
        .collect()
}

/// `render_bytes($n, 1)`: `32.0 GiB`.
fn render_bytes(v: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = v as f64;
    let mut u = 0;
    while x >= 1024.0 && u < units.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    format!("{x:.1} {}", units[u])
}

/// `POST /nodes/{node}/qemu/{vmid}/clone --newid N [--name X] [--full 1]` (task `qmclone`, id =
/// the source VMID; qemu-server `clone_vm` [SRC]).
///
/// `--full` defaults to "not a template": a normal VM is copied, a template is linked. Pre-fork
/// (`$load_and_check`): the source config (exit 2), `unable to create VM 150: config file already
/// exists` (for a VMID used anywhere [INFER for other nodes]), and for a linked clone of a
/// non-base LVM-thin volume `Linked clone feature is not supported for 'local-lvm:vm-100-disk-0'
/// (scsi0)`. The task prints `create full|linked clone of drive scsi0 (volid)` (clone_disk), the
/// LVM line, `allocated target volume '…'` and qemu-img `transferred …` lines (stopped source)
/// or the drive-mirror lines (running source). The clone is stopped, named `Copy-of-VM-<name>`
/// unless `--name`, gets new MACs, smbios1 uuid and vmgenid, and is never a template.
pub fn clone(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    newid: u32,
    o: &Parsed,
) -> Result<TaskRun, Failure> {
    let src = ops::load(st, node, Kind::Qemu, vmid)?.clone();
    if let Some(s) = o.get("storage") {
        let sc = st
            .storage(s)
            .ok_or_else(|| Failure::die(format!("storage '{s}' does not exist")))?;
        if !sc.content.iter().any(|c| c == "images") {
            return Err(param_exc(
                "storage",
                format!("storage '{s}' does not support vm images"),
            ));
        }
    }
    let full = match o.get("full") {
        Some(v) => v == "1",
        None => !src.is_template(),
    };
    if o.get("storage").is_some() && !full {
        return Err(Failure::die(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    if st.guests.contains_key(&newid) {
        return Err(Failure::die(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    let drives: Vec<(String, String)> = src.disks();
    for (key, volid) in &drives {
        let base = vol_name(volid).starts_with("base-") && !volid.contains('/');
        let lvm = st
            .storage(volid.split(':').next().unwrap_or_default())
            .is_some_and(|s| s.path.is_none());
        if !full && lvm && !base {
            return Err(Failure::die(format!(
                "Linked clone feature is not supported for '{volid}' ({key})"
            )));
        }
    }
    // The new config: everything but snapshot info; new MACs, uuid, vmgenid; name.
    let mut newconf: BTreeMap<String, Value> = BTreeMap::new();
    for (k, v) in &src.config {
        // The clone's cloud-init drive is a new one, not yet generated [SRC qemu-server
        // API2/Qemu.pm clone_vm: a cloud-init drive is allocated anew for the target].
        if [
            "parent",
            "snaptime",
            "vmstate",
            "template",
            "lock",
            crate::cloudinit::SECTION,
        ]
        .contains(&k.as_str())
            || k.starts_with("unused")
        {
            continue;
        }
        if let Some(s) = v
            .as_str()
            .filter(|s| s.contains(&format!("vm-{vmid}-cloudinit")))
        {
            let renamed = s
                .replace(
                    &format!("{vmid}/vm-{vmid}-cloudinit"),
                    &format!("{newid}/vm-{newid}-cloudinit"),
                )
                .replace(
                    &format!("vm-{vmid}-cloudinit"),
                    &format!("vm-{newid}-cloudinit"),
                );
            newconf.insert(k.clone(), json!(renamed));
            continue;
        }
        if k.strip_prefix("net")
            .is_some_and(|n| n.parse::<u32>().is_ok())
            && let Some(s) = v.as_str()
        {
            let mac = new_mac(st, newid);
            let model = s.split(',').next().unwrap_or_default();
            let model = model.split('=').next().unwrap_or(model);
            let rest: Vec<&str> = s.split(',').skip(1).collect();
            let mut out = format!("{model}={mac}");
            for r in rest {
                out.push(',');
                out.push_str(r);
            }
            newconf.insert(k.clone(), json!(out));
            continue;
        }
        newconf.insert(k.clone(), v.clone());
    }
    newconf.insert(
        "smbios1".into(),
        json!(format!("uuid={}", new_uuid(st, newid))),
    );
    if newconf.contains_key("vmgenid") {
        newconf.insert("vmgenid".into(), json!(new_uuid(st, newid)));
    }
    let name = o.get("name").map(str::to_string).unwrap_or_else(|| {
        format!(
            "Copy-of-VM-{}",
            src.config
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| vmid.to_string(), str::to_string)
        )
    });
    newconf.insert("name".into(), json!(name));
    if let Some(d) = o.get("description") {
        newconf.insert("description".into(), json!(d));
    }
    let node_s = node.to_string();
    let target_storage = o.get("storage").map(str::to_string);
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "qmclone",
        &vmid.to_string(),
        |st, log| {
            // The worker locks the source (exclusive when it runs, else shared) and checks its
            // config lock [SRC qemu-server API2/Qemu.pm `clone_vm`].
            crate::locks::flock(st, ctx, Kind::Qemu, vmid, src.running)?;
            if let Some(g) = st.guests.get(&vmid) {
                crate::locks::check_lock(g)?;
            }
            log.push(format!("creating a clone of VM {vmid} with ID {newid}"));
            let mut taken = Vec::new();
            let mut created: Vec<String> = Vec::new();
            let mut jobs = Vec::new();
            for (key, volid) in &drives {
                let spec = src
                    .config
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let size = size_of(&spec).unwrap_or(src.maxdisk);
                let kind = if full { "full" } else { "linked" };
                log.push(format!("create {kind} clone of drive {key} ({volid})"));
                let sid = target_storage
                    .clone()
                    .unwrap_or_else(|| volid.split(':').next().unwrap_or_default().to_string());
                let storage = st.storage(&sid).cloned().ok_or("storage vanished")?;
                let new_volid =
                    match alloc_disk(st, &node_s, &storage, newid, size, &mut taken, log) {
                        Ok(v) => v,
                        Err(e) => {
                            for v in &created {
                                free_disk_log(st, v, log);
                            }
                            return Err(format!("clone failed: {e}"));
                        }
                    };
                created.push(new_volid.clone());
                let new_volid = if full {
                    log.push(format!("allocated target volume '{new_volid}'"));
                    if src.running {
                        jobs.push((key.clone(), size));
                        log.push(format!("drive mirror is starting for drive-{key}"));
                        log.push(format!(
                            "drive-{key}: transferred 0.0 B of {} (0.00%) in 0s",
                            render_bytes(size)
                        ));
                        log.push(format!(
                            "drive-{key}: transferred {0} of {0} (100.00%) in 3s, ready",
                            render_bytes(size)
                        ));
                    } else {
                        for pct in [0u64, 25, 50, 75, 100] {
                            log.push(format!(
                                "transferred {} of {} ({pct}.00%)",
                                render_bytes(size / 100 * pct),
                                render_bytes(size)
                            ));
                        }
                    }
                    new_volid
                } else {
                    // LVM-thin keeps the base in the volid: `base-9000-disk-0/vm-150-disk-0`.
                    format!(
                        "{}:{}/{}",
                        storage.id,
                        vol_name(volid),
                        vol_name(&new_volid)
                    )
                };
                newconf.insert(
                    key.clone(),
                    json!(print_drive(&new_volid, drive_opts(&spec), Some(size))),
                );
            }
            if !jobs.is_empty() {
                log.push("all 'mirror' jobs are ready".into());
                if src.agent() {
                    log.push("issuing guest agent 'guest-fsfreeze-freeze' command".into());
                } else {
                    log.push("suspend vm".into());
                }
                for (key, _) in &jobs {
                    log.push(format!("drive-{key}: Cancelling block job"));
                    log.push(format!("drive-{key}: Done."));
                }
                if src.agent() {
                    log.push("issuing guest agent 'guest-fsfreeze-thaw' command".into());
                } else {
                    log.push("resume vm".into());
                }
            }
            let maxdisk = match boot_disk_size(&newconf) {
                0 => src.maxdisk,
                n => n,
            };
            st.guests.insert(
                newid,
                new_guest(newid, Kind::Qemu, &node_s, newconf.clone(), maxdisk),
            );
            Ok(())
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_like_pve() {
        assert_eq!(format_size(32 << 30), "32G");
        assert_eq!(format_size(790_626_304), "754M");
        assert_eq!(format_size(1536), "1536");
        assert_eq!(format_size(8 << 20), "8M");
        assert_eq!(parse_size("32G"), Some(32 << 30));
        assert_eq!(parse_size("754M"), Some(790_626_304));
        assert_eq!(render_bytes(32 << 30), "32.0 GiB");
        assert_eq!(render_bytes(0), "0.0 B");
    }
}
