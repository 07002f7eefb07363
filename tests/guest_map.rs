//! The guest map kept between processes (`src/remote/memo.rs`): a second CLI call to the same
//! host moments later reads no map of its own; a guest moved behind pxagent's back is found
//! again and acted on at its new node only (on the old one Proxmox refuses before anything
//! runs). The sudo log is the proof of what each call sent.

use crate::support::{Home, guest, lock, sim, sim_reset, sudo_commands_since, sudo_log_len};

const MAP: &str = "/usr/bin/pvesh get /cluster/resources --type vm --output-format json";

/// Run one call that must succeed: the commands sudo logged for it, and its stdout.
fn sent(home: &Home, args: &[&str]) -> (Vec<String>, String) {
    let off = sudo_log_len();
    let r = home.px().bed().args(args).run();
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    (sudo_commands_since(off), r.stdout)
}

#[test]
fn a_second_call_reuses_the_map_and_a_moved_guest_is_found_again() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    let sent = |args: &[&str]| sent(&home, args).0;
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

/// `vm start` with a warm map: the map says the guest is stopped, so no status read — the
/// start and its task's status, 2 commands. A map gone stale (the guest started behind
/// pxagent's back) costs one refused start and one status read, and the answer is the
/// honest `changed: false`, never a failure.
#[test]
fn a_start_the_map_says_is_needed_reads_no_status_and_a_stale_map_is_no_failure() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    let sent = |args: &[&str]| sent(&home, args);
    let status = "/usr/bin/pvesh get /nodes/pve3/qemu/103/status/current --output-format json";
    let start = "/usr/bin/pvesh create /nodes/pve3/qemu/103/status/start --output-format json";
    sent(&["vm", "status", "103"]);
    let (cmds, out) = sent(&["-o", "json", "vm", "start", "103"]);
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert_eq!(cmds[0], start, "{cmds:?}");
    assert!(cmds[1].contains("/tasks/UPID:pve3:"), "{cmds:?}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["data"]["changed"], true, "{out}");
    assert_eq!(guest(103).unwrap()["status"], "running");

    // Running now, and the map knows it: a second start reads the status (the map's
    // "running" is never trusted for a no-op) and sends nothing else.
    let (cmds, out) = sent(&["-o", "json", "vm", "start", "103"]);
    assert!(cmds.iter().all(|c| c != start), "{cmds:?}");
    assert_eq!(cmds.last().map(String::as_str), Some(status), "{cmds:?}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["data"]["changed"], false, "{out}");

    // Stopped, and the map knows it; then started behind pxagent's back within the
    // map's lifetime.
    sent(&["vm", "stop", "103", "--confirm", "yes stop 103"]);
    sent(&["vm", "status", "103"]);
    sim(&[
        "pvesh",
        "create",
        "/nodes/pve3/qemu/103/status/start",
        "--output-format",
        "json",
    ]);
    let (cmds, out) = sent(&["-o", "json", "vm", "start", "103"]);
    assert_eq!(cmds.first().map(String::as_str), Some(start), "{cmds:?}");
    assert_eq!(cmds.last().map(String::as_str), Some(status), "{cmds:?}");
    assert_eq!(cmds.iter().filter(|c| *c == start).count(), 1, "{cmds:?}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["data"]["changed"], false, "{out}");
    assert!(
        v["data"]["refused"]
            .as_str()
            .is_some_and(|r| r.contains("already running")),
        "{out}"
    );
    assert_eq!(guest(103).unwrap()["status"], "running");
}

/// `vm status --brief` answers from the guest map: one `/cluster/resources` read for one
/// guest or for fifty in a batch (issue 27 item 3), with what that list carries (state,
/// node, CPU, memory, uptime); a container's and an unknown id are refused as for
/// `vm status`, and the plain `vm status` still reads `status/current`.
#[test]
fn brief_status_of_fifty_guests_is_one_map_read() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    let off = sudo_log_len();
    let r = home
        .px()
        .bed()
        .args(["-o", "json", "vm", "status", "101", "--brief"])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(sudo_commands_since(off), [MAP]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let d = &v["data"];
    assert_eq!(
        (d["vmid"].as_u64(), d["node"].as_str(), d["status"].as_str()),
        (Some(101), Some("pve2"), Some("running")),
        "{d}"
    );
    for k in ["cpu", "maxcpu", "mem", "maxmem", "uptime", "name"] {
        assert!(d.get(k).is_some(), "{k} in {d}");
    }
    // People get the status layout.
    let r = home
        .px()
        .bed()
        .args(["vm", "status", "101", "--brief"])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("running"), "{}", r.stdout);

    // Fifty in one batch, from a state directory with no kept map: one read.
    let home = Home::new();
    let ids = [100, 101, 102, 103, 104, 110, 9000];
    let input: String = (0..50)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"op\":\"vm.status-brief\",\"args\":{{\"vmid\":{},\"brief\":true}}}}\n",
                ids[i % ids.len()]
            )
        })
        .collect();
    let off = sudo_log_len();
    let r = home.px().bed().args(["batch"]).stdin(input).run();
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let cmds = sudo_commands_since(off);
    assert!(cmds.len() <= 2, "{cmds:?}");
    assert_eq!(cmds, [MAP]);
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 50);
    for l in &lines {
        assert_eq!(l["ok"], true, "{l}");
        let id = l["id"].as_u64().unwrap() as usize;
        assert_eq!(l["data"]["vmid"].as_u64(), Some(ids[id % ids.len()]), "{l}");
    }
    // A container is not a VM; an unknown id is not found (after one read anew).
    let r = home
        .px()
        .bed()
        .args(["vm", "status", "200", "--brief"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("ct status"), "{}", r.stderr);
    let r = home
        .px()
        .bed()
        .args(["ct", "status", "200", "--brief"])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = home
        .px()
        .bed()
        .args(["vm", "status", "999", "--brief"])
        .run();
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("no guest with id 999"), "{}", r.stderr);
    // Without --brief the status is Proxmox's status/current, as before.
    let off = sudo_log_len();
    let r = home.px().bed().args(["vm", "status", "101"]).run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        sudo_commands_since(off)
            .iter()
            .any(|c| c.ends_with("/nodes/pve2/qemu/101/status/current --output-format json"))
    );
}
