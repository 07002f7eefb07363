//! Bridges and `network apply` on the beds, plain and gated: a bridge goes into the node's
//! pending change (`/etc/network/interfaces.new`, which the bed gave the simulator's local
//! node), `network pending` shows the diff, and `network apply` runs through pxagent's helper:
//! kept when pxagent reaches the host again over a new connection, put back by the host itself
//! when it cannot — the apply cut the host off (the simulator's `net-cut` knob stops the bed's
//! sshd listener while the new bridge runs), or the client was killed meanwhile.
//!
//! Every test holds the host [`lock`] and leaves the network as a fresh install's
//! (`pve-sim reset`), with nothing armed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Home, gated, lock, sim};

const INTERFACES: &str = "/etc/network/interfaces";
const ARMED: &str = "/var/lib/pxagent-helper/armed.json";

/// Resets the network (and lets a stopped sshd go on) when a test ends, however it ends.
struct Clean(Vec<u32>);

impl Drop for Clean {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .status();
        }
        let _ = Command::new("/usr/local/lib/pve-sim/pve-sim")
            .args(["net-cut", "off"])
            .status();
        wait_until(Duration::from_secs(40), || !Path::new(ARMED).exists());
        let _ = Command::new("/usr/local/lib/pve-sim/pve-sim")
            .arg("reset")
            .status();
    }
}

fn clean(pids: &[u32]) -> Clean {
    assert!(
        Path::new("/etc/network/.pve-sim").exists(),
        "/etc/network is not the simulator's (no .pve-sim marker): the network tests need a machine without its own /etc/network, as CI and containers are; scripts/testbed.sh creates it there"
    );
    assert!(
        !Path::new(ARMED).exists(),
        "a network change is still armed from an earlier run: {ARMED}"
    );
    sim(&["reset"]);
    Clean(pids.to_vec())
}

fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    ok()
}

fn sshd_pid(gated_bed: bool) -> u32 {
    let var = if gated_bed {
        "PXAGENT_GATED_TESTBED_SSHD_PIDFILE"
    } else {
        "PXAGENT_TESTBED_SSHD_PIDFILE"
    };
    let file = std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set"));
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn run(home: &Home, gated_bed: bool, args: &[&str]) -> crate::support::Run {
    let px = home.px();
    let px = if gated_bed { px.gated() } else { px.bed() };
    px.args(args).run()
}

fn history() -> Vec<serde_json::Value> {
    std::fs::read_to_string("/var/lib/pxagent-helper/history.jsonl")
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_bridge_is_pending_until_applied_and_a_confirmed_apply_stays() {
    let _g = lock();
    let _c = clean(&[]);
    let home = Home::new();
    for (gated_bed, bridge) in [(false, "vmbr1"), (true, "vmbr2")] {
        let before = std::fs::read_to_string(INTERFACES).unwrap();
        let r = run(
            &home,
            gated_bed,
            &[
                "bridge",
                "create",
                "pve1",
                bridge,
                "--ports",
                if gated_bed { "eno2" } else { "bond0" },
                "--cidr",
                "10.10.0.1/24",
                "--comment",
                "lab net",
                "-o",
                "json",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            std::fs::read_to_string(INTERFACES).unwrap(),
            before,
            "only pending"
        );
        let p = run(
            &home,
            gated_bed,
            &["network", "pending", "pve1", "-o", "json"],
        );
        assert_eq!(p.code, 0, "{}", p.stderr);
        let d = &p.json()["data"];
        assert_eq!(d["pending"], true, "{d}");
        assert!(
            d["diff"]
                .as_str()
                .unwrap()
                .contains(&format!("+auto {bridge}")),
            "{d}"
        );
        // Not active yet.
        let list = run(&home, gated_bed, &["node", "network", "pve1", "-o", "json"]);
        let entry = list.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["iface"] == bridge)
            .cloned()
            .unwrap();
        assert!(entry.get("active").is_none(), "{entry}");
        // No phrase, nothing applied (exit 4), and the helper was never asked.
        let r = run(
            &home,
            gated_bed,
            &["network", "apply", "pve1", "-o", "json"],
        );
        assert_eq!(r.code, 4, "{}", r.stderr);
        assert!(!Path::new(ARMED).exists());
        let r = run(
            &home,
            gated_bed,
            &[
                "network",
                "apply",
                "pve1",
                "--confirm",
                "yes apply network on pve1",
                "-o",
                "json",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let d = &r.json()["data"];
        assert_eq!(
            (d["changed"].clone(), d["confirmed"].clone()),
            (true.into(), true.into()),
            "{d}"
        );
        assert!(
            d["upid"]
                .as_str()
                .unwrap()
                .contains(":srvreload:networking:"),
            "{d}"
        );
        assert!(
            std::fs::read_to_string(INTERFACES)
                .unwrap()
                .contains(&format!("auto {bridge}"))
        );
        assert!(!Path::new(ARMED).exists(), "confirmed: nothing armed");
        let h = history();
        let last: Vec<&str> = h
            .iter()
            .rev()
            .take(2)
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(last, ["confirmed", "armed"]);
        let list = run(&home, gated_bed, &["node", "network", "pve1", "-o", "json"]);
        assert!(
            list.json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["iface"] == bridge && e["active"] == 1),
            "{}",
            list.stdout
        );
    }
    // The gate judged both halves as ops of the catalog.
    let log = std::fs::read_to_string(gated().log).unwrap();
    assert!(
        log.contains("network.apply") && log.contains("network.confirm"),
        "{log}"
    );
    // Removing a bridge needs its phrase; dropping the pending change needs none.
    let home = Home::new();
    let r = run(&home, false, &["bridge", "remove", "pve1", "vmbr1"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let r = run(
        &home,
        false,
        &[
            "bridge",
            "remove",
            "pve1",
            "vmbr1",
            "--confirm",
            "yes remove vmbr1 on pve1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(Path::new("/etc/network/interfaces.new").exists());
    let r = run(&home, false, &["network", "revert", "pve1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!Path::new("/etc/network/interfaces.new").exists());
}

#[test]
fn an_apply_that_cuts_the_host_off_is_reverted_by_the_host_itself() {
    let _g = lock();
    let sshd = sshd_pid(false);
    let _c = clean(&[sshd]);
    let home = Home::new();
    let before = std::fs::read_to_string(INTERFACES).unwrap();
    let r = run(
        &home,
        false,
        &["bridge", "create", "pve1", "vmbr7", "-o", "json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim(&["net-cut", "vmbr7", &sshd.to_string()]);
    let start = Instant::now();
    let r = run(
        &home,
        false,
        &[
            "network",
            "apply",
            "pve1",
            "--window",
            "30",
            "--confirm",
            "yes apply network on pve1",
            "-o",
            "json",
        ],
    );
    // Exit 1 (remote_failed), the error as JSON on stdout, naming when the host reverts.
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "remote_failed", "{}", r.stdout);
    assert!(
        r.stdout
            .contains("puts the previous configuration back by itself"),
        "{}",
        r.stdout
    );
    assert!(
        std::fs::read_to_string(INTERFACES)
            .unwrap()
            .contains("vmbr7"),
        "applied meanwhile"
    );
    // The host reverts within the window, and the new connection works again.
    assert!(
        wait_until(Duration::from_secs(45), || !Path::new(ARMED).exists()),
        "no revert within the window"
    );
    assert!(
        start.elapsed() < Duration::from_secs(40),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(std::fs::read_to_string(INTERFACES).unwrap(), before);
    assert!(!Path::new("/etc/network/interfaces.new").exists());
    assert_eq!(history().last().unwrap()["event"], "reverted");
    let r = run(&home, false, &["network", "pending", "pve1", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["data"]["pending"], false);
}

#[test]
fn a_client_killed_between_apply_and_confirm_leaves_the_host_to_revert() {
    let _g = lock();
    let sshd = sshd_pid(true);
    let _c = clean(&[sshd]);
    let home = Home::new();
    let before = std::fs::read_to_string(INTERFACES).unwrap();
    let r = run(&home, true, &["bridge", "create", "pve1", "vmbr8"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The new connection hangs, so the client is still waiting for it when it is killed.
    sim(&["net-cut", "vmbr8", &sshd.to_string()]);
    let child = home
        .px()
        .gated()
        .args([
            "network",
            "apply",
            "pve1",
            "--window",
            "30",
            "--confirm",
            "yes apply network on pve1",
        ])
        .spawn();
    assert!(
        wait_until(Duration::from_secs(10), || Path::new(ARMED).exists()),
        "never armed"
    );
    std::thread::sleep(Duration::from_millis(500));
    let killed = Command::new("kill")
        .args(["-KILL", &child.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().code, -1);
    assert!(
        std::fs::read_to_string(INTERFACES)
            .unwrap()
            .contains("vmbr8")
    );
    assert!(
        wait_until(Duration::from_secs(45), || !Path::new(ARMED).exists()),
        "no revert within the window"
    );
    assert_eq!(std::fs::read_to_string(INTERFACES).unwrap(), before);
    assert_eq!(history().last().unwrap()["event"], "reverted");
}

#[test]
fn network_ops_refuse_another_node_and_a_first_bridge() {
    let _g = lock();
    let _c = clean(&[]);
    let home = Home::new();
    for args in [
        &["network", "pending", "pve2"][..],
        &[
            "network",
            "apply",
            "pve2",
            "--confirm",
            "yes apply network on pve2",
        ],
    ] {
        let r = run(&home, false, args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("connected to pve1, not pve2"),
            "{}",
            r.stderr
        );
    }
    for args in [
        &["bridge", "create", "pve1", "vmbr0"][..],
        &["bridge", "create", "pve1", "vmbr1", "--ports", "vmbr0"],
        &[
            "bridge",
            "create",
            "pve1",
            "vmbr1",
            "--cidr",
            "10.10.0.0/24",
        ],
        &[
            "network",
            "apply",
            "pve1",
            "--window",
            "5",
            "--confirm",
            "yes apply network on pve1",
        ],
    ] {
        let r = run(&home, false, args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
    }
    // PVE's own refusal of a port another bridge has.
    let r = run(
        &home,
        false,
        &["bridge", "create", "pve1", "vmbr1", "--ports", "eno1"],
    );
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("eno1 is already used on interface 'vmbr0'."),
        "{}",
        r.stderr
    );
    // Nothing pending: the helper refuses to arm.
    let r = run(
        &home,
        false,
        &[
            "network",
            "apply",
            "pve1",
            "--confirm",
            "yes apply network on pve1",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("nothing is pending"), "{}", r.stderr);
    assert!(!Path::new(ARMED).exists());
}

/// The network lines under real sudo: the catalog's admitted, their dangerous neighbours
/// refused — an existing interface changed (a NIC, `vmbr0`'s address), `vmbr0` created or
/// removed, a gateway, OVS, options after a line's fixed end, the apply without the helper,
/// the helper's revert or its watcher called by the account.
#[test]
fn sudo_admits_the_network_lines_and_refuses_their_neighbours() {
    use crate::sudo_rules::{Installed, allowed, render, w};
    let _g = lock();
    let _installed = Installed::new(&render("full", &[]));
    const PVESH: &str = "/usr/bin/pvesh";
    const HELPER: &str = "/usr/local/lib/pxagent/pxagent-helper";
    let json = ["--output-format", "json"];
    let create = |rest: &[&str]| {
        let mut v = w(&[PVESH, "create", "/nodes/pve1/network", "--iface"]);
        v.extend(w(rest));
        v.extend(w(&json));
        v
    };
    let base = ["vmbr1", "--type", "bridge", "--autostart", "1"];
    let with = |extra: &[&str]| {
        let mut v: Vec<&str> = base.to_vec();
        v.extend_from_slice(extra);
        create(&v)
    };
    for ok in [
        with(&[]),
        with(&[
            "--bridge_ports",
            "eno2,enp3s0.20",
            "--bridge_vlan_aware",
            "1",
            "--cidr",
            "10.10.0.1/24",
            "--comments",
            "lab net",
        ]),
        w(&[
            PVESH,
            "delete",
            "/nodes/pve1/network/vmbr12",
            "--output-format",
            "json",
        ]),
        w(&[
            PVESH,
            "delete",
            "/nodes/pve1/network",
            "--output-format",
            "json",
        ]),
        w(&[HELPER, "net-pending"]),
        w(&[HELPER, "net-arm", "60"]),
        w(&[HELPER, "net-arm", "600"]),
        w(&[HELPER, "net-confirm", "0123456789abcdef0123456789abcdef"]),
    ] {
        assert!(allowed(&ok), "{ok:?}");
    }
    for bad in [
        // vmbr0 and NICs: never created, removed or changed.
        create(&["vmbr0", "--type", "bridge", "--autostart", "1"]),
        w(&[
            PVESH,
            "delete",
            "/nodes/pve1/network/vmbr0",
            "--output-format",
            "json",
        ]),
        w(&[
            PVESH,
            "delete",
            "/nodes/pve1/network/eno1",
            "--output-format",
            "json",
        ]),
        w(&[
            PVESH,
            "set",
            "/nodes/pve1/network/vmbr0",
            "--cidr",
            "10.9.9.9/24",
            "--output-format",
            "json",
        ]),
        w(&[
            PVESH,
            "set",
            "/nodes/pve1/network/eno1",
            "--mtu",
            "9000",
            "--output-format",
            "json",
        ]),
        // What a bridge line never takes.
        with(&["--gateway", "10.10.0.254"]),
        with(&["--ovs_options", "tag=5"]),
        create(&["vmbr1", "--type", "OVSBridge", "--autostart", "1"]),
        create(&["bond1", "--type", "bond", "--autostart", "1"]),
        with(&["--bridge_ports", "vmbr0"]),
        with(&["--bridge_ports", "eno2 eno3"]),
        with(&["--cidr", "10.10.0.1/24", "--cidr6", "fd00::1/64"]),
        with(&["--mtu", "9000"]),
        // Options after the fixed end of a line.
        {
            let mut v = with(&[]);
            v.extend(w(&["--bridge_ports", "eno1"]));
            v
        },
        w(&[
            PVESH,
            "delete",
            "/nodes/pve1/network",
            "--output-format",
            "json",
            "--x",
            "1",
        ]),
        // The apply only through the helper, with its window.
        w(&[
            PVESH,
            "set",
            "/nodes/pve1/network",
            "--output-format",
            "json",
        ]),
        w(&[PVESH, "set", "/nodes/localhost/network"]),
        w(&[HELPER, "net-arm", "29"]),
        w(&[HELPER, "net-arm", "601"]),
        w(&[HELPER, "net-arm", "60", "x"]),
        w(&[HELPER, "net-confirm", "0123456789ABCDEF0123456789ABCDEF"]),
        w(&[HELPER, "net-confirm", "x"]),
        w(&[HELPER, "net-revert"]),
        w(&[HELPER, "net-watch", "0123456789abcdef"]),
        w(&[HELPER, "net-pending", "x"]),
    ] {
        assert!(!allowed(&bad), "{bad:?}");
    }
}
