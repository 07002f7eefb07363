//! Storage-side operations: prune backups (`GET|DELETE …/storage/{sid}/prunebackups`), free a
//! volume (`pvesm free`), remove a storage definition (`DELETE /storage/{sid}`), download an
//! ISO/template from a URL (`POST …/storage/{sid}/download-url`) and the appliance index
//! (`GET|POST /nodes/{node}/aplinfo`, `pveam available|download`).
//!
//! Sources [SRC, commits in FORMATS §0]: pve-storage `API2/Storage/PruneBackups.pm`,
//! `Storage.pm` `prune_backups`/`prune_mark_backup_group`/`archive_remove`,
//! `Storage/Plugin.pm` `prune_backups`/`free_image`, `API2/Storage/Content.pm` `delete`,
//! `API2/Storage/Config.pm` `delete`, `API2/Storage/Status.pm` `download_url`; pve-common
//! `Tools.pm` `download_file_from_url`; pve-manager `API2/Nodes.pm` `aplinfo`/`apl_download`,
//! `APLInfo.pm`. Nothing is downloaded: the simulator only pretends (see [`download_url`]).

use std::collections::BTreeMap;

use chrono::{Datelike, Local, TimeZone, Timelike};
use serde_json::{Value, json};

use crate::ops::{self, TaskRun};
use crate::provision::file_path;
use crate::state::{State, Volume};
use crate::{Ctx, Failure};

/// PVE's `raise_param_exc` as a CLI prints it.
pub(crate) fn param_exc(key: &str, msg: &str) -> Failure {
    Failure::die(format!(
        "400 Parameter verification failed.\n{key}: {msg}\n"
    ))
}

/// The retention options of a `prune-backups` property string.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Keep {
    /// `keep-all=1`.
    pub all: bool,
    /// `keep-last`, `keep-hourly`, `keep-daily`, `keep-weekly`, `keep-monthly`, `keep-yearly`.
    pub counts: BTreeMap<String, u64>,
}

const KEEP_KEYS: [&str; 6] = [
    "keep-last",
    "keep-hourly",
    "keep-daily",
    "keep-weekly",
    "keep-monthly",
    "keep-yearly",
];

/// Parse `keep-last=3,keep-daily=7` (`parse_property_string('prune-backups', …)`); errors in
/// JSONSchema's words (`prune-backups: invalid format - …`).
pub fn parse_keep(s: &str) -> Result<Keep, Failure> {
    let bad = |m: String| param_exc("prune-backups", &format!("invalid format - {m}"));
    let mut k = Keep::default();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (key, val) = part.split_once('=').ok_or_else(|| {
            bad("value without key, but schema does not define a default key".into())
        })?;
        if key == "keep-all" {
            k.all = matches!(val, "1" | "true" | "yes" | "on");
            continue;
        }
        if !KEEP_KEYS.contains(&key) {
            return Err(bad(format!(
                "invalid key in comma-separated list property: {key}"
            )));
        }
        let n: u64 = val.parse().map_err(|_| {
            bad(format!(
                "{key}: type check ('integer') failed - got '{val}'"
            ))
        })?;
        if k.counts.insert(key.to_string(), n).is_some() {
            return Err(bad(format!(
                "duplicate key in comma-separated list property: {key}"
            )));
        }
    }
    if k.all && k.counts.values().any(|n| *n > 0) {
        return Err(bad(
            "keep-all cannot be set together with other options.".into()
        ));
    }
    Ok(k)
}

/// One entry of the prune list.
#[derive(Debug, Clone)]
struct PruneEntry {
    volid: String,
    ctime: i64,
    vtype: String,
    vmid: Option<u32>,
    mark: Option<&'static str>,
}

/// `prune_mark_backup_group` [SRC]: newest first; each `keep-*` keeps the newest backup of the
/// next N distinct periods not yet covered; the rest is `remove`.
fn mark_group(group: &mut [&mut PruneEntry], keep: &Keep) {
    let positive = keep.counts.values().any(|n| *n > 0);
    if keep.all || !positive {
        for e in group.iter_mut() {
            e.mark = Some("keep");
        }
        return;
    }
    group.sort_by_key(|e| std::cmp::Reverse(e.ctime));
    type IdFn = fn(i64) -> String;
    let periods: [(&str, IdFn); 6] = [
        ("keep-last", |t| t.to_string()),
        ("keep-hourly", |t| {
            Local
                .timestamp_opt(t, 0)
                .single()
                .map_or_else(String::new, |d| {
                    format!("{}/{}/{}/{}", d.hour(), d.day(), d.month(), d.year())
                })
        }),
        ("keep-daily", |t| {
            Local
                .timestamp_opt(t, 0)
                .single()
                .map_or_else(String::new, |d| {
                    format!("{}/{}/{}", d.day(), d.month(), d.year())
                })
        }),
        ("keep-weekly", |t| {
            Local
                .timestamp_opt(t, 0)
                .single()
                .map_or_else(String::new, |d| {
                    let w = d.iso_week();
                    format!("{}/{}", w.week(), w.year())
                })
        }),
        ("keep-monthly", |t| {
            Local
                .timestamp_opt(t, 0)
                .single()
                .map_or_else(String::new, |d| format!("{}/{}", d.month(), d.year()))
        }),
        ("keep-yearly", |t| {
            Local
                .timestamp_opt(t, 0)
                .single()
                .map_or_else(String::new, |d| d.year().to_string())
        }),
    ];
    for (key, id) in periods {
        let Some(&count) = keep.counts.get(key).filter(|n| **n > 0) else {
            continue;
        };
        let mut already: Vec<String> = group
            .iter()
            .filter(|e| e.mark == Some("keep"))
            .map(|e| id(e.ctime))
            .collect();
        let mut newly: Vec<String> = Vec::new();
        for e in group.iter_mut() {
            let pid = id(e.ctime);
            if e.mark.is_some() || already.contains(&pid) {
                continue;
            }
            if !newly.contains(&pid) {
                if newly.len() as u64 >= count {
                    break;
                }
                newly.push(pid);
                e.mark = Some("keep");
            } else {
                e.mark = Some("remove");
            }
        }
        already.extend(newly);
    }
    for e in group.iter_mut() {
        e.mark.get_or_insert("remove");
    }
}

/// The prune list of `sid` on `node` (`Plugin::prune_backups`, dry run).
fn prune_list(
    st: &State,
    node: &str,
    sid: &str,
    keep: &Keep,
    vmid: Option<u32>,
    ty: Option<&str>,
) -> Vec<PruneEntry> {
    let mut vols: Vec<&Volume> = st
        .volumes
        .iter()
        .filter(|v| v.storage == sid && v.node == node && v.content == "backup")
        .filter(|v| vmid.is_none_or(|id| v.vmid == Some(id)))
        .collect();
    vols.sort_by_key(|v| v.volid());
    let mut list: Vec<PruneEntry> = vols
        .into_iter()
        .filter(|v| ty.is_none_or(|t| v.subtype.as_deref() == Some(t)))
        .map(|v| PruneEntry {
            volid: v.volid(),
            ctime: v.ctime,
            vtype: v.subtype.clone().unwrap_or_else(|| "unknown".into()),
            vmid: v.vmid,
            mark: None,
        })
        .collect();
    let mut groups: BTreeMap<String, Vec<&mut PruneEntry>> = BTreeMap::new();
    for e in &mut list {
        let g = format!("{}/{}", e.vtype, e.vmid.unwrap_or(0));
        groups.entry(g).or_default().push(e);
    }
    for g in groups.values_mut() {
        mark_group(g, keep);
    }
    list
}

fn check_backup_storage(st: &State, sid: &str) -> Result<(), String> {
    let s = st
        .storage(sid)
        .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
    if !s.content.iter().any(|c| c == "backup") {
        return Err(format!("storage '{sid}' does not support backups"));
    }
    Ok(())
}

/// `GET /nodes/{node}/storage/{sid}/prunebackups [--vmid N] [--type qemu|lxc]
/// [--prune-backups keep-last=N]`: `[{ctime, mark, type, vmid, volid}]` [SRC `dryrun`]. The
/// storage checks are pre-fork errors here (no task). Without `--prune-backups` the storage's
/// own retention applies; the simulated storages have none (`no prune-backups options configured
/// for storage 'local'`).
pub fn prune_dryrun(
    st: &State,
    node: &str,
    sid: &str,
    keep: Option<&str>,
    vmid: Option<u32>,
    ty: Option<&str>,
) -> Result<Value, Failure> {
    check_backup_storage(st, sid).map_err(Failure::die)?;
    let keep = match keep {
        Some(k) => parse_keep(k)?,
        None => {
            return Err(Failure::die(format!(
                "no prune-backups options configured for storage '{sid}'"
            )));
        }
    };
    Ok(Value::Array(
        prune_list(st, node, sid, &keep, vmid, ty)
            .into_iter()
            .map(|e| {
                let mut v = json!({"ctime": e.ctime, "mark": e.mark.unwrap_or("remove"), "type": e.vtype, "volid": e.volid});
                if let (Some(id), Value::Object(m)) = (e.vmid, &mut v) {
                    m.insert("vmid".into(), json!(id));
                }
                v
            })
            .collect(),
    ))
}

/// `DELETE /nodes/{node}/storage/{sid}/prunebackups …`: task `prunebackups` whose id is
/// `<vmid>@<storage>` (or `<storage>`) [SRC]; the log has `removing backup '<volid>'` per removed
/// archive (the default logfunc prints the bare message) [SRC Plugin.pm]. The storage checks
/// run inside the task.
pub fn prune(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    sid: &str,
    keep: Option<&str>,
    vmid: Option<u32>,
    ty: Option<&str>,
) -> Result<TaskRun, Failure> {
    let keep = keep.map(parse_keep).transpose()?;
    let id = match vmid {
        Some(v) => format!("{v}@{sid}"),
        None => sid.to_string(),
    };
    let node_s = node.to_string();
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "prunebackups",
        &id,
        |st, log| {
            check_backup_storage(st, sid)?;
            let keep = keep.ok_or_else(|| {
                format!("no prune-backups options configured for storage '{sid}'")
            })?;
            let list = prune_list(st, &node_s, sid, &keep, vmid, ty);
            for e in list.iter().filter(|e| e.mark == Some("remove")) {
                log.push(format!("removing backup '{}'", e.volid));
                st.volumes
                    .retain(|v| !(v.node == node_s && v.volid() == e.volid));
            }
            Ok(())
        },
    ))
}

/// `pvesm free <volume> [--storage S]` (`API2::Storage::Content::delete` [SRC]): an `imgdel` task
/// (id `<owner>@<storage>` or `<storage>`) whose log ends with `Removed volume '<volid>'`; no
/// UPID is printed and the exit is 0 even if the task failed (no outsub in pvesm's cmddef, like
/// `pveam download`, FORMATS §3.12 [INFER]). A file that is not there is only a warning inside
/// the task (`disk image '<path>' does not exist`, `Plugin::free_image` [SRC]) and the task still
/// succeeds. Pre-fork: an incomplete volid (parameter error) and an unknown storage.
pub fn free(
    st: &mut State,
    ctx: &Ctx,
    volume: &str,
    storage: Option<&str>,
) -> Result<TaskRun, Failure> {
    let local = st.local_node.clone();
    free_on(st, ctx, &local, volume, storage)
}

/// [`free`] on `node`: `DELETE /nodes/{node}/storage/{storage}/content/{volume}` (pvesh
/// reaches the node; `pvesm free` is the local node's).
pub fn free_on(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    volume: &str,
    storage: Option<&str>,
) -> Result<TaskRun, Failure> {
    let volid = if volume.contains(':') {
        let sid = volume.split(':').next().unwrap_or_default();
        if let Some(s) = storage.filter(|s| *s != sid) {
            return Err(param_exc(
                "volume",
                &format!("storage ID mismatch ({sid} != {s})"),
            ));
        }
        volume.to_string()
    } else {
        let Some(s) = storage else {
            return Err(param_exc(
                "volume",
                "no storage specified - incomplete volume ID",
            ));
        };
        format!("{s}:{volume}")
    };
    let (sid, volname) = volid.split_once(':').unwrap_or_default();
    let Some(scfg) = st.storage(sid).cloned() else {
        return Err(Failure::die(format!("storage '{sid}' does not exist")));
    };
    let local = node.to_string();
    let file = st
        .volumes
        .iter()
        .find(|v| v.volid() == volid && (v.node == local || scfg.shared))
        .cloned();
    let owner = match &file {
        Some(v) => v.vmid,
        // parse_volname's owner: `vm-<id>-…`, `base-<id>-…`, `backup/vzdump-<type>-<id>-…`.
        None => volname
            .strip_prefix("vm-")
            .or_else(|| volname.strip_prefix("base-"))
            .or_else(|| {
                volname
                    .strip_prefix("backup/vzdump-")
                    .and_then(|r| r.split_once('-').map(|(_, rest)| rest))
            })
            .and_then(|r| r.split('-').next())
            .and_then(|n| n.parse().ok()),
    };
    let lv = volname.rsplit('/').next().unwrap_or(volname);
    let referenced = st
        .guests
        .values()
        .filter(|g| g.node == local || scfg.shared)
        .flat_map(|g| g.disks())
        .any(|(_, d)| d.starts_with(&format!("{sid}:")) && d.rsplit(['/', ':']).next() == Some(lv));
    if scfg.path.is_none() && referenced {
        return Err(Failure::die(
            "pve-sim: freeing a volume that a guest config still references is not simulated",
        ));
    }
    let id = match owner {
        Some(o) => format!("{o}@{sid}"),
        None => sid.to_string(),
    };
    let path = file_path(st, &volid);
    Ok(ops::run_task(st, ctx, &local, "imgdel", &id, |st, log| {
        match file {
            Some(_) => {
                st.volumes
                    .retain(|v| !(v.volid() == volid && (v.node == local || scfg.shared)));
                // An image with a real file on this machine (one an upload placed) goes with
                // it, or it would be listed again (`adopt_iso_files`).
                if local == st.local_node
                    && volname
                        .strip_prefix("iso/")
                        .is_some_and(|n| !n.contains('/') && !n.starts_with('.'))
                {
                    let _ = std::fs::remove_file(&path);
                }
            }
            None if scfg.path.is_some() => {
                log.push(format!("disk image '{path}' does not exist"));
            }
            None => {
                // LvmThinPlugin::free_image runs lvremove [SRC]; its error text [INFER].
                return Err(format!(
                    "lvremove 'pve/{volname}' error:   Failed to find logical volume \"pve/{volname}\""
                ));
            }
        }
        log.push(format!("Removed volume '{volid}'"));
        Ok(())
    }))
}

/// `DELETE /storage/{sid}` (`API2::Storage::Config::delete` [SRC]): returns `null` (pvesh prints
/// nothing); an unknown id dies under the storage-config lock as
/// `delete storage failed: storage 'x' does not exist` (exit 255). The data stays where it is:
/// files of the storage are kept in the state but no longer listed.
pub fn delete_storage(st: &mut State, sid: &str) -> Result<(), Failure> {
    if st.storage(sid).is_none() {
        return Err(Failure::die(format!(
            "delete storage failed: storage '{sid}' does not exist"
        )));
    }
    st.storages.retain(|s| s.id != sid);
    Ok(())
}

/// Lowercase hex of `len` digits derived from `seed` (a stand-in digest).
fn fake_hex(seed: &str, len: usize) -> String {
    let mut out = String::new();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    while out.len() < len {
        h = h.rotate_left(13).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995;
        out.push_str(&format!("{h:016x}"));
    }
    out.truncate(len);
    out
}

fn digest_len(algo: &str) -> usize {
    match algo {
        "md5" => 32,
        "sha1" => 40,
        "sha224" => 56,
        "sha384" => 96,
        "sha512" => 128,
        _ => 64,
    }
}

/// The test hook of the simulated download: an expected checksum of only zeros (any length) or
/// the word `bad` does not match; any other expected checksum is taken as what the file hashes to.
pub fn checksum_mismatches(expected: &str) -> bool {
    expected == "bad" || (!expected.is_empty() && expected.chars().all(|c| c == '0'))
}

/// What a download needs.
struct Download<'a> {
    url: &'a str,
    dest: &'a str,
    /// `(algorithm, expected)`.
    checksum: Option<(&'a str, &'a str)>,
    /// The file exists already.
    exists: bool,
    size: u64,
}

/// `download_file_from_url` [SRC pve-common Tools.pm] without a network: the log lines in
/// source order (`downloading <url> to <dest>`, wget's output [INFER], `calculating
/// checksum...OK, checksum verified`, `download of '<url>' to '<dest>' finished`), the
/// existing-file cases and the checksum mismatch. `Ok(true)` when a file was (pretended to be)
/// written.
fn download_file(d: &Download, now: i64, log: &mut Vec<String>) -> Result<bool, String> {
    log.push(format!("downloading {} to {}", d.url, d.dest));
    let got = |algo: &str| fake_hex(d.url, digest_len(algo));
    if d.exists {
        let Some((algo, expected)) = d.checksum else {
            return Err(format!("refusing to override existing file '{}'", d.dest));
        };
        if checksum_mismatches(expected) {
            log.push("calculating checksum of existing file...".into());
            return Err(format!(
                "checksum mismatch: got '{}' != expect '{expected}', aborting",
                got(algo)
            ));
        }
        log.push(
            "calculating checksum of existing file...OK, got correct file already, no need to download"
                .into(),
        );
        return Ok(false);
    }
    let host = d
        .url
        .split("://")
        .nth(1)
        .and_then(|r| r.split(['/', ':']).next())
        .unwrap_or("localhost");
    let tmp = format!("{}.tmp_dwnl.{}", d.dest, 100_000 + now % 900_000);
    let stamp = crate::timefmt::iso(now);
    let mib = d.size >> 20;
    log.push(format!("--{stamp}--  {}", d.url));
    log.push(format!("Resolving {host} ({host})... 203.0.113.10"));
    let port = if d.url.starts_with("https:") { 443 } else { 80 };
    log.push(format!(
        "Connecting to {host} ({host})|203.0.113.10|:{port}... connected."
    ));
    log.push("HTTP request sent, awaiting response... 200 OK".into());
    log.push(format!(
        "Length: {} ({mib}M) [application/octet-stream]",
        d.size
    ));
    log.push(format!("Saving to: '{tmp}'"));
    log.push(format!(
        "{:>6}K ........ ........ ........ ........ ........ ........ 100% 41.2M=18s",
        0
    ));
    log.push(format!(
        "{} (41.2 MB/s) - '{tmp}' saved [{}/{}]",
        crate::timefmt::iso(now + 18),
        d.size,
        d.size
    ));
    if let Some((algo, expected)) = d.checksum {
        if checksum_mismatches(expected) {
            log.push("calculating checksum...".into());
            return Err(format!(
                "checksum mismatch: got '{}' != expect '{expected}'",
                got(algo)
            ));
        }
        log.push("calculating checksum...OK, checksum verified".into());
    }
    log.push(format!("download of '{}' to '{}' finished", d.url, d.dest));
    Ok(true)
}

fn tmpl_format(file: &str) -> &'static str {
    if file.ends_with(".tar.zst") {
        "tzst"
    } else if file.ends_with(".tar.gz") {
        "tgz"
    } else if file.ends_with(".tar.xz") {
        "txz"
    } else if file.ends_with(".tar.bz2") {
        "tbz2"
    } else {
        "tar"
    }
}

/// A plausible size for a downloaded file, stable per name.
fn fake_size(name: &str, base: u64) -> u64 {
    let h = fake_hex(name, 8);
    base + (u64::from_str_radix(&h, 16).unwrap_or(0) % 256) * (1 << 20)
}

/// The parameters of `download-url`.
#[derive(Debug, Clone, Copy)]
pub struct DownloadUrl<'a> {
    /// Node.
    pub node: &'a str,
    /// Storage.
    pub storage: &'a str,
    /// `iso`, `vztmpl` or `import`.
    pub content: &'a str,
    /// `http(s)://…`.
    pub url: &'a str,
    /// Target file name (normalised like PVE does).
    pub filename: &'a str,
    /// `(checksum-algorithm, checksum)`.
    pub checksum: Option<(&'a str, &'a str)>,
}

/// `POST /nodes/{node}/storage/{sid}/download-url` (task `download`, id = the file name [SRC]).
///
/// Pre-fork: unknown storage, `can't upload to storage type 'lvmthin', not a file based
/// storage!`, `storage 'x' is not configured for content-type 'iso'`, and the file name's
/// extension (`filename: wrong file extension`, a parameter error). In the task: see
/// [`download_file`]; the new file appears as `<sid>:iso/<filename>` (or `vztmpl/`). Test hook:
/// [`checksum_mismatches`]. A `fail` fault rule matching the call fails the task.
pub fn download_url(st: &mut State, ctx: &Ctx, d: &DownloadUrl) -> Result<TaskRun, Failure> {
    let DownloadUrl {
        node,
        storage,
        content,
        url,
        filename,
        checksum,
    } = *d;
    let scfg = st
        .storage(storage)
        .cloned()
        .ok_or_else(|| Failure::die(format!("storage '{storage}' does not exist")))?;
    let Some(base) = scfg.path.clone() else {
        return Err(Failure::die(format!(
            "can't upload to storage type '{}', not a file based storage!",
            scfg.kind
        )));
    };
    if !scfg.content.iter().any(|c| c == content) {
        return Err(Failure::die(format!(
            "storage '{storage}' is not configured for content-type '{content}'"
        )));
    }
    // normalize_content_filename
    let name: String = filename
        .trim_end_matches('\n')
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let lower = name.to_ascii_lowercase();
    let (dir, ok) = match content {
        "iso" => ("iso", lower.ends_with(".iso") || lower.ends_with(".img")),
        "vztmpl" => (
            "vztmpl",
            [".tar", ".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2"]
                .iter()
                .any(|e| lower.ends_with(e)),
        ),
        // pve-storage `$UPLOAD_IMPORT_EXT_RE_1 = qr/\.(ova|qcow2|raw|vmdk)/` [SRC]: no `.img`.
        _ => (
            "import",
            [".ova", ".qcow2", ".raw", ".vmdk"]
                .iter()
                .any(|e| lower.ends_with(e)),
        ),
    };
    if !ok {
        return Err(param_exc("filename", "wrong file extension"));
    }
    let volname = format!("{dir}/{name}");
    let dest = format!(
        "{base}/{}/{name}",
        match dir {
            "iso" => "template/iso",
            "vztmpl" => "template/cache",
            _ => "import",
        }
    );
    let node_s = node.to_string();
    let sid = storage.to_string();
    let content_s = content.to_string();
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "download",
        &name,
        |st, log| {
            let exists = st
                .volumes
                .iter()
                .any(|v| v.node == node_s && v.storage == sid && v.volname == volname);
            let size = fake_size(
                &name,
                if content_s == "iso" {
                    600 << 20
                } else {
                    110 << 20
                },
            );
            let wrote = download_file(
                &Download {
                    url,
                    dest: &dest,
                    checksum,
                    exists,
                    size,
                },
                ctx.now,
                log,
            )?;
            if wrote {
                // Import content's format is its extension (pve-storage parse_volname).
                let format = match content_s.as_str() {
                    "iso" => "iso",
                    "import" => name.rsplit('.').next().unwrap_or("raw"),
                    _ => tmpl_format(&name),
                };
                st.volumes.push(Volume::file(
                    &node_s, &sid, &volname, &content_s, format, size, ctx.now,
                ));
            }
            Ok(())
        },
    ))
}

/// The appliance index (`aplinfo.dat` as `PVE::APLInfo::load_data` reads it): the `system`
/// names of the REAL `pveam_available_section_system_pve8.txt`, plus Debian 13 and two TurnKey
/// appliances. `(section, template)`.
pub const APPLIANCES: &[(&str, &str)] = &[
    ("system", "almalinux-9-default_20240911_amd64.tar.xz"),
    ("system", "alpine-3.19-default_20240207_amd64.tar.xz"),
    ("system", "alpine-3.20-default_20240908_amd64.tar.xz"),
    ("system", "alpine-3.21-default_20241217_amd64.tar.xz"),
    ("system", "archlinux-base_20240911-1_amd64.tar.zst"),
    ("system", "centos-9-stream-default_20240828_amd64.tar.xz"),
    ("system", "debian-11-standard_11.7-1_amd64.tar.zst"),
    ("system", "debian-12-standard_12.7-1_amd64.tar.zst"),
    ("system", "debian-13-standard_13.1-2_amd64.tar.zst"),
    ("system", "devuan-5.0-standard_5.0_amd64.tar.gz"),
    ("system", "fedora-41-default_20241118_amd64.tar.xz"),
    ("system", "fedora-42-default_20250428_amd64.tar.xz"),
    ("system", "gentoo-current-openrc_20250508_amd64.tar.xz"),
    ("system", "openeuler-24.03-default_20250507_amd64.tar.xz"),
    ("system", "openeuler-25.03-default_20250507_amd64.tar.xz"),
    ("system", "opensuse-15.6-default_20240910_amd64.tar.xz"),
    ("system", "rockylinux-9-default_20240912_amd64.tar.xz"),
    ("system", "ubuntu-20.04-standard_20.04-1_amd64.tar.gz"),
    ("system", "ubuntu-22.04-standard_22.04-1_amd64.tar.zst"),
    ("system", "ubuntu-24.04-standard_24.04-2_amd64.tar.zst"),
    ("system", "ubuntu-24.10-standard_24.10-1_amd64.tar.zst"),
    ("system", "ubuntu-25.04-standard_25.04-1.1_amd64.tar.zst"),
    (
        "turnkeylinux",
        "debian-12-turnkey-nextcloud_18.1-1_amd64.tar.gz",
    ),
    (
        "turnkeylinux",
        "debian-12-turnkey-wordpress_18.2-1_amd64.tar.gz",
    ),
];

const APL_SOURCE: &str = "http://download.proxmox.com/images";

/// One `aplinfo` record (`read_aplinfo_from_fh` [SRC]: every field of the record, lower-cased,
/// plus `headline`, `description`, `source`, `template`; field values [INFER] from the
/// template name: `<package>_<version>_<arch>.tar.*`).
pub fn appliance(section: &str, template: &str) -> Value {
    let stem = template.split(".tar").next().unwrap_or(template);
    let mut parts = stem.rsplitn(3, '_');
    let arch = parts.next().unwrap_or("amd64");
    let version = parts.next().unwrap_or("1.0");
    let package = parts.next().unwrap_or(stem);
    let os = if section == "turnkeylinux" {
        package
            .split("-turnkey")
            .next()
            .unwrap_or(package)
            .to_string()
    } else {
        match package.rsplit_once('-') {
            Some((os, _)) => os.to_string(),
            None => package.to_string(),
        }
    };
    let pretty = {
        let mut c = os.chars();
        match c.next() {
            Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
            None => String::new(),
        }
    }
    .replace('-', " ");
    let flavour = package.rsplit('-').next().unwrap_or(package);
    let headline = format!("{pretty} ({flavour})");
    json!({
        "architecture": arch,
        "description": format!("{headline} - a small {pretty} system, packaged by Proxmox."),
        "headline": headline,
        "infopage": "https://pve.proxmox.com/wiki/Linux_Container#pct_supported_distributions",
        "location": format!("{APL_SOURCE}/{section}/{template}"),
        "maintainer": "Proxmox Support Team <support@proxmox.com>",
        "os": os,
        "package": package,
        "section": section,
        "sha512sum": fake_hex(template, 128),
        "source": APL_SOURCE,
        "template": template,
        "type": "lxc",
        "version": version
    })
}

/// `GET /nodes/{node}/aplinfo`: every appliance (hash order in PVE; sorted here).
pub fn aplinfo() -> Value {
    Value::Array(APPLIANCES.iter().map(|(s, t)| appliance(s, t)).collect())
}

/// `POST /nodes/{node}/aplinfo --storage S --template T` and `pveam download S T`
/// (`apl_download` [SRC]): pre-fork `template: no such template` (parameter error), unknown
/// storage, `storage 'x' does not support templates`; then a `download` task with id = the
/// template name (FORMATS §3.12) that checks the appliance's sha512sum; a template already there
/// is `OK, got correct file already, no need to download`.
pub fn apl_download(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    storage: &str,
    template: &str,
) -> Result<TaskRun, Failure> {
    let Some((section, _)) = APPLIANCES.iter().find(|(_, t)| *t == template) else {
        return Err(param_exc("template", "no such template"));
    };
    let scfg = st
        .storage(storage)
        .cloned()
        .ok_or_else(|| Failure::die(format!("storage '{storage}' does not exist")))?;
    if !scfg.content.iter().any(|c| c == "vztmpl") {
        return Err(Failure::die(format!(
            "storage '{storage}' does not support templates"
        )));
    }
    let dest = format!(
        "{}/template/cache/{template}",
        scfg.path
            .clone()
            .unwrap_or_else(|| format!("/mnt/pve/{storage}"))
    );
    let url = format!("{APL_SOURCE}/{section}/{template}");
    let sha = fake_hex(template, 128);
    let node_s = node.to_string();
    let sid = storage.to_string();
    let volname = format!("vztmpl/{template}");
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "download",
        template,
        |st, log| {
            let exists = st
                .volumes
                .iter()
                .any(|v| v.node == node_s && v.storage == sid && v.volname == volname);
            let size = fake_size(template, 110 << 20);
            let wrote = download_file(
                &Download {
                    url: &url,
                    dest: &dest,
                    checksum: Some(("sha512", &sha)),
                    exists,
                    size,
                },
                ctx.now,
                log,
            )?;
            if wrote {
                st.volumes.push(Volume::file(
                    &node_s,
                    &sid,
                    &volname,
                    "vztmpl",
                    tmpl_format(template),
                    size,
                    ctx.now,
                ));
            }
            Ok(())
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(volid: &str, ctime: i64) -> PruneEntry {
        PruneEntry {
            volid: volid.into(),
            ctime,
            vtype: "qemu".into(),
            vmid: Some(100),
            mark: None,
        }
    }

    #[test]
    fn keep_last_marks_the_newest() {
        let mut a = [entry("a", 1), entry("b", 3), entry("c", 2)];
        let keep = parse_keep("keep-last=2").unwrap();
        let mut refs: Vec<&mut PruneEntry> = a.iter_mut().collect();
        mark_group(&mut refs, &keep);
        let marks: Vec<(&str, &str)> = a
            .iter()
            .map(|e| (e.volid.as_str(), e.mark.unwrap()))
            .collect();
        assert_eq!(marks, [("a", "remove"), ("b", "keep"), ("c", "keep")]);
        assert!(parse_keep("keep-foo=1").is_err());
        assert!(parse_keep("keep-all=1,keep-last=2").is_err());
        assert_eq!(parse_keep("keep-last=0").unwrap().counts["keep-last"], 0);
    }

    #[test]
    fn appliance_fields_follow_the_name() {
        let a = appliance("system", "debian-12-standard_12.7-1_amd64.tar.zst");
        assert_eq!(
            (
                a["package"].as_str(),
                a["version"].as_str(),
                a["os"].as_str(),
                a["type"].as_str()
            ),
            (
                Some("debian-12-standard"),
                Some("12.7-1"),
                Some("debian-12"),
                Some("lxc")
            )
        );
        assert_eq!(
            a["location"],
            "http://download.proxmox.com/images/system/debian-12-standard_12.7-1_amd64.tar.zst"
        );
        assert!(checksum_mismatches(&"0".repeat(64)) && checksum_mismatches("bad"));
        assert!(!checksum_mismatches(&"ab".repeat(32)));
    }
}
