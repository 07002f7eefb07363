//! Undo (issue 25, item 3): every change's audit record names its inverse, and `pxagent undo`
//! runs it once, through the same policy, phrase and approval, on the gated bed.

use crate::support::*;

fn config(vmid: u64) -> serde_json::Value {
    sim_get(&format!("/nodes/{}/qemu/{vmid}/config", node_of(vmid)), &[])
}

fn snapshots(vmid: u64) -> Vec<String> {
    sim_get(
        &format!("/nodes/{}/qemu/{vmid}/snapshot", node_of(vmid)),
        &[],
    )
    .as_array()
    .unwrap()
    .iter()
    .filter_map(|s| s["name"].as_str().map(str::to_string))
    .collect()
}

/// What `undo --list` shows in `home`.
fn listed(home: &Home) -> Vec<serde_json::Value> {
    let r = home.px().args(["undo", "--list", "-o", "json"]).run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    r.data().as_array().unwrap().clone()
}

/// The `started` record of the last change in `home`'s audit log whose op is `op`.
fn last_change(home: &Home, op: &str) -> u64 {
    let all = listed(home);
    all.iter()
        .rev()
        .find(|c| c["op"] == op)
        .unwrap_or_else(|| panic!("no {op} in {all:?}"))["record"]
        .as_u64()
        .unwrap()
}

/// The `undo --list` entry of record `n`.
fn entry(home: &Home, n: u64) -> serde_json::Value {
    listed(home)
        .into_iter()
        .find(|c| c["record"] == n)
        .unwrap_or_else(|| panic!("no record {n} in undo --list"))
}

#[test]
fn undo_sets_back_what_a_set_changed_and_deletes_a_snapshot_once() {
    let _g = lock();
    let _s = sim_reset();
    let home = Home::new();
    let before = config(100);
    let (cores, memory) = (before["cores"].clone(), before["memory"].clone());
    let r = home
        .px()
        .gated()
        .args([
            "vm", "set", "100", "--cores", "3", "--memory", "3072", "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(config(100)["cores"], 3);

    // The list names the inverse: the values read before the set.
    let set = last_change(&home, "vm.set");
    let listed = entry(&home, set);
    assert_eq!(listed["undo"]["op"], "vm.set", "{listed}");
    assert_eq!(
        listed["undo"]["values"]["cores"],
        cores.to_string().trim_matches('"')
    );

    // `undo` without a record takes this host's last change back, on the gated account.
    let r = home.px().gated().args(["undo", "-o", "json"]).run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let now = config(100);
    assert_eq!(
        (now["cores"].clone(), now["memory"].clone()),
        (cores, memory)
    );
    // Its records name what they undid, and a second undo of it is refused.
    let recs = std::fs::read_to_string(home.audit_log()).unwrap();
    let last: serde_json::Value = serde_json::from_str(recs.lines().last().unwrap()).unwrap();
    assert_eq!(last["undoes"], set, "{last}");
    assert_eq!(last["op"], "vm.set");
    let r = home
        .px()
        .gated()
        .args(["undo", &set.to_string(), "-o", "json"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("undone already")
    );

    // A snapshot's undo deletes it, with the delete's own phrase.
    let name = fresh("u");
    let r = home
        .px()
        .gated()
        .args(["vm", "snapshot", "100", &name, "-o", "json"])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(snapshots(100).contains(&name));
    let snap = last_change(&home, "vm.snapshot");
    let r = home
        .px()
        .gated()
        .args(["undo", &snap.to_string(), "-o", "json"])
        .run();
    assert_eq!(r.code, 4, "the delete needs its phrase: {}", r.stdout);
    assert!(snapshots(100).contains(&name));
    let phrase = format!("yes delsnapshot 100 {name}");
    let r = home
        .px()
        .gated()
        .args([
            "undo",
            &snap.to_string(),
            "--confirm",
            &phrase,
            "-o",
            "json",
        ])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!snapshots(100).contains(&name), "{:?}", snapshots(100));
}

#[test]
fn undo_refuses_to_clobber_a_later_edit_and_offers_the_snapshot_taken_before() {
    let _g = lock();
    let _s = sim_reset();
    let home = Home::new();
    let r = home
        .px()
        .gated()
        .args(["vm", "set", "100", "--cores", "5", "-o", "json"])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let set = last_change(&home, "vm.set");
    // A human changes the guest after the agent: setting it back would overwrite that.
    sim(&[
        "pvesh",
        "set",
        "/nodes/pve1/qemu/100/config",
        "--cores",
        "6",
        "--output-format",
        "json",
    ]);
    let r = home
        .px()
        .gated()
        .args(["undo", &set.to_string(), "-o", "json"])
        .run();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    assert_eq!(e["kind"], "conflict", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("cores is now 6, not 5"),
        "{e}"
    );
    assert_eq!(config(100)["cores"], 6);

    // A resize has no inverse: undo says why.
    let r = home
        .px()
        .gated()
        .args(["vm", "resize", "100", "scsi0", "+1G", "-o", "json"])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let grown = last_change(&home, "vm.resize");
    let r = home
        .px()
        .gated()
        .args(["undo", &grown.to_string(), "-o", "json"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("never shrinks")
    );

    // With snapshot_before, the resize is preceded by a snapshot named after its audit record,
    // and undo rolls back to it (with the rollback's phrase).
    let policy = home.write("policy.yaml", b"snapshot_before: [vm.resize, vm.set]\n");
    let r = home
        .px()
        .gated()
        .args([
            "vm", "resize", "100", "scsi0", "+1G", "--policy", &policy, "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let grown = last_change(&home, "vm.resize");
    let listed = entry(&home, grown);
    let taken = listed["rollback"].as_str().unwrap().to_string();
    assert!(taken.starts_with("pxagent-undo-"), "{listed}");
    assert!(snapshots(100).contains(&taken), "{:?}", snapshots(100));
    // The snapshot's own record is the one it is named after.
    let snap_record: u64 = taken.trim_start_matches("pxagent-undo-").parse().unwrap();
    let recs = std::fs::read_to_string(home.audit_log()).unwrap();
    let named = recs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["seq"] == snap_record)
        .unwrap();
    assert_eq!(named["op"], "vm.snapshot", "{named}");
    let phrase = format!("yes rollback 100 {taken}");
    let r = home
        .px()
        .gated()
        .args([
            "undo",
            &grown.to_string(),
            "--confirm",
            &phrase,
            "-o",
            "json",
        ])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["op"], "vm.rollback", "{}", r.stdout);

    // A policy that refuses the snapshot refuses the change: nothing is sent.
    let deny = home.write(
        "deny.yaml",
        b"snapshot_before: [vm.set]\nops: {vm.snapshot: deny}\n",
    );
    let cores = config(100)["cores"].clone();
    let r = home
        .px()
        .gated()
        .args([
            "vm", "set", "100", "--cores", "8", "--policy", &deny, "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert_eq!(config(100)["cores"], cores);
}
