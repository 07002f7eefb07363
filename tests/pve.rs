//! Live tests of Proxmox's error classes and the simulator's running tasks on the sandbox host:
//! real sshd and sudo, the PVE simulator's `hold` and `pmxcfs-down` faults and its guest-agent knob
//! (`sim/README.md`). Each test holds the host [`lock`] and puts back what it changed.

use serde_json::Value;

use crate::support::{
    Home, backups, clear_faults, ct_exec_bed, fault, guest, lock, running_task, sim, sim_get,
};

/// `ct exec 200 -- /nonexistent` on a bed rendered with `--ct-exec 200-299` reports the guest's
/// exit code 127, `ok: true`.
#[test]
fn a_missing_program_in_a_container_is_exit_code_127() {
    let _s = ct_exec_bed();
    let r = Home::new().on_bed(&["-o", "json", "ct", "exec", "200", "--", "/nonexistent"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let doc = r.json();
    assert_eq!(doc["ok"], true, "{doc}");
    assert_eq!(doc["data"]["exitcode"], 127, "{doc}");
    assert!(
        doc["data"]["stderr"]
            .as_str()
            .unwrap()
            .ends_with("No such file or directory - Failed to exec \"/nonexistent\"\n"),
        "{doc}"
    );
    // For containers too, `--exit-code` passes the guest's code through.
    let home = Home::new();
    let r = home.on_bed(&["ct", "exec", "200", "--exit-code", "--", "/nonexistent"]);
    assert_eq!(r.code, 127, "{}{}", r.stdout, r.stderr);
    let r = home.on_bed(&[
        "ct",
        "exec",
        "200",
        "--exit-code",
        "--",
        "sh",
        "-c",
        "exit 4",
    ]);
    assert_eq!(r.code, 4, "{}{}", r.stdout, r.stderr);
    let r = home.on_bed(&["ct", "exec", "200", "--", "sh", "-c", "exit 4"]);
    assert_eq!(r.code, 0, "without --exit-code: {}{}", r.stdout, r.stderr);
}

/// A change during a backup is a clear `locked` error, exit 1; stopping the backup the way Proxmox
/// does ends it `interrupted by signal` without an archive.
#[test]
fn a_change_during_a_backup_is_locked_and_a_stopped_backup_leaves_no_archive() {
    let _g = lock();
    clear_faults();
    let before = backups("pve1", 100).len();
    fault(r#"{"match":"/vzdump --vmid 100","action":"hold","seconds":60,"times":1}"#);
    let e = Home::new();
    let backup = e
        .px()
        .bed()
        .args(["-o", "json", "backup", "create", "100"])
        .spawn();
    let upid = running_task("pve1", "vzdump", None);
    assert_eq!(guest(100).unwrap()["lock"], "backup");
    // Through pxagent: the task list shows it running.
    let list = e.on_bed(&["-o", "json", "task", "list"]).data();
    let t = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["upid"] == upid.as_str())
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(t["status"], "RUNNING", "{list}");
    let r = e.on_bed(&["-o", "json", "vm", "snapshot", "100", "during-backup"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let err = &r.json()["error"];
    assert_eq!(err["kind"], "locked", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("VM is locked (backup)"),
        "{err}"
    );
    // Stop it as `pvesh delete /nodes/pve1/tasks/UPID` does (SIGTERM to the worker).
    sim(&["pvesh", "delete", &format!("/nodes/pve1/tasks/{upid}")]);
    let r = backup.wait();
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("interrupted by signal"), "{}", r.stdout);
    let st = sim_get(&format!("/nodes/pve1/tasks/{upid}/status"), &[]);
    assert_eq!(st["exitstatus"], "interrupted by signal");
    assert_eq!(
        backups("pve1", 100).len(),
        before,
        "a stopped backup leaves no archive"
    );
    assert!(guest(100).unwrap().get("lock").is_none());
    clear_faults();
}

/// The other new kinds, from the simulator's real texts: an unknown guest is `not_found`, a
/// stopped VM's reboot `wrong_state` (its shutdown is a no-op, `changed: false`).
#[test]
fn unknown_guests_are_not_found_and_stopped_ones_wrong_state() {
    let _g = lock();
    let e = Home::new();
    let r = e.on_bed(&["-o", "json", "vm", "status", "999"]);
    assert_eq!(
        (r.code, r.json()["error"]["kind"].clone()),
        (1, "not_found".into()),
        "{}",
        r.stdout
    );
    assert_eq!(guest(102).unwrap()["status"], "stopped");
    let r = e.on_bed(&["-o", "json", "vm", "reboot", "102"]);
    assert_eq!(
        (r.code, r.json()["error"]["kind"].clone()),
        (1, "wrong_state".into()),
        "{}",
        r.stdout
    );
}

/// pmxcfs down while pxagent runs as root through sudo is a host fault, exit 1, naming the
/// pve-cluster service, not sudo.
#[test]
fn pmxcfs_down_is_a_host_fault_naming_pve_cluster() {
    let _g = lock();
    clear_faults();
    fault(r#"{"match":"pvesh get /cluster/status","action":"pmxcfs-down","times":1}"#);
    let r = Home::new().on_bed(&["-o", "json", "cluster", "status"]);
    clear_faults();
    assert_eq!(r.code, 1, "{}", r.stdout);
    let err = &r.json()["error"];
    assert_eq!(err["kind"], "remote_failed", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("pve-cluster"),
        "{err}"
    );
}

/// A guest agent that refuses guest-exec (a RHEL-family guest) is exit 1 with the way to allow it.
#[test]
fn a_guest_agent_without_guest_exec_says_how_to_allow_it() {
    let _g = lock();
    sim(&["qga", "100", "no-exec"]);
    let r = Home::new().on_bed(&["-o", "json", "vm", "exec", "100", "--", "true"]);
    sim(&["qga", "100", "up"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("has been disabled"), "{msg}");
    assert!(msg.contains("--allow-rpcs"), "{msg}");
}

/// A task on another node comes back the way pvesh forwards it (one JSON string, the remote's lines
/// run together); pxagent still finds and follows its UPID.
#[test]
fn a_task_on_another_node_is_followed_through_the_proxy() {
    let _g = lock();
    let e = Home::new();
    let d = e
        .on_bed(&["-o", "json", "vm", "snapshot", "101", "proxied-pve"])
        .data();
    assert!(d["upid"].as_str().unwrap().starts_with("UPID:pve2:"), "{d}");
    let r = e.on_bed(&[
        "-o",
        "json",
        "--confirm",
        "yes delsnapshot 101 proxied-pve",
        "vm",
        "delsnapshot",
        "101",
        "proxied-pve",
    ]);
    assert_eq!(r.code, 0, "{}", r.stdout);
}
