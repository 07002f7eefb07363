//! Host observation and storage pools, live on the sandbox host and against real
//! sudo: `node disks|smart|journal|services|service|updates`, the free space of `node status`
//! and `storage list`, `storage add-dir|add-lvmthin|add-zfspool|add-nfs|set|enable|disable`, and
//! backups to the simulator's PBS storage `pbs1`. Like `newops.rs` these FAIL (never skip)
//! without the bed's `PXAGENT_*` variables; the sudoers tests need root and sudo like
//! `sudo_rules.rs`, whose helpers they use.
//!
//! Every test holds the host [`lock`] and removes the storages it added (each under a fresh id),
//! so the order of tests does not matter. A backup written to `pbs1` stays: pxagent has no op
//! that removes a PBS snapshot, and nothing else reads that storage.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::sudo_rules::{Installed, allowed, render, samples, w};
use crate::support::{Home, assert_not_sent, fresh, lock, px, sim_get, sudo_log_len};
use pxagent::catalog::{Op, ops};

fn ok(r: &crate::support::Run) -> Value {
    assert_eq!(r.code, 0, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    r.json()["data"].clone()
}

/// The entry of storage `id` in the simulator's list of pve1's storages.
fn storage_entry(id: &str) -> Option<Value> {
    sim_get("/nodes/pve1/storage", &[])
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["storage"] == id)
        .cloned()
}

/// Remove storage `id` through pxagent (its confirm phrase given) and check it is gone.
fn remove(home: &Home, id: &str) {
    let phrase = format!("yes remove {id}");
    let r = home.on_bed(&["storage", "remove", id, "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(storage_entry(id).is_none(), "{id} is still listed");
}

#[test]
fn host_observation_reads_show_what_the_host_holds() {
    let _g = lock();
    let home = Home::new();
    // Disks: the host's own list, shown by serial first, with the device path.
    let disks = ok(&home.on_bed(&["node", "disks", "pve1", "-o", "json"]));
    // The host's own list, its field names in pxagent's one case style (`osdid-list` → `osdid_list`).
    assert_eq!(
        disks,
        pxagent::views::snake_keys(sim_get("/nodes/pve1/disks/list", &[]))
    );
    assert!(disks[0].get("osdid_list").is_some(), "{disks}");
    let first = &disks[0];
    let table = home.on_bed(&["node", "disks", "pve1"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let header = table.stdout.lines().next().unwrap();
    assert!(
        header.starts_with("SERIAL") && header.contains("HEALTH") && header.contains("DEVICE"),
        "{header}"
    );
    assert!(
        table.stdout.contains(first["serial"].as_str().unwrap()),
        "{}",
        table.stdout
    );
    // SMART of each whole disk the list names.
    for d in disks.as_array().unwrap() {
        let dev = d["devpath"].as_str().unwrap();
        let smart = ok(&home.on_bed(&["node", "smart", "pve1", dev, "-o", "json"]));
        assert_eq!(smart["health"], "PASSED", "{dev}: {smart}");
    }
    // A partition, a by-id link or anything but a whole disk: exit 2, nothing sent.
    let at = sudo_log_len();
    for bad in [
        "/dev/sda1",
        "/dev/nvme0n1p1",
        "/dev/disk/by-id/ata-x",
        "/dev/../etc/shadow",
        "sda",
    ] {
        let r = home.on_bed(&["node", "smart", "pve1", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
    }
    assert_not_sent(at, &["/disks/smart"]);

    // The journal: the last lines, or a range.
    let last = ok(&home.on_bed(&["node", "journal", "pve1", "--lines", "5", "-o", "json"]));
    assert_eq!(last.as_array().unwrap().len(), 5, "{last}");
    let all = sim_get("/nodes/pve1/journal", &["--lastentries", "5"]);
    assert_eq!(last, all);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let since = (now - 3600).to_string();
    let range = ok(&home.on_bed(&["node", "journal", "pve1", "--since", &since, "-o", "json"]));
    let n = range.as_array().unwrap().len();
    assert!((5..=7).contains(&n), "one line every ten minutes: {range}");
    let text = home.on_bed(&["node", "journal", "pve1", "--lines", "2"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert_eq!(text.stdout.lines().count(), 2, "{}", text.stdout);
    // A date is sent as its seconds.
    let at = sudo_log_len();
    let r = home.on_bed(&[
        "node",
        "journal",
        "pve1",
        "--since",
        "2026-01-01",
        "--lines",
        "1",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sent = crate::support::sudo_commands_since(at);
    assert!(
        sent.iter().any(|c| c.contains("--since 1767225600")),
        "{sent:?}"
    );
    for bad in ["yesterday", "-5", "1 2"] {
        assert_eq!(
            home.on_bed(&["node", "journal", "pve1", "--since", bad])
                .code,
            2,
            "{bad}"
        );
    }

    // Services and one service's state; an unknown name is refused before sending.
    let services = ok(&home.on_bed(&["node", "services", "pve1", "-o", "json"]));
    assert!(
        services
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "pveproxy" && s["state"] == "running"),
        "{services}"
    );
    let one = ok(&home.on_bed(&["node", "service", "pve1", "pveproxy", "-o", "json"]));
    assert_eq!(
        (&one["active_state"], &one["unit_state"]),
        (&Value::from("active"), &Value::from("enabled"))
    );
    assert_eq!(home.on_bed(&["node", "service", "pve1", "nginx"]).code, 2);

    // Pending updates: a read of the last `apt update`, nothing refreshed.
    let at = sudo_log_len();
    let updates = ok(&home.on_bed(&["node", "updates", "pve1", "-o", "json"]));
    assert!(
        updates
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["package"] == "pve-manager" && u["old_version"].is_string()),
        "{updates}"
    );
    let sent = crate::support::sudo_commands_since(at);
    assert!(
        sent.iter().all(|c| !c.contains(" create ")),
        "only a GET: {sent:?}"
    );

    // Free space: the root fs in `node status`, each storage in `storage list`.
    let status = home.on_bed(&["node", "status", "pve1"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let rootfs = status
        .stdout
        .lines()
        .find(|l| l.starts_with("root fs"))
        .unwrap_or_else(|| panic!("{}", status.stdout));
    assert!(rootfs.ends_with(" free"), "{rootfs}");
    let list = home.on_bed(&["storage", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let header = list.stdout.lines().next().unwrap();
    assert!(header.trim_end().ends_with("FREE"), "{header}");
    let local = list
        .stdout
        .lines()
        .find(|l| l.starts_with("local "))
        .unwrap();
    assert!(local.trim_end().ends_with("GiB"), "{local}");
}

#[test]
fn directory_storages_are_added_marked_disabled_enabled_and_removed() {
    let _g = lock();
    let home = Home::new();
    let id = fresh("dir");
    let path = format!("/mnt/{id}");
    let r = home.on_bed(&[
        "storage",
        "add-dir",
        &id,
        "--path",
        &path,
        "--content",
        "iso,backup",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let e = storage_entry(&id).expect("the new storage is listed");
    assert_eq!(
        (&e["type"], &e["content"], &e["active"]),
        (
            &Value::from("dir"),
            &Value::from("backup,iso"),
            &Value::from(1)
        )
    );
    // pxagent's own list shows it with its free space.
    let mine = ok(&home.on_bed(&["storage", "list", "-o", "json"]));
    let entry = mine
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["storage"] == id.as_str())
        .unwrap();
    assert!(entry["avail"].as_u64().unwrap() > 0, "{entry}");
    // The same id again (at a path of its own): Proxmox's refusal comes back (exit 1).
    let again = home.on_bed(&[
        "storage",
        "add-dir",
        &id,
        "--path",
        &format!("{path}b"),
        "--content",
        "iso",
    ]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("already defined"), "{}", again.stderr);

    // An external mount point with nothing mounted is offline, so marking one is a disable:
    // its phrase first, nothing sent without it; `no` brings it back.
    let at = sudo_log_len();
    let r = home.on_bed(&[
        "storage",
        "set",
        &id,
        "--is-mountpoint",
        "yes",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 4, "{}", r.stdout);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["error"]["phrase"], format!("yes disable {id}"));
    assert_eq!(sudo_log_len(), at, "nothing may be sent without the phrase");
    assert_eq!(storage_entry(&id).unwrap()["active"], 1);
    let phrase = format!("yes disable {id}");
    let r = home.on_bed(&[
        "storage",
        "set",
        &id,
        "--is-mountpoint",
        "yes",
        "--confirm",
        &phrase,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(storage_entry(&id).unwrap()["active"], 0);
    assert_eq!(
        home.on_bed(&["storage", "set", &id, "--is-mountpoint", "no"])
            .code,
        0
    );
    assert_eq!(storage_entry(&id).unwrap()["active"], 1);

    // Disabling needs its phrase; enabling does not.
    let r = home.on_bed(&["storage", "disable", &id]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("yes disable {id}")),
        "{}",
        r.stderr
    );
    assert_eq!(storage_entry(&id).unwrap()["enabled"], 1);
    let phrase = format!("yes disable {id}");
    let r = home.on_bed(&["storage", "disable", &id, "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        (
            &storage_entry(&id).unwrap()["enabled"],
            &storage_entry(&id).unwrap()["active"]
        ),
        (&Value::from(0), &Value::from(0))
    );
    assert_eq!(home.on_bed(&["storage", "enable", &id]).code, 0);
    assert_eq!(storage_entry(&id).unwrap()["enabled"], 1);
    remove(&home, &id);

    // Paths and contents the client refuses: exit 2, nothing sent.
    let at = sudo_log_len();
    for (p, content) in [
        ("/", "iso"),
        ("/etc", "iso"),
        ("/etc/pve/x", "iso"),
        ("/root/x", "iso"),
        ("/var/lib/vz/x", "iso"),
        ("/mnt", "iso"),
        ("/mnt/../etc", "iso"),
        ("/mnt/./x", "iso"),
        ("/mnt//x", "iso"),
        ("/mnt/x/", "iso"),
        ("mnt/x", "iso"),
        ("/mnt/ok", "snippets"),
        ("/mnt/ok", "iso,snippets"),
        ("/mnt/ok", "iso,iso"),
    ] {
        let r = home.on_bed(&[
            "storage",
            "add-dir",
            "bad1",
            "--path",
            p,
            "--content",
            content,
        ]);
        assert_eq!(r.code, 2, "{p} {content}: {}", r.stderr);
    }
    assert_not_sent(at, &["/storage"]);
}

/// A directory storage lies neither inside, at, nor above another storage's path
/// (where one storage's files would be read as another's). The client reads the storage
/// configuration (`GET /storage`) first and refuses with exit 2, naming the storage; nothing
/// is created. A sibling whose name only starts the same is apart.
#[test]
fn directory_storages_lie_apart_from_every_storage_path() {
    let _g = lock();
    let home = Home::new();
    let id = fresh("apart");
    let base = format!("/srv/{id}");
    let add = |sid: &str, path: &str| {
        home.on_bed(&[
            "storage",
            "add-dir",
            sid,
            "--path",
            path,
            "--content",
            "iso",
            "-o",
            "json",
        ])
    };
    assert_eq!(add(&id, &format!("{base}/pve")).code, 0);
    let at = sudo_log_len();
    for path in [
        format!("{base}/pve/iso"),
        format!("{base}/pve"),
        base.clone(),
    ] {
        let r = add(&fresh("apart"), &path);
        assert_eq!(r.code, 2, "{path}: {}", r.stdout);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            msg.contains(&format!("overlaps storage {id}")) && msg.contains(&format!("{base}/pve")),
            "{msg}"
        );
    }
    assert_not_sent(at, &["create /storage"]);
    // The storage configuration was read: the refusal rests on what the host holds.
    assert!(
        crate::support::sudo_commands_since(at)
            .iter()
            .any(|c| c.ends_with("get /storage --output-format json")),
        "no configuration read"
    );
    let sibling = fresh("apart");
    assert_eq!(add(&sibling, &format!("{base}/pve2")).code, 0);
    remove(&home, &sibling);
    remove(&home, &id);
}

/// Destroy VM `vmid` through pxagent (its phrase given).
fn destroy(home: &Home, vmid: &str) {
    let phrase = format!("yes destroy {vmid}");
    let r = home.on_bed(&["vm", "destroy", vmid, "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// A share whose owner planted an archive with an `args:` line and the host's disk,
/// and a symlink to `/dev/sda` (the simulator's `/export/hostile`). Added by hand on a server no
/// policy names, it is never trusted where a policy names its NFS servers: restore, import,
/// backup and download refuse it before anything is sent (exit 3). Without such a list the
/// admin's storages are trusted, and the simulator shows what root would then take: the
/// restore brings back the `args:` line and the host disk, and the import reads `/dev/sda`.
/// The same export added by pxagent on a named server is mounted `nosymfollow`, so the planted
/// link cannot be followed, and Proxmox itself refuses its image with a backing file.
#[test]
fn a_share_on_a_server_the_admin_did_not_name_is_never_trusted() {
    let _g = lock();
    let home = Home::new();
    let sid = fresh("hostile");
    crate::support::add_hostile_share(&sid, "backup,import,iso");
    home.write("named.yaml", b"nfs_servers: [nas]\n");
    let archive = format!("{sid}:backup/vzdump-qemu-950-2026_01_01-00_00_00.vma.zst");
    let link = format!("{sid}:import/host-disk.raw");
    let at = sudo_log_len();
    let attempts: [&[&str]; 4] = [
        &["backup", "restore", &archive, "--vmid", "950"],
        &[
            "vm", "create", "--vmid", "951", "--name", "x", "--image", &link,
        ],
        &["backup", "create", "100", "--storage", &sid],
        &[
            "iso",
            "download",
            "https://example.org/a.iso",
            "--storage",
            &sid,
        ],
    ];
    for args in attempts {
        let mut argv = vec!["--policy", "named.yaml", "-o", "json"];
        argv.extend_from_slice(args);
        let r = home.on_bed(&argv);
        assert_eq!(r.code, 3, "{args:?}: {}", r.stdout);
        let e = &r.json()["error"];
        assert_eq!(e["kind"], "policy_refused", "{e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("storage {sid} is an NFS storage on 198.51.100.66")),
            "{e}"
        );
    }
    assert_not_sent(at, &["/qemu ", "vzdump", "download-url"]);

    // Control: no list, so the storage is the admin's; this is what root takes from it.
    let r = home.on_bed(&["backup", "restore", &archive, "--vmid", "950", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let config = sim_get("/nodes/pve1/qemu/950/config", &[]);
    assert!(
        config["args"].as_str().unwrap().contains("path=/"),
        "{config}"
    );
    assert!(
        config["scsi1"].as_str().unwrap().starts_with("/dev/sda"),
        "{config}"
    );
    destroy(&home, "950");
    let r = home.on_bed(&[
        "vm", "create", "--vmid", "951", "--name", "x", "--image", &link, "-o", "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let upid = r.json()["data"]["upid"].as_str().unwrap().to_string();
    let log = home.on_bed(&["task", "log", &upid]);
    assert!(
        log.stdout.contains("symbolic link to /dev/sda"),
        "{}",
        log.stdout
    );
    destroy(&home, "951");

    // pxagent's own NFS storage on a named server: mounted nosymfollow, the link fails.
    let named = fresh("named");
    let r = home.on_bed(&[
        "storage",
        "add-nfs",
        &named,
        "--server",
        "nas",
        "--export",
        "/export/hostile",
        "--content",
        "import",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let create_952 = |image: &str| {
        home.on_bed(&[
            "vm",
            "create",
            "--vmid",
            "952",
            "--name",
            "y",
            "--image",
            &format!("{named}:import/{image}"),
            "-o",
            "json",
        ])
    };
    let r = create_952("host-disk.raw");
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("Too many levels of symbolic links"),
        "{}",
        r.stdout
    );
    // An image whose backing file is the host's disk: Proxmox takes an import volume as
    // untrusted and refuses it.
    let r = create_952("layered.qcow2");
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("backing file not allowed"),
        "{}",
        r.stdout
    );
    assert!(
        sim_get("/cluster/resources", &[])
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["vmid"] != 952)
    );
    remove(&home, &named);
    remove(&home, &sid);
}

#[test]
fn lvmthin_zfs_and_nfs_storages_are_added_and_removed() {
    let _g = lock();
    let home = Home::new();
    let thin = fresh("thin");
    let r = home.on_bed(&[
        "storage",
        "add-lvmthin",
        &thin,
        "--vgname",
        "vg2",
        "--thinpool",
        "data",
        "--content",
        "images,rootdir",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(storage_entry(&thin).unwrap()["type"], "lvmthin");
    // LVM-thin holds guest disks only: Proxmox refuses ISOs there.
    let r = home.on_bed(&[
        "storage",
        "add-lvmthin",
        &fresh("thin"),
        "--vgname",
        "vg2",
        "--thinpool",
        "data",
        "--content",
        "iso",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("content type 'iso'"), "{}", r.stderr);
    remove(&home, &thin);

    let zfs = fresh("zfs");
    let r = home.on_bed(&["storage", "add-zfspool", &zfs, "--pool", "tank/pve"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let e = storage_entry(&zfs).unwrap();
    assert_eq!(
        (&e["type"], &e["content"]),
        (&Value::from("zfspool"), &Value::from("images,rootdir"))
    );
    remove(&home, &zfs);

    let nfs = fresh("nfs");
    let r = home.on_bed(&[
        "storage",
        "add-nfs",
        &nfs,
        "--server",
        "192.0.2.30",
        "--export",
        "/export/pve",
        "--content",
        "backup,iso",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let e = storage_entry(&nfs).unwrap();
    assert_eq!(
        (&e["type"], &e["shared"]),
        (&Value::from("nfs"), &Value::from(1))
    );
    // An NFS storage is shared: every node lists it.
    assert!(
        sim_get("/nodes/pve2/storage", &[])
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["storage"] == nfs.as_str())
    );
    remove(&home, &nfs);

    let at = sudo_log_len();
    for bad in [
        &[
            "storage",
            "add-lvmthin",
            "t1",
            "--vgname",
            "-vg",
            "--thinpool",
            "data",
        ][..],
        &["storage", "add-lvmthin", "t1", "--vgname", "vg2"],
        &["storage", "add-zfspool", "z1", "--pool", "/tank"],
        &["storage", "add-zfspool", "z1", "--pool", "tank/../x"],
        &[
            "storage", "add-nfs", "n1", "--server", "-x", "--export", "/e",
        ],
        &[
            "storage", "add-nfs", "n1", "--server", "nas", "--export", "/e/../f",
        ],
        &[
            "storage", "add-nfs", "n1", "--server", "nas", "--export", "e",
        ],
        &[
            "storage",
            "add-nfs",
            "n1",
            "--server",
            "nas",
            "--export",
            "/e",
            "--options",
            "vers=3",
        ],
        &[
            "storage",
            "add-nfs",
            "n1",
            "--server",
            "nas",
            "--export",
            "/e",
            "--content",
            "snippets",
        ],
        &["storage", "set", "local", "--is-mountpoint", "/etc"],
    ] {
        let r = home.on_bed(bad);
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stderr);
    }
    assert_not_sent(at, &["/storage"]);
}

#[test]
fn backups_go_to_and_list_from_the_pbs_storage() {
    let _g = lock();
    let home = Home::new();
    let pbs = storage_entry("pbs1").expect("the simulator has a PBS storage");
    assert_eq!(
        (&pbs["type"], &pbs["content"], &pbs["shared"]),
        (&Value::from("pbs"), &Value::from("backup"), &Value::from(1))
    );
    let r = home.on_bed(&["backup", "create", "100", "--storage", "pbs1", "-o", "json"]);
    let data = ok(&r);
    let archive = data["archive"].as_str().unwrap_or_else(|| panic!("{data}"));
    assert!(archive.starts_with("pbs1:backup/vm/100/"), "{archive}");
    assert!(archive.ends_with('Z'), "{archive}");
    let list = ok(&home.on_bed(&["backup", "list", "--storage", "pbs1", "-o", "json"]));
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|b| b["volid"] == archive),
        "{list}"
    );
    let filtered = ok(&home.on_bed(&[
        "backup",
        "list",
        "--storage",
        "pbs1",
        "--vmid",
        "100",
        "-o",
        "json",
    ]));
    assert!(
        filtered
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["vmid"] == 100),
        "{filtered}"
    );
}

// --- real sudo ------------------------------------------------------------------------------

/// The argv pxagent builds for `op` with these values (node `pve1`).
fn argv(op: &Op, values: &[(&'static str, &str)]) -> Vec<String> {
    let mut v: BTreeMap<&'static str, String> = values
        .iter()
        .map(|(k, val)| (*k, val.to_string()))
        .collect();
    v.insert("node", "pve1".into());
    op.argv(&v)
}

/// `pvesh create /storage --storage s1 --type dir --path PATH --content CONTENT …`.
fn add_dir(path: &str, content: &str) -> Vec<String> {
    argv(
        &ops::STORAGE_ADD_DIR,
        &[("storage", "s1"), ("path", path), ("content", content)],
    )
}

/// `line` with `extra` words before its closing `--output-format json`.
fn with(line: &[String], extra: &[&str]) -> Vec<String> {
    let mut v = line[..line.len() - 2].to_vec();
    v.extend(extra.iter().map(|s| s.to_string()));
    v.extend(["--output-format".to_string(), "json".to_string()]);
    v
}

const NEW_OPS: [&Op; 13] = [
    &ops::NODE_DISKS,
    &ops::NODE_SMART,
    &ops::NODE_JOURNAL,
    &ops::NODE_SERVICES,
    &ops::NODE_SERVICE,
    &ops::NODE_UPDATES,
    &ops::STORAGE_ADD_DIR,
    &ops::STORAGE_ADD_LVMTHIN,
    &ops::STORAGE_ADD_ZFSPOOL,
    &ops::STORAGE_ADD_NFS,
    &ops::STORAGE_SET,
    &ops::STORAGE_ENABLE,
    &ops::STORAGE_DISABLE,
];

#[test]
fn storage_and_observation_rules_admit_their_lines_in_their_profiles_only() {
    let _guard = lock();
    for profile in ["readonly", "operator", "full"] {
        let _installed = Installed::new(&render(profile, &[]));
        let p = pxagent::catalog::Profile::parse(profile).unwrap();
        for op in NEW_OPS {
            for line in samples(op) {
                assert_eq!(
                    allowed(&line),
                    p.allows_op(op),
                    "{profile} {} {line:?}",
                    op.id
                );
            }
        }
    }
}

#[test]
fn storage_rules_refuse_system_paths_secrets_and_other_types() {
    let _guard = lock();
    let _installed = Installed::new(&render("full", &[]));
    assert!(allowed(&add_dir("/mnt/iso1", "iso,backup")));
    assert!(allowed(&add_dir("/srv/a/b.c", "images")));
    for path in [
        "/",
        "/etc",
        "/etc/pve",
        "/root",
        "/root/x",
        "/usr/x",
        "/var/lib/vz",
        "/boot/x",
        "/proc/1",
        "/sys/x",
        "/dev/x",
        "/lib/x",
        "/mnt",
        "/mnt/../etc",
        "/mnt/./x",
        "/mnt/.x",
        "/mnt//x",
        "/mnt/x/",
        "/mntx/y",
        "/data/x",
        "mnt/x",
        // Proxmox's own network mounts, and inside them.
        "/mnt/pve",
        "/mnt/pve/nfs1",
        "/mnt/pve/nfs1/images",
    ] {
        assert!(!allowed(&add_dir(path, "iso")), "{path}");
    }
    for path in ["/mnt/pvex", "/mnt/p", "/mnt/pve-data", "/mnt/x/pve"] {
        assert!(allowed(&add_dir(path, "iso")), "{path}");
    }
    for content in [
        "snippets",
        "iso,snippets",
        "snippets,iso",
        "iso,",
        ",iso",
        "none",
    ] {
        assert!(!allowed(&add_dir("/mnt/x", content)), "{content}");
    }
    let dir = add_dir("/mnt/x", "iso");
    // Options no row has: secrets, mount options, content directories, a second path.
    for extra in [
        &["--password", "x"][..],
        &["--options", "vers=3"],
        &["--content-dirs", "iso=../../etc"],
        &["--create-subdirs", "0"],
        &["--shared", "1"],
        &["--nodes", "pve1"],
        &["--is_mountpoint", "/etc"],
        &["--path", "/etc"],
    ] {
        assert!(!allowed(&with(&dir, extra)), "{extra:?}");
    }
    // The storage types that carry secrets, and every other type, on the create line.
    for t in [
        "pbs", "cifs", "rbd", "cephfs", "iscsi", "lvm", "btrfs", "esxi",
    ] {
        let line = w(&[
            "/usr/bin/pvesh",
            "create",
            "/storage",
            "--storage",
            "s1",
            "--type",
            t,
            "--server",
            "192.0.2.20",
            "--content",
            "backup",
            "--output-format",
            "json",
        ]);
        assert!(!allowed(&line), "{t}");
        let mut swapped = dir.clone();
        swapped[6] = t.to_string();
        assert!(!allowed(&swapped), "{swapped:?}");
    }
    let pbs = w(&[
        "/usr/bin/pvesh",
        "create",
        "/storage",
        "--storage",
        "pbs2",
        "--type",
        "pbs",
        "--server",
        "192.0.2.20",
        "--datastore",
        "store1",
        "--username",
        "a@pbs",
        "--password",
        "secret",
        "--content",
        "backup",
        "--output-format",
        "json",
    ]);
    assert!(!allowed(&pbs));
    let nfs = argv(
        &ops::STORAGE_ADD_NFS,
        &[
            ("storage", "n1"),
            ("server", "nas"),
            ("export", "/export/pve"),
        ],
    );
    assert!(allowed(&nfs));
    // Always mounted nosuid,nodev,noexec: a line without those options, or with others, is refused.
    let at = nfs
        .iter()
        .position(|x| x == "--options")
        .expect("the NFS line sets options");
    assert_eq!(nfs[at + 1], "nosuid,nodev,noexec,nosymfollow");
    let mut bare = nfs.clone();
    bare.drain(at..at + 2);
    assert!(!allowed(&bare), "{bare:?}");
    for opts in [
        "vers=3",
        "nosuid,nodev",
        "nosuid,nodev,noexec",
        "nosuid,nodev,noexec,suid",
        "nosuid,nodev,noexec,nosymfollow,symfollow",
        "suid",
    ] {
        let mut other = nfs.clone();
        other[at + 1] = opts.to_string();
        assert!(!allowed(&other), "{other:?}");
    }
    for extra in [
        &["--options", "vers=3"][..],
        &["--password", "x"],
        &["--path", "/etc"],
    ] {
        assert!(!allowed(&with(&nfs, extra)), "{extra:?}");
    }
    // Only the servers the admin named: another server, or a name that merely
    // starts or ends like one, is refused by sudo itself.
    let server_at = nfs.iter().position(|x| x == "--server").unwrap() + 1;
    for other in [
        "evil.example.org",
        "nasx",
        "xnas",
        "192.0.2.300",
        "192.0.2.1",
        "192a0.2.10",
    ] {
        let mut line = nfs.clone();
        line[server_at] = other.to_string();
        assert!(!allowed(&line), "{other}");
    }
    let mut named = nfs.clone();
    named[server_at] = "192.0.2.30".to_string();
    assert!(allowed(&named));
    // `set` takes only the mount point flag and the switch; never content or options.
    let set = |words: &[&str]| {
        let mut v = w(&["/usr/bin/pvesh", "set", "/storage/local"]);
        v.extend(words.iter().map(|s| s.to_string()));
        v.extend(["--output-format".to_string(), "json".to_string()]);
        v
    };
    assert!(allowed(&set(&["--is_mountpoint", "yes"])));
    assert!(allowed(&set(&["--disable", "1"])));
    for bad in [
        &["--content", "snippets"][..],
        &["--content", "iso"],
        &["--is_mountpoint", "/etc"],
        &["--disable", "1", "--content", "snippets"],
        &["--password", "x"],
        &["--delete", "content"],
        &["--disable", "2"],
    ] {
        assert!(!allowed(&set(bad)), "{bad:?}");
    }
    // The observation reads take no other disk, and never POST the package index.
    let smart = |disk: &str| argv(&ops::NODE_SMART, &[("disk", disk)]);
    assert!(allowed(&smart("/dev/nvme0n1")));
    for d in [
        "/dev/sda1",
        "/dev/disk/by-id/x",
        "/dev/../etc/shadow",
        "/etc/shadow",
    ] {
        assert!(!allowed(&smart(d)), "{d}");
    }
    let apt = w(&[
        "/usr/bin/pvesh",
        "create",
        "/nodes/pve1/apt/update",
        "--output-format",
        "json",
    ]);
    assert!(!allowed(&apt));
    let service_start = w(&[
        "/usr/bin/pvesh",
        "create",
        "/nodes/pve1/services/pveproxy/restart",
        "--output-format",
        "json",
    ]);
    assert!(!allowed(&service_start));
}

#[test]
fn storage_roots_of_the_render_are_the_only_directories_admitted() {
    let _guard = lock();
    {
        let _installed = Installed::new(&render("full", &["--storage-roots", "/data/pools,/srv"]));
        assert!(allowed(&add_dir("/data/pools/a", "iso")));
        assert!(allowed(&add_dir("/srv/a", "iso")));
        for path in ["/mnt/a", "/data/a", "/data/pools", "/data/pools/../x"] {
            assert!(!allowed(&add_dir(path, "iso")), "{path}");
        }
    }
    // System directories are refused as roots at render time, with the reason.
    for bad in [
        "/",
        "/etc",
        "/root",
        "/usr",
        "/var",
        "/boot",
        "/proc",
        "/sys",
        "/dev",
        "/bin",
        "/sbin",
        "/lib64",
        "/mnt/../etc",
        // Where the account or a share's server writes.
        "/home",
        "/home/zen-agent",
        "/mnt/pve",
        "/mnt/pve/nfs1",
        "/var/tmp",
        "/dev/shm",
        "/tmp",
    ] {
        let r = px()
            .args(["sudoers", "render", "--storage-roots", bad])
            .run();
        assert_eq!(r.code, 2, "{bad}: {}", r.stdout);
        assert!(r.stderr.contains("--storage-roots"), "{}", r.stderr);
    }
}

/// Without `--nfs-servers` the render has no NFS rule at all, so real sudo refuses
/// every NFS storage, on any server; the render says why in its header, and refuses a server
/// list that is not one.
#[test]
fn without_named_nfs_servers_no_nfs_storage_is_admitted() {
    let _guard = lock();
    let text = render("full", &["--nfs-servers", "nas"]);
    assert!(
        text.contains(", nfs servers nas)"),
        "{}",
        text.lines().next().unwrap()
    );
    let bare = px()
        .args([
            "sudoers",
            "render",
            "--user",
            crate::sudo_rules::ACCOUNT,
            "--profile",
            "full",
        ])
        .run();
    assert_eq!(bare.code, 0, "{}", bare.stderr);
    assert!(
        !bare.stdout.contains("--type nfs"),
        "an NFS rule without named servers"
    );
    assert!(bare.stdout.contains("No NFS servers named (--nfs-servers)"));
    let _installed = Installed::new(&bare.stdout);
    for server in ["nas", "192.0.2.30", "evil.example.org"] {
        let line = argv(
            &ops::STORAGE_ADD_NFS,
            &[
                ("storage", "n1"),
                ("server", server),
                ("export", "/export/pve"),
            ],
        );
        assert!(!allowed(&line), "{server}");
    }
    for bad in ["", "nas,nas", "-x", "a b", "nas,,x", "1.2.3.4/8"] {
        let r = px()
            .args(["sudoers", "render", &format!("--nfs-servers={bad}")])
            .run();
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stdout);
        assert!(r.stderr.contains("--nfs-servers"), "{}", r.stderr);
    }
}
