//! `vzdump` and `qmrestore`: backup and restore tasks with the log lines of the REAL captures
//! (`vzdump_qemu_snapshot_dumpdir_pve8.txt`, `vzdump_qemu_snapshot_local_zstd_fragment_pve9.txt`,
//! `vzdump_lxc_stop_gzip_pve7.txt`, `qmrestore_vma_zst_pve8.txt`; FORMATS §3.10, §3.11). Like every
//! CLI task they print no UPID and exit 0 or 255.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::args::{self, Param, Parsed, Ty, p};
use crate::ops::{self, TaskRun};
use crate::provision;
use crate::qm::cli_task_output;
use crate::state::{Guest, Kind, State, Volume};
use crate::{Ctx, Output, locks, running, timefmt};

const GIB: f64 = 1_073_741_824.0;

/// PVE::Tools::format_size as vzdump's `archive file size:` uses it: `532MB`, `1.23GB`.
fn format_size(size: u64) -> String {
    let kb = size as f64 / 1024.0;
    if kb < 1024.0 {
        return format!("{}KB", kb as u64);
    }
    let mb = kb / 1024.0;
    if mb < 1024.0 {
        return format!("{}MB", mb as u64);
    }
    let gb = mb / 1024.0;
    if gb < 1024.0 {
        return format!("{gb:.2}GB");
    }
    format!("{:.2}TB", gb / 1024.0)
}

/// The `size=` of a disk config string, e.g. `32G`.
fn disk_size_label(config: &BTreeMap<String, Value>, key: &str) -> String {
    config
        .get(key)
        .and_then(Value::as_str)
        .and_then(|s| s.split(',').find_map(|kv| kv.strip_prefix("size=")))
        .unwrap_or("0")
        .to_string()
}

fn compress_ext(c: &str) -> (&'static str, f64) {
    match c {
        "zstd" => (".zst", 0.04),
        "gzip" => (".gz", 0.05),
        "lzo" | "1" => (".lzo", 0.07),
        _ => ("", 0.12),
    }
}

/// The job-wide settings of one vzdump run.
struct Job<'a> {
    storage: &'a str,
    /// The storage is a Proxmox Backup Server datastore (type `pbs`).
    pbs: bool,
    dump_dir: &'a str,
    mode: &'a str,
    compress: &'a str,
}

/// One guest's backup lines; returns the new archive volume.
fn backup_guest(g: &Guest, job: &Job, stamp_t: i64, now: i64, log: &mut Vec<String>) -> Volume {
    let Job {
        storage,
        pbs,
        dump_dir,
        mode,
        compress,
    } = *job;
    // To a PBS datastore the archive is a snapshot `vm|ct/<vmid>/<UTC RFC 3339>`, printed as
    // `creating Proxmox Backup Server archive '…'` (FORMATS §3.10), listed as
    // `<storage>:backup/vm/<vmid>/<time>` with format `pbs-vm`/`pbs-ct` (pve-storage
    // `PBSPlugin` `list_volumes`); there is no local file, so no file size line [INFER].
    let pbs_snapshot = pbs.then(|| {
        let btype = if g.kind == Kind::Qemu { "vm" } else { "ct" };
        let when = chrono::DateTime::from_timestamp(stamp_t, 0)
            .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        (btype, format!("{btype}/{}/{when}", g.vmid))
    });
    let archive_line = match &pbs_snapshot {
        Some((_, snap)) => format!("creating Proxmox Backup Server archive '{snap}'"),
        None => String::new(),
    };
    let kind = g.kind.api();
    let info = |log: &mut Vec<String>, m: String| log.push(format!("INFO: {m}"));
    let mode = if g.running { mode } else { "stop" };
    let (ext, ratio) = compress_ext(compress);
    let base = if g.kind == Kind::Qemu { "vma" } else { "tar" };
    let file = format!(
        "vzdump-{kind}-{}-{}.{base}{ext}",
        g.vmid,
        timefmt::archive_stamp(stamp_t)
    );
    let size = (g.maxdisk as f64 * ratio) as u64;
    let status = if g.running { "running" } else { "stopped" };
    info(log, format!("Starting Backup of VM {} ({kind})", g.vmid));
    info(log, format!("Backup started at {}", timefmt::iso(now)));
    info(log, format!("status = {status}"));
    match g.kind {
        Kind::Qemu => {
            info(log, format!("VM Name: {}", g.name()));
            for (key, volid) in g.disks() {
                info(
                    log,
                    format!(
                        "include disk '{key}' '{volid}' {}",
                        disk_size_label(&g.config, &key)
                    ),
                );
            }
            info(log, format!("backup mode: {mode}"));
            info(log, "ionice priority: 7".into());
            if g.running && mode == "stop" {
                info(log, "stopping virtual guest".into());
            } else if g.running && mode == "suspend" {
                info(log, "suspending guest".into());
            }
            if pbs {
                info(log, archive_line.clone());
            } else {
                info(log, format!("creating vzdump archive '{dump_dir}/{file}'"));
            }
            if !g.running || mode == "stop" {
                info(log, "starting kvm to execute backup task".into());
            }
            info(
                log,
                format!(
                    "started backup task '{:08x}-5054-4a96-98b2-{:012x}'",
                    g.vmid, now
                ),
            );
            if g.running {
                info(log, "resuming VM again".into());
            }
            let gib = g.maxdisk as f64 / GIB;
            info(
                log,
                format!(
                    "100% ({gib:.1} GiB of {gib:.1} GiB) in 3s, read: {:.1} GiB/s, write: 170.7 MiB/s",
                    gib / 3.0
                ),
            );
            info(
                log,
                format!(
                    "backup is sparse: {:.2} GiB (90%) total zero data",
                    gib * 0.9
                ),
            );
            info(
                log,
                format!(
                    "transferred {gib:.2} GiB in 3 seconds ({:.1} GiB/s)",
                    gib / 3.0
                ),
            );
            if !g.running {
                info(log, "stopping kvm after backup task".into());
            }
        }
        Kind::Lxc => {
            info(log, format!("backup mode: {mode}"));
            info(log, "ionice priority: 7".into());
            info(log, format!("CT Name: {}", g.name()));
            info(log, "including mount point rootfs ('/') in backup".into());
            if g.running && mode == "snapshot" {
                info(log, "create storage snapshot 'vzdump'".into());
            }
            if pbs {
                info(log, archive_line.clone());
            } else {
                info(log, format!("creating vzdump archive '{dump_dir}/{file}'"));
            }
            let written = g.maxdisk / 6;
            info(
                log,
                format!(
                    "Total bytes written: {written} ({}MiB, {}MiB/s)",
                    written / 1_048_576,
                    written / 1_048_576 / 3
                ),
            );
            if g.running && mode == "snapshot" {
                info(log, "cleanup temporary 'vzdump' snapshot".into());
            }
        }
    }
    if !pbs {
        info(log, format!("archive file size: {}", format_size(size)));
    }
    info(log, format!("Finished Backup of VM {} (00:00:03)", g.vmid));
    info(log, format!("Backup finished at {}", timefmt::iso(now)));
    let mut config = g.config.clone();
    config.remove("parent");
    let (volname, format) = match &pbs_snapshot {
        Some((btype, snap)) => (format!("backup/{snap}"), format!("pbs-{btype}")),
        None => (
            format!("backup/{file}"),
            format!("{base}{ext}").trim_start_matches('.').to_string(),
        ),
    };
    Volume {
        node: g.node.clone(),
        storage: storage.to_string(),
        volname,
        content: "backup".into(),
        format,
        size,
        ctime: stamp_t,
        vmid: Some(g.vmid),
        subtype: Some(kind.into()),
        guest_config: Some(config),
        disk_size: Some(g.maxdisk),
        link: None,
        backing: None,
        on_disk: false,
    }
}

/// The options `vzdump` (CLI and API) takes besides the VMIDs (subset of
/// `PVE::VZDump::Common` `$confdesc`; `job-id`, which only root@pam may set, from
/// `PVE::API2::VZDump` `vzdump`, PVE 9.1.11 and 9.2 schemas: `\S+`, at most 50 characters).
pub const VZDUMP_OPTS: [Param; 12] = [
    p("job-id", Ty::Str),
    p("storage", Ty::StorageId),
    p("mode", Ty::Enum(&["snapshot", "suspend", "stop"])),
    p("compress", Ty::Enum(&["0", "1", "gzip", "lzo", "zstd"])),
    p("remove", Ty::Bool),
    p("notes-template", Ty::Str),
    p("prune-backups", Ty::Str),
    p("protected", Ty::Bool),
    p("quiet", Ty::Bool),
    p("bwlimit", Ty::Int(Some(0), None)),
    p("ionice", Ty::Int(Some(0), Some(8))),
    p("zstd", Ty::Int(Some(0), None)),
];

/// Split a `--vmid` list (`100,101` or `100 101`, `PVE::Tools::split_list`) and check each VMID.
pub fn vmid_list(v: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for id in v.split([',', ';', ' ']).filter(|s| !s.is_empty()) {
        match args::check(Ty::Int(Some(100), Some(999_999_999)), id) {
            Ok(n) => out.push(n.parse().unwrap_or(0)),
            Err(_) => return Err("invalid format - value does not look like a valid VMID".into()),
        }
    }
    Ok(out)
}

/// One vzdump job (`PVE::API2::VZDump` `vzdump` [SRC]). `api_node` is the path's `{node}` for
/// `pvesh create /nodes/{node}/vzdump` (then guests of other nodes are left out altogether,
/// `get_included_guests` with `node` set) or `None` for the CLI (they are skipped with
/// `skip external VMs: …`). With no local guest the call returns the string `OK` and starts no
/// task ("silent exit if specified VMs run on other nodes"): `Ok(None)`.
///
/// Inside the task (`PVE::VZDump->new`): an unknown storage or one without `backup` content fails
/// the whole task with `could not get storage information for 'x': can't use storage 'x' for
/// backups - wrong content type` (and for an unknown one `could not activate storage …` first)
/// [SRC]; then the per-guest lines of `backup_guest`; an unknown VMID fails that guest and the
/// job dies with `job errors` (FORMATS §3.10).
pub fn vzdump_job(
    st: &mut State,
    ctx: &Ctx,
    api_node: Option<&str>,
    vmids: &[u32],
    opts: &Parsed,
) -> Option<TaskRun> {
    let mut vmids = vmids.to_vec();
    vmids.sort_unstable();
    vmids.dedup();
    let local = api_node.map_or_else(|| st.local_node.clone(), str::to_string);
    let node_of = |st: &State, v: &u32| st.guests.get(v).map(|g| g.node.clone());
    let local_ids: Vec<u32> = vmids
        .iter()
        .filter(|v| node_of(st, v).is_none_or(|n| n == local))
        .copied()
        .collect();
    let skip: Vec<String> = if api_node.is_some() {
        Vec::new()
    } else {
        vmids
            .iter()
            .filter(|v| node_of(st, v).is_some_and(|n| n != local))
            .map(u32::to_string)
            .collect()
    };
    if local_ids.is_empty() {
        return None;
    }
    let sid = opts.get("storage").unwrap_or("local").to_string();
    let mode = opts.get("mode").unwrap_or("snapshot").to_string();
    let compress = opts.get("compress").unwrap_or("0").to_string();
    let mut cmdline = format!(
        "vzdump {}",
        vmids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut shown: Vec<(String, String)> = opts
        .opts
        .iter()
        .filter(|(k, _)| !["vmid", "output-format", "quiet"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(n) = api_node {
        shown.push(("node".into(), n.to_string()));
        shown.sort();
    }
    for (k, v) in &shown {
        cmdline.push_str(&format!(" --{k} {v}"));
    }
    let id = if local_ids.len() == 1 {
        local_ids[0].to_string()
    } else {
        String::new()
    };
    let fail = ctx.task_fail();
    // With `fail` taken, `run_task` leaves the fault to the guests below.
    let quiet_ctx = ctx;
    Some(ops::run_task(
        st,
        quiet_ctx,
        &local,
        "vzdump",
        &id,
        |st, log| {
            // One backup job per node at a time: `getlock` waits for `/var/run/vzdump.lock`
            // (PVE::VZDump `getlock` [SRC]).
            if let Some(other) = running::vzdump_running(st, &local) {
                *ctx.tasks.blocked.borrow_mut() = Some(running::Blocked {
                    upid: other.upid.clone(),
                    what: running::Wait::VzdumpGlobal,
                });
                return Err("pve-sim: waiting for the vzdump lock".into());
            }
            if let Some((running::Wait::VzdumpGlobal, _)) = ctx.tasks.waited {
                log.push("INFO: trying to get global lock - waiting...".into());
                log.push("INFO: got global lock".into());
            }
            let storage = match st.storage(&sid).cloned() {
                Some(s) if s.content.iter().any(|c| c == "backup") => s,
                Some(_) => {
                    return Err(format!(
                        "could not get storage information for '{sid}': can't use storage '{sid}' for backups - wrong content type"
                    ));
                }
                None => {
                    return Err(format!(
                        "could not activate storage '{sid}': storage '{sid}' does not exist\ncould not get storage information for '{sid}': storage '{sid}' does not exist"
                    ));
                }
            };
            let dump_dir = format!(
                "{}/dump",
                storage.path.as_deref().unwrap_or("/mnt/pve/backup")
            );
            log.push(format!("INFO: starting new backup job: {cmdline}"));
            if !skip.is_empty() {
                log.push(format!("INFO: skip external VMs: {}", skip.join(", ")));
            }
            let mut errors = 0;
            for vmid in &local_ids {
                let Some(g) = st.guests.get(vmid).cloned() else {
                    log.push(format!(
                        "ERROR: Backup of VM {vmid} failed - unable to find VM '{vmid}'"
                    ));
                    log.push(format!("INFO: Failed at {}", timefmt::iso(ctx.now)));
                    errors += 1;
                    continue;
                };
                if let Some(msg) = &fail {
                    log.push(format!(
                        "INFO: Starting Backup of VM {vmid} ({})",
                        g.kind.api()
                    ));
                    log.push(format!("ERROR: Backup of VM {vmid} failed - {msg}"));
                    log.push(format!("INFO: Failed at {}", timefmt::iso(ctx.now)));
                    errors += 1;
                    continue;
                }
                // `lock_vm` (set_lock 'backup') comes after these three lines [SRC PVE/VZDump.pm
                // `exec_backup_task`]; a locked guest fails, the job goes on.
                if let Err(e) = locks::guard(st, ctx, g.kind, *vmid) {
                    if ctx.tasks.blocked.borrow().is_some() {
                        return Err(e);
                    }
                    let status = if g.running { "running" } else { "stopped" };
                    log.push(format!(
                        "INFO: Starting Backup of VM {vmid} ({})",
                        g.kind.api()
                    ));
                    log.push(format!("INFO: Backup started at {}", timefmt::iso(ctx.now)));
                    log.push(format!("INFO: status = {status}"));
                    log.push(format!("ERROR: Backup of VM {vmid} failed - {e}"));
                    log.push(format!("INFO: Failed at {}", timefmt::iso(ctx.now)));
                    errors += 1;
                    continue;
                }
                let mut t = ctx.now;
                let taken = |st: &State, t: i64| {
                    let kind = g.kind.api();
                    let prefix =
                        format!("backup/vzdump-{kind}-{vmid}-{}.", timefmt::archive_stamp(t));
                    // A PBS snapshot is named by its second alone, on every node.
                    st.volumes.iter().any(|v| {
                        v.storage == sid
                            && ((v.node == local && v.volname.starts_with(&prefix))
                                || (v.vmid == Some(*vmid) && v.ctime == t))
                    })
                };
                while taken(st, t) {
                    t += 1;
                }
                let vol = backup_guest(
                    &g,
                    &Job {
                        storage: &sid,
                        pbs: storage.kind == "pbs",
                        dump_dir: &dump_dir,
                        mode: &mode,
                        compress: &compress,
                    },
                    t,
                    ctx.now,
                    log,
                );
                st.volumes.push(vol);
            }
            if errors > 0 {
                log.push("INFO: Backup job finished with errors".into());
                Err("job errors".into())
            } else {
                log.push("INFO: Backup job finished successfully".into());
                Ok(())
            }
        },
    ))
}

/// `vzdump <vmid>… [--storage S] [--mode snapshot|suspend|stop] [--compress 0|1|gzip|lzo|zstd]`
/// (FORMATS §3.10): [`vzdump_job`] through the CLI's outsub (pve-manager `PVE/CLI/vzdump.pm`:
/// `exit(0) if $upid eq 'OK'`, else 0 or -1 by the task status) [SRC].
pub fn vzdump(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    let usage = "vzdump {<vmid>} [OPTIONS]";
    let parsed = match args::parse(argv, &VZDUMP_OPTS) {
        Ok(p) => p,
        Err(e) => return args::param_error(&e, usage),
    };
    let vmids = match vmid_list(&parsed.pos.join(" ")) {
        Ok(v) => v,
        Err(m) => return args::param_error(&vec![("vmid".into(), m)], usage),
    };
    if vmids.is_empty() {
        return Output::err("no guests selected - specify VMIDs or --all", 255);
    }
    match vzdump_job(st, ctx, None, &vmids, &parsed) {
        Some(run) => cli_task_output(&run),
        None => Output::default(),
    }
}

/// `qmrestore <archive> <vmid> [--storage S] [--force 1] [--unique 1] [--start 1]` (FORMATS §3.11,
/// REAL `qmrestore_vma_zst_pve8.txt`): the API's restore ([`provision::qemu_restore`]) with the
/// CLI's `$upid_exit`. The archive is a volid (`local:backup/…`) or a path under the storage's
/// dump directory on the local node; a name vzdump could not have made is
/// `ERROR: couldn't determine archive info from '<file>'` [SRC qmrestore.pm].
pub fn qmrestore(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    let usage = "qmrestore <archive> <vmid> [OPTIONS]";
    let schema = [
        p("storage", Ty::StorageId),
        p("force", Ty::Bool),
        p("unique", Ty::Bool),
        p("start", Ty::Bool),
        p("pool", Ty::Str),
        p("bwlimit", Ty::Int(Some(0), None)),
        p("live-restore", Ty::Bool),
    ];
    let parsed = match args::parse(argv, &schema) {
        Ok(p) => p,
        Err(e) => return args::param_error(&e, usage),
    };
    if parsed.pos.len() != 2 {
        let what = if parsed.pos.len() < 2 {
            "not enough"
        } else {
            "too many"
        };
        return Output::err(&format!("400 {what} arguments\n{usage}"), 255);
    }
    let archive = parsed.pos[0].clone();
    let vmid: u32 = match args::check(Ty::Int(Some(100), Some(999_999_999)), &parsed.pos[1]) {
        Ok(v) => v.parse().unwrap_or(0),
        Err(m) => return args::param_error(&vec![("vmid".into(), m)], usage),
    };
    let file = archive.rsplit(['/', ':']).next().unwrap_or(&archive);
    if !is_archive_name(file) {
        return Output::err(
            &format!("ERROR: couldn't determine archive info from '{archive}'"),
            255,
        );
    }
    let local = st.local_node.clone();
    let r = provision::qemu_restore(
        st,
        ctx,
        &provision::QemuRestore {
            node: &local,
            vmid,
            archive: &archive,
            storage: parsed.get("storage"),
            force: parsed.flag("force"),
            start: parsed.flag("start"),
        },
    );
    match r {
        Ok(run) => cli_task_output(&run),
        Err(f) => f.into(),
    }
}

/// `vzdump-(qemu|lxc|openvz)-<vmid>-<stamp>.<ext>` like `PVE::Storage::archive_info`'s
/// `$BACKUP_EXT_RE_2` (FORMATS §3.10).
fn is_archive_name(file: &str) -> bool {
    let Some(rest) = file.strip_prefix("vzdump-") else {
        return false;
    };
    let Some((kind, rest)) = rest.split_once('-') else {
        return false;
    };
    if !["qemu", "lxc", "openvz"].contains(&kind) {
        return false;
    }
    let Some((vmid, rest)) = rest.split_once('-') else {
        return false;
    };
    if vmid.parse::<u32>().is_err() {
        return false;
    }
    let Some(ext) = rest.get(20..) else {
        return false;
    };
    ["tgz", "tar", "vma"].iter().any(|b| {
        ext == *b
            || [".gz", ".lzo", ".zst", ".bz2"]
                .iter()
                .any(|c| ext == format!("{b}{c}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    const NOW: i64 = 1_790_000_000;

    fn v(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn vzdump_adds_an_archive_and_prints_the_job() {
        let mut st = initial(NOW);
        let n = st.volumes.len();
        let o = vzdump(
            &mut st,
            &Ctx::new(NOW),
            &v("100 --storage local --mode snapshot --compress zstd"),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(
            lines[0],
            "INFO: starting new backup job: vzdump 100 --compress zstd --mode snapshot --storage local"
        );
        assert_eq!(lines[1], "INFO: Starting Backup of VM 100 (qemu)");
        assert_eq!(
            *lines.last().unwrap(),
            "INFO: Backup job finished successfully"
        );
        assert!(o.stdout.contains(&format!(
            "INFO: creating vzdump archive '/var/lib/vz/dump/vzdump-qemu-100-{}.vma.zst'",
            timefmt::archive_stamp(NOW)
        )));
        assert_eq!(st.volumes.len(), n + 1);
        let o = vzdump(&mut st, &Ctx::new(NOW), &v("200 --compress gzip"));
        assert!(o.stdout.contains(".tar.gz'"));
        // Only external guests: the API returns 'OK', the CLI exits 0 silently [SRC].
        let o = vzdump(&mut st, &Ctx::new(NOW), &v("101"));
        assert_eq!((o.stdout.as_str(), o.code), ("", 0));
        let o = vzdump(&mut st, &Ctx::new(NOW), &v("100 101"));
        assert!(o.stdout.contains("INFO: skip external VMs: 101\n"));
        let o = vzdump(&mut st, &Ctx::new(NOW), &v("100 --storage local-lvm"));
        assert_eq!(
            (o.stderr.as_str(), o.code),
            (
                "could not get storage information for 'local-lvm': can't use storage 'local-lvm' for backups - wrong content type\n",
                255
            )
        );
        let o = vzdump(&mut st, &Ctx::new(NOW), &v("999"));
        assert_eq!((o.stderr.as_str(), o.code), ("job errors\n", 255));
    }

    #[test]
    fn qmrestore_creates_the_vm_or_refuses_existing() {
        let mut st = initial(NOW);
        let vol = st
            .volumes
            .iter()
            .find(|v| v.vmid == Some(100))
            .unwrap()
            .volid();
        let o = qmrestore(&mut st, &Ctx::new(NOW), &v(&format!("{vol} 100")));
        assert_eq!(
            (o.stderr.as_str(), o.code),
            (
                "unable to restore VM 100 - VM 100 already exists on node 'pve1'\n",
                255
            )
        );
        let o = qmrestore(
            &mut st,
            &Ctx::new(NOW),
            &v(&format!("{vol} 150 --storage local-lvm")),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(
            o.stdout.starts_with(
                "restore vma archive: zstd -q -d -c /var/lib/vz/dump/vzdump-qemu-100-"
            )
        );
        assert!(o.stdout.ends_with("rescan volumes...\n"));
        let g = &st.guests[&150];
        assert_eq!(g.name(), "web");
        assert_eq!(
            g.disks(),
            vec![("scsi0".to_string(), "local-lvm:vm-150-disk-0".to_string())]
        );
        let o = qmrestore(&mut st, &Ctx::new(NOW), &v("/tmp/foo.tar 151"));
        assert_eq!(
            o.stderr,
            "ERROR: couldn't determine archive info from '/tmp/foo.tar'\n"
        );
    }
}
