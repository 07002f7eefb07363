//! The cluster's storage configuration: `pvesh create /storage` and `pvesh set
//! /storage/{storage}` for the plugin types the simulator models (`dir`, `lvmthin`, `zfspool`,
//! `nfs`; `pbs` and the rest are refused as the simulator cannot act on them). Removing one is
//! [`crate::storage_ops::delete_storage`].
//!
//! `pvesh get /storage` is [`index`]. All three are pve-storage `src/PVE/API2/Storage/Config.pm` `create` and `update` [SRC, find_string
//! index id 12024645782]: they run under the storage-config lock, whose errors read
//! `create storage failed: …` and `update storage failed: …` (exit 255), and return
//! `{"storage": ID, "type": TYPE}` (FORMATS.md §2.15).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::Failure;
use crate::args::{Param, Parsed, Ty, p};
use crate::state::{State, Storage};

/// The types `POST /storage` takes (its `type` enum in PVE 9.1.11 and 9.2).
pub const TYPES: &[&str] = &[
    "btrfs",
    "cephfs",
    "cifs",
    "dir",
    "esxi",
    "iscsi",
    "iscsidirect",
    "lvm",
    "lvmthin",
    "nfs",
    "pbs",
    "rbd",
    "zfs",
    "zfspool",
];

/// The options of `POST /storage` the simulator reads (a subset of the schema's: an option it
/// does not know is refused like one PVE does not know).
pub const CREATE_OPTS: [Param; 13] = [
    p("storage", Ty::StorageId),
    p("type", Ty::Enum(TYPES)),
    p("path", Ty::Str),
    p("content", Ty::Str),
    p("is_mountpoint", Ty::Str),
    p("vgname", Ty::Str),
    p("thinpool", Ty::Str),
    p("pool", Ty::Str),
    p("server", Ty::Str),
    p("export", Ty::Str),
    p("options", Ty::Str),
    p("disable", Ty::Bool),
    p("shared", Ty::Bool),
];

/// The options of `PUT /storage/{storage}` the simulator reads.
pub const SET_OPTS: [Param; 3] = [
    p("content", Ty::Str),
    p("is_mountpoint", Ty::Str),
    p("disable", Ty::Bool),
];

/// The options each simulated type requires and takes besides `content`, `disable`, `shared`
/// (its plugin's `options`, fixed and not optional ones first) and the content types it may
/// hold (its `plugindata`) [SRC pve-storage src/PVE/Storage/{Dir,LvmThin,ZFSPool,NFS}Plugin.pm].
fn plugin(
    kind: &str,
) -> Option<(
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
)> {
    Some(match kind {
        "dir" => (
            &["path"],
            &["is_mountpoint"],
            &[
                "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
            ],
        ),
        "lvmthin" => (&["vgname", "thinpool"], &[], &["images", "rootdir"]),
        "zfspool" => (&["pool"], &[], &["images", "rootdir"]),
        "nfs" => (
            &["server", "export"],
            &["options"],
            &[
                "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
            ],
        ),
        _ => return None,
    })
}

/// The size the simulator gives a new storage: a directory shares the root file system's
/// size; the others are a fixed 500 GiB, empty.
fn new_size(st: &State, kind: &str) -> u64 {
    match kind {
        "dir" => st
            .node(&st.local_node)
            .map_or(100_861_726_720, |n| n.maxdisk),
        _ => 536_870_912_000,
    }
}

/// The content list of `content` checked against what the type holds, sorted (storage.cfg
/// keeps a set): `PVE::Storage::Plugin::check_config` → `content` `verify_content` dies with
/// `content type 'x' is not allowed` [INFER wording].
fn content_list(kind: &str, content: &str, allowed: &[&str]) -> Result<Vec<String>, Failure> {
    let mut out: Vec<String> = Vec::new();
    for c in content.split([',', ';', ' ']).filter(|c| !c.is_empty()) {
        if !allowed.contains(&c) {
            return Err(param_exc(
                "content",
                &format!("storage type '{kind}' does not support content type '{c}'"),
            ));
        }
        if !out.iter().any(|x| x == c) {
            out.push(c.to_string());
        }
    }
    out.sort();
    Ok(out)
}

fn param_exc(key: &str, msg: &str) -> Failure {
    Failure::die(format!(
        "400 Parameter verification failed.\n{key}: {msg}\n"
    ))
}

/// `pvesh get /storage [--type T]`: each storage's storage.cfg entry (pve-storage
/// `PVE/API2/Storage/Config.pm` `index` and `$api_storage_config` [SRC, find_string index id
/// 427116387]: the section's options, `storage` set to its id, `digest` the file's, `content`
/// encoded as a comma list). `path` is there for the file-based types (an NFS storage's is its
/// mount point, `/mnt/pve/ID`); `shared` and `disable` appear as `1` only when set.
pub fn index(st: &State, kind: Option<&str>) -> Value {
    let digest = format!("{:040x}", st.storages.len() as u64 * 0x9e37_79b9);
    let entries = st
        .storages
        .iter()
        .filter(|s| kind.is_none_or(|k| s.kind == k))
        .map(|s| {
            let mut e = serde_json::Map::new();
            e.insert("storage".into(), json!(s.id));
            e.insert("type".into(), json!(s.kind));
            e.insert("content".into(), json!(s.content.join(",")));
            e.insert("digest".into(), json!(digest));
            if let Some(path) = &s.path {
                e.insert("path".into(), json!(path));
            }
            if s.shared {
                e.insert("shared".into(), json!(1));
            }
            if s.disable {
                e.insert("disable".into(), json!(1));
            }
            for (k, v) in &s.options {
                e.insert(k.clone(), json!(v));
            }
            Value::Object(e)
        })
        .collect();
    Value::Array(entries)
}

/// `pvesh get /storage/ID`: one storage's configuration, as in the index (PVE
/// `API2/Storage/Config.pm` `read`: `storage_config` dies `storage 'ID' does not exist`).
/// pxagent's helper reads it to find an ISO storage's directory.
pub fn read(st: &State, sid: &str) -> Result<Value, Failure> {
    index(st, None)
        .as_array()
        .and_then(|all| all.iter().find(|e| e["storage"] == sid).cloned())
        .ok_or_else(|| Failure::die(format!("storage '{sid}' does not exist")))
}

/// `pvesh create /storage --storage ID --type T …`: the new storage on every node, active at
/// once (an NFS export is taken as mounted; a directory marked `is_mountpoint` is offline, as
/// nothing is mounted there).
pub fn create(st: &mut State, o: &Parsed) -> Result<Value, Failure> {
    let sid = o.get("storage").unwrap_or_default().to_string();
    let kind = o.get("type").unwrap_or_default().to_string();
    let Some((required, optional, allowed)) = plugin(&kind) else {
        return Err(Failure::die(format!(
            "pve-sim: storage type '{kind}' is not simulated"
        )));
    };
    for key in required {
        if o.get(key).is_none() {
            return Err(param_exc(key, "property is missing and it is not optional"));
        }
    }
    let known = |k: &str| {
        ["storage", "type", "content", "disable", "shared"].contains(&k)
            || required.contains(&k)
            || optional.contains(&k)
    };
    if let Some(k) = o.opts.keys().find(|k| !known(k) && !is_output_opt(k)) {
        // SectionConfig `check_config` refuses an option of another type's plugin [INFER
        // wording].
        return Err(param_exc(
            k,
            &format!("unexpected property (storage type '{kind}' has no such option)"),
        ));
    }
    if let Some(path) = o.get("path").filter(|p| !p.starts_with('/')) {
        return Err(param_exc(
            "path",
            &format!("invalid format - value does not look like a valid absolute path ({path})"),
        ));
    }
    // Without `content` a type gets its plugin's default: images and rootdir for these.
    let content = match o.get("content") {
        Some(c) => content_list(&kind, c, allowed)?,
        None => vec!["images".into(), "rootdir".into()],
    };
    if st.storage(&sid).is_some() {
        return Err(Failure::die(format!(
            "create storage failed: storage ID '{sid}' already defined"
        )));
    }
    let mut options = BTreeMap::new();
    for key in required.iter().chain(optional).filter(|k| **k != "path") {
        if let Some(v) = o.get(key) {
            options.insert((*key).to_string(), v.to_string());
        }
    }
    let total = new_size(st, &kind);
    if kind == "nfs" {
        let files = share(&sid, o.get("export").unwrap_or_default(), &st.local_node);
        st.volumes.extend(files);
    }
    st.storages.push(Storage {
        id: sid.clone(),
        kind: kind.clone(),
        content,
        shared: o.flag("shared") || kind == "nfs",
        path: match kind.as_str() {
            "dir" => o.get("path").map(str::to_string),
            // NFSPlugin mounts the export at /mnt/pve/<storage> (its `path` default).
            "nfs" => Some(format!("/mnt/pve/{sid}")),
            _ => None,
        },
        total,
        base_used: 0,
        disable: o.flag("disable"),
        options,
    });
    Ok(json!({"storage": sid, "type": kind}))
}

/// The export the simulator's NFS servers offer with files that root-run Proxmox code must
/// not trust: whoever runs a server writes its files.
pub const HOSTILE_EXPORT: &str = "/export/hostile";

/// What an export holds once mounted as storage `sid` (the simulator does not mount; every
/// server's export is empty but [`HOSTILE_EXPORT`], which holds what the share's owner would
/// plant for root):
/// - `backup/vzdump-qemu-950-2026_01_01-00_00_00.vma.zst`, an archive whose guest
///   configuration carries an `args:` line (a 9p share of the host's `/`) and the host's disk
///   `scsi1: /dev/sda,backup=0`: a restore brings both back (qmrestore restores the archive's
///   `qemu-server.conf` as it is);
/// - `import/host-disk.raw`, a symbolic link to `/dev/sda`: an import reads the host's disk
///   through it unless the share is mounted `nosymfollow`;
/// - `import/layered.qcow2`, a qcow2 image whose backing file is `/dev/sda`: Proxmox refuses
///   to import it (an import volume is untrusted: [`crate::provision`]).
pub fn share(sid: &str, export: &str, node: &str) -> Vec<crate::state::Volume> {
    // 2026-01-01 00:00:00 UTC, the time the archive's name carries.
    const PLANTED: i64 = 1_767_225_600;
    if export != HOSTILE_EXPORT {
        return Vec::new();
    }
    let mut config = BTreeMap::new();
    for (k, v) in [
        ("name", "hostile"),
        ("ostype", "l26"),
        ("scsihw", "virtio-scsi-single"),
        ("scsi0", "local-lvm:vm-950-disk-0,size=1G"),
        ("scsi1", "/dev/sda,backup=0"),
        (
            "args",
            "-fsdev local,id=host,path=/,security_model=passthrough -device virtio-9p-pci,fsdev=host,mount_tag=host",
        ),
    ] {
        config.insert(k.to_string(), json!(v));
    }
    config.insert("memory".into(), json!(512));
    config.insert("cores".into(), json!(1));
    let file = |volname: &str, content: &str, format: &str, size: u64| {
        crate::state::Volume::file(node, sid, volname, content, format, size, PLANTED)
    };
    let mut archive = file(
        "backup/vzdump-qemu-950-2026_01_01-00_00_00.vma.zst",
        "backup",
        "vma.zst",
        12_582_912,
    );
    archive.vmid = Some(950);
    archive.subtype = Some("qemu".into());
    archive.guest_config = Some(config);
    archive.disk_size = Some(1 << 30);
    let mut link = file("import/host-disk.raw", "import", "raw", 8_589_934_592);
    link.link = Some("/dev/sda".into());
    let mut layered = file("import/layered.qcow2", "import", "qcow2", 8_589_934_592);
    layered.backing = Some("/dev/sda".into());
    vec![archive, link, layered]
}

/// `pvesh set /storage/{storage} [--content …] [--is_mountpoint …] [--disable 0|1]`.
pub fn set(st: &mut State, sid: &str, o: &Parsed) -> Result<Value, Failure> {
    let Some(idx) = st.storages.iter().position(|s| s.id == sid) else {
        return Err(Failure::die(format!(
            "update storage failed: storage '{sid}' does not exist"
        )));
    };
    let kind = st.storages[idx].kind.clone();
    if o.get("is_mountpoint").is_some() && !matches!(kind.as_str(), "dir" | "btrfs") {
        return Err(param_exc(
            "is_mountpoint",
            &format!("unexpected property (storage type '{kind}' has no such option)"),
        ));
    }
    let content = match (o.get("content"), plugin(&kind)) {
        (Some(c), Some((_, _, allowed))) => Some(content_list(&kind, c, allowed)?),
        (Some(_), None) => {
            return Err(Failure::die(format!(
                "pve-sim: changing the content of a '{kind}' storage is not simulated"
            )));
        }
        (None, _) => None,
    };
    let s = &mut st.storages[idx];
    if let Some(c) = content {
        s.content = c;
    }
    if let Some(m) = o.get("is_mountpoint") {
        s.options.insert("is_mountpoint".into(), m.to_string());
    }
    if o.get("disable").is_some() {
        s.disable = o.flag("disable");
    }
    Ok(json!({"storage": sid, "type": kind}))
}

fn is_output_opt(k: &str) -> bool {
    [
        "output-format",
        "quiet",
        "noborder",
        "noheader",
        "human-readable",
    ]
    .contains(&k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    fn parsed(pairs: &[(&str, &str)]) -> Parsed {
        Parsed::of(pairs)
    }

    #[test]
    fn create_set_and_their_errors() {
        let mut st = initial(1_790_000_000);
        let v = create(
            &mut st,
            &parsed(&[
                ("storage", "store1"),
                ("type", "dir"),
                ("path", "/mnt/store1"),
                ("content", "iso,backup"),
            ]),
        )
        .unwrap();
        assert_eq!(v, json!({"storage": "store1", "type": "dir"}));
        let s = st.storage("store1").unwrap();
        assert_eq!(
            (s.content.clone(), s.path.as_deref(), s.active()),
            (
                vec!["backup".into(), "iso".into()],
                Some("/mnt/store1"),
                true
            )
        );
        let again = create(
            &mut st,
            &parsed(&[("storage", "store1"), ("type", "dir"), ("path", "/mnt/x")]),
        )
        .unwrap_err();
        assert_eq!(
            again.msg,
            "create storage failed: storage ID 'store1' already defined"
        );
        let e = create(
            &mut st,
            &parsed(&[("storage", "t1"), ("type", "lvmthin"), ("vgname", "pve")]),
        )
        .unwrap_err();
        assert!(e.msg.contains("thinpool: property is missing"), "{}", e.msg);
        let e = create(
            &mut st,
            &parsed(&[
                ("storage", "z1"),
                ("type", "zfspool"),
                ("pool", "tank"),
                ("content", "iso"),
            ]),
        )
        .unwrap_err();
        assert!(
            e.msg.contains("does not support content type 'iso'"),
            "{}",
            e.msg
        );
        assert!(create(&mut st, &parsed(&[("storage", "b1"), ("type", "pbs")])).is_err());
        set(&mut st, "store1", &parsed(&[("is_mountpoint", "yes")])).unwrap();
        assert!(!st.storage("store1").unwrap().active());
        set(&mut st, "local", &parsed(&[("disable", "1")])).unwrap();
        assert!(st.storage("local").unwrap().disable);
        let e = set(&mut st, "nosuch", &parsed(&[("disable", "0")])).unwrap_err();
        assert_eq!(
            e.msg,
            "update storage failed: storage 'nosuch' does not exist"
        );
        let e = set(&mut st, "local-lvm", &parsed(&[("is_mountpoint", "yes")])).unwrap_err();
        assert!(e.msg.contains("is_mountpoint"), "{}", e.msg);
    }

    #[test]
    fn the_index_carries_each_entry_with_its_path_and_options() {
        let mut st = initial(1_790_000_000);
        create(
            &mut st,
            &parsed(&[
                ("storage", "n1"),
                ("type", "nfs"),
                ("server", "nas"),
                ("export", "/export/pve"),
                ("options", "nosuid,nodev,noexec,nosymfollow"),
                ("content", "iso"),
            ]),
        )
        .unwrap();
        let all = index(&st, None);
        let entry = |id: &str| all.as_array().unwrap().iter().find(|e| e["storage"] == id);
        let local = entry("local").unwrap();
        assert_eq!(
            (&local["type"], &local["path"]),
            (&json!("dir"), &json!("/var/lib/vz"))
        );
        assert!(
            local["content"]
                .as_str()
                .unwrap()
                .split(',')
                .any(|c| c == "iso")
        );
        assert_eq!(local["digest"].as_str().unwrap().len(), 40);
        let n1 = entry("n1").unwrap();
        assert_eq!(
            (&n1["path"], &n1["server"], &n1["export"], &n1["shared"]),
            (
                &json!("/mnt/pve/n1"),
                &json!("nas"),
                &json!("/export/pve"),
                &json!(1)
            )
        );
        assert!(entry("local-lvm").unwrap().get("path").is_none());
        let nfs = index(&st, Some("nfs"));
        assert_eq!(nfs.as_array().unwrap().len(), 1);
    }
}
