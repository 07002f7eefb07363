//! The guest map kept between processes (`src/remote/memo.rs`): a second CLI call to the same
//! host moments later reads no map of its own; a guest moved behind pxagent's back is found
//! again and acted on at its new node only (on the old one Proxmox refuses before anything
//! runs). The sudo log is the proof of what each call sent.

use crate::support::{Home, guest, lock, sim, sim_reset, sudo_commands_since, sudo_log_len};

const MAP: &str = "/usr/bin/pvesh get /cluster/resources --type vm --output-format json";

#[test]
fn a_second_call_reuses_the_map_and_a_moved_guest_is_found_again() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    let px = |args: &[&str]| home.px().bed().args(args).run();
    let sent = |args: &[&str]| {
        let off = sudo_log_len();
        let r = px(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        sudo_commands_since(off)
    };
    let first = sent(&["vm", "status", "103"]);
    assert!(first.iter().any(|c| c == MAP), "{first:?}");
    // Another process, moments later: only the status read.
    assert_eq!(
        sent(&["vm", "status", "103"]),
        ["/usr/bin/pvesh get /nodes/pve3/qemu/103/status/current --output-format json"]
    );
    // Moved behind pxagent's back (as another admin would).
    sim(&[
        "pvesh",
        "create",
        "/nodes/pve3/qemu/103/migrate",
        "--target",
        "pve2",
        "--output-format",
        "json",
    ]);
    let cmds = sent(&["vm", "snapshot", "103", "moved"]);
    let on = |node: &str| {
        cmds.iter()
            .filter(|c| c.contains(&format!("/nodes/{node}/qemu/103/snapshot")))
            .count()
    };
    // Tried where the map said, refused there before anything ran, looked up again once,
    // then done on its node.
    assert_eq!((on("pve3"), on("pve2")), (1, 1), "{cmds:?}");
    assert_eq!(cmds.iter().filter(|c| *c == MAP).count(), 1, "{cmds:?}");
    let g = guest(103).unwrap();
    assert_eq!(g["node"], "pve2");
    let snaps = crate::support::sim_get("/nodes/pve2/qemu/103/snapshot", &[]);
    assert!(
        snaps
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "moved"),
        "{snaps}"
    );
    // The next call looks the guest it changed up again (a change forgets the guest in the
    // kept map) and goes to its new node only; the one after that reads no map.
    let next = sent(&["vm", "status", "103"]);
    assert_eq!(
        next,
        [
            MAP,
            "/usr/bin/pvesh get /nodes/pve2/qemu/103/status/current --output-format json"
        ]
    );
    assert_eq!(
        sent(&["vm", "status", "103"]),
        ["/usr/bin/pvesh get /nodes/pve2/qemu/103/status/current --output-format json"]
    );
}
