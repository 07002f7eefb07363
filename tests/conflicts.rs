//! Edits that cannot clobber (issue 25, item 6): `vm set` and `ct set` send the digest of the
//! configuration they were made against; when someone changed the guest in between, Proxmox
//! refuses (`detected modified configuration - file changed by other user? Try again.`, pve-common
//! `PVE::Tools::assert_if_modified`) and pxagent answers exit 1, kind `conflict`, with what changed.

use crate::support::*;

fn config(vmid: u64) -> serde_json::Value {
    sim_get(&format!("/nodes/{}/qemu/{vmid}/config", node_of(vmid)), &[])
}

#[test]
fn a_set_after_a_concurrent_edit_is_a_conflict_naming_what_changed() {
    let _g = lock();
    let _s = sim_reset();
    let home = Home::new();
    let before = config(100);
    let digest = before["digest"].as_str().unwrap().to_string();

    // The change pxagent reads the config for is pinned to it: a human's edit while the set is
    // on its way (held 3 s at the host) makes it a conflict, and nothing of it is applied.
    fault(
        r#"{"match":"qemu/100/config --description agent-edit","action":"hang","seconds":3,"times":1}"#,
    );
    let running = home
        .px()
        .gated()
        .args([
            "vm",
            "set",
            "100",
            "--description",
            "agent-edit",
            "-o",
            "json",
        ])
        .spawn();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    sim(&[
        "pvesh",
        "set",
        "/nodes/pve1/qemu/100/config",
        "--cores",
        "7",
        "--output-format",
        "json",
    ]);
    let r = running.wait();
    clear_faults();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    assert_eq!(e["kind"], "conflict", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("cores: ") && msg.contains("-> 7"), "{msg}");
    let now = config(100);
    assert_eq!(now["cores"], 7);
    assert_ne!(
        now["description"], "agent-edit",
        "the set must not have been applied"
    );

    // A digest the caller read earlier (`vm config`) is sent as it is: stale, so a conflict.
    let r = home
        .px()
        .gated()
        .args([
            "vm", "set", "100", "--cores", "2", "--digest", &digest, "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    assert_eq!(e["kind"], "conflict", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("cores is now 7"),
        "{e}"
    );
    // The current digest passes.
    let fresh = config(100)["digest"].as_str().unwrap().to_string();
    let r = home
        .px()
        .gated()
        .args([
            "vm", "set", "100", "--cores", "2", "--digest", &fresh, "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(config(100)["cores"], 2);
    // Without a human in between, the pinned set just works, on a container too.
    let r = home
        .px()
        .bed()
        .args(["ct", "set", "200", "--description", "quiet", "-o", "json"])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // A digest that is no digest is refused before anything is sent.
    let r = home
        .px()
        .bed()
        .args([
            "vm", "set", "100", "--cores", "2", "--digest", "xyz", "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 2, "{}", r.stdout);
}
