//! Live tests of backup restores through pxagent, the bed's real sshd and sudo, and the simulator:
//! a privileged container's backup comes back as an unprivileged container, and a fenced sudoers
//! refuses (exit 9) a restore of another guest's archive and a storage removal while a restore
//! inside the fence works. Like `actions.rs`, these FAIL (never skip) without the bed's `PXAGENT_*`
//! variables.

use serde_json::Value;

use crate::support::{
    Home, SudoersSwap, backups, guest, lock, sim, sim_get, sudo_commands_since, sudo_log_len,
};

/// A VMID nobody uses yet, from the simulator.
fn free_vmid() -> u32 {
    let id = sim(&["pvesh", "get", "/cluster/nextid", "--output-format", "json"]);
    let v: Value = serde_json::from_str(&id).unwrap();
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_u64().map(|n| n as u32))
        .unwrap()
}

#[test]
fn a_privileged_containers_backup_comes_back_unprivileged() {
    let _g = lock();
    let home = Home::new();
    // CT 202 is the bed's privileged container; its backup is made on the host side, so this
    // test does not depend on how pxagent backs up containers.
    assert!(
        sim_get("/nodes/pve1/lxc/202/config", &[])
            .get("unprivileged")
            .is_none()
    );
    let before = backups("pve1", 202);
    sim(&[
        "pvesh",
        "create",
        "/nodes/pve1/vzdump",
        "--vmid",
        "202",
        "--storage",
        "local",
        "--mode",
        "stop",
        "--output-format",
        "json",
    ]);
    let archive = backups("pve1", 202)
        .into_iter()
        .find(|a| !before.contains(a))
        .expect("a new backup of 202");
    let id = free_vmid();
    let log = sudo_log_len();
    let r = home.on_bed(&[
        "backup",
        "restore",
        &archive,
        "--vmid",
        &id.to_string(),
        "--storage",
        "local-lvm",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["op"], "backup.restore-ct");
    assert_eq!(guest(u64::from(id)).expect("restored")["type"], "lxc");
    let config = sim_get(&format!("/nodes/pve1/lxc/{id}/config"), &[]);
    assert_eq!(config["unprivileged"], 1, "{config}");
    assert_eq!(config["hostname"], "legacy");
    // What sudo ran carried the flag.
    let sent = sudo_commands_since(log);
    assert!(
        sent.iter()
            .any(|c| c.contains("/lxc --vmid") && c.contains("--restore 1 --unprivileged 1")),
        "{sent:?}"
    );
    // Clean up: the container and the backup.
    let phrase = format!("yes destroy {id}");
    let r = home.on_bed(&["ct", "destroy", &id.to_string(), "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let phrase = format!("yes remove {archive}");
    let r = home.on_bed(&["backup", "remove", &archive, "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn a_fenced_host_refuses_foreign_archives_and_storage_removal() {
    let _g = lock();
    let home = Home::new();
    // A backup of VM 250, outside the fence, made on the host side (pxagent checks that an
    // archive exists before it sends a restore).
    let existed = guest(250).is_some();
    if !existed {
        sim(&[
            "pvesh",
            "create",
            "/nodes/pve1/qemu",
            "--vmid",
            "250",
            "--name",
            "outside",
            "--memory",
            "512",
            "--scsi0",
            "local-lvm:1",
            "--output-format",
            "json",
        ]);
    }
    let before = backups("pve1", 250);
    sim(&[
        "pvesh",
        "create",
        "/nodes/pve1/vzdump",
        "--vmid",
        "250",
        "--storage",
        "local",
        "--output-format",
        "json",
    ]);
    let foreign = backups("pve1", 250)
        .into_iter()
        .find(|a| !before.contains(a))
        .expect("a new backup of 250");
    let foreign = foreign.as_str();
    let _swap = SudoersSwap::render(&["--vmids", "100-199"]);
    let r = home.on_bed(&["backup", "restore", foreign, "--vmid", "177", "-o", "json"]);
    assert_eq!(r.code, 9, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["error"]["kind"], "sudo_refused");
    assert!(guest(177).is_none());
    let r = home.on_bed(&[
        "storage",
        "remove",
        "local-lvm",
        "--confirm",
        "yes remove local-lvm",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 9, "{}{}", r.stdout, r.stderr);
    let phrase = format!("yes remove {foreign}");
    let r = home.on_bed(&["backup", "remove", foreign, "--confirm", &phrase]);
    assert_eq!(r.code, 9, "{}{}", r.stdout, r.stderr);
    // Inside the fence the same restore works: VM 100's backup to a new VMID in 100-199.
    let archive = backups("pve1", 100)
        .into_iter()
        .next()
        .expect("the bed has a backup of VM 100");
    let id = (100..200)
        .find(|n| guest(*n).is_none())
        .expect("a free VMID in the fence");
    let r = home.on_bed(&[
        "backup",
        "restore",
        &archive,
        "--vmid",
        &id.to_string(),
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(guest(id).expect("restored")["type"], "qemu");
    let phrase = format!("yes destroy {id}");
    let r = home.on_bed(&["vm", "destroy", &id.to_string(), "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Clean up on the host side what the fence keeps pxagent from.
    sim(&["pvesm", "free", foreign]);
    if !existed {
        sim(&[
            "pvesh",
            "delete",
            "/nodes/pve1/qemu/250",
            "--output-format",
            "json",
        ]);
    }
}
