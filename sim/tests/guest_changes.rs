//! The pvesh endpoints that change and observe guests, called the way pxagent calls them: setting a
//! guest's options, growing a disk, migrating, the guest agent's interfaces, RRD history, cluster
//! tasks, HA status, a node's network, deleting a volume. Their formats and texts are cited in
//! `settings.rs`, `migrate.rs` and `observe.rs`.

use pve_sim::state::{State, initial};
use pve_sim::{Ctx, Output, pvesh};
use serde_json::Value;

const NOW: i64 = 1_790_000_000;

fn call(st: &mut State, line: &str) -> Output {
    let argv: Vec<String> = line.split(' ').map(String::from).collect();
    pvesh::run(st, &Ctx::new(NOW), &argv)
}

#[test]
fn issue13_endpoints_through_pvesh() {
    let mut st = initial(NOW);
    // PUT config: the handler's line, no JSON; proxied it comes back as a JSON string.
    let o = call(
        &mut st,
        "set /nodes/pve1/qemu/100/config --cores 3 --output-format json",
    );
    assert_eq!(
        (o.stdout.as_str(), o.code),
        ("update VM 100: -cores 3\n", 0)
    );
    let o = call(
        &mut st,
        "set /nodes/pve2/qemu/101/config --onboot 1 --output-format json",
    );
    // `proxy_handler` gathers the remote's lines without their newlines (pvesh.pm, Cmd.pm).
    assert_eq!(o.stdout, "\"update VM 101: -onboot 1\"\n");
    let o = call(
        &mut st,
        "set /nodes/pve1/qemu/100/config --args -monitor --output-format json",
    );
    assert!(
        o.stderr.contains("args: property is not defined in schema"),
        "{}",
        o.stderr
    );
    let o = call(
        &mut st,
        "get /nodes/pve1/qemu/100/config --output-format json",
    );
    let cfg: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(cfg["cores"], 3);
    // resize: schema errors before anything, then a task.
    let o = call(
        &mut st,
        "set /nodes/pve1/qemu/100/resize --disk efidisk9 --size 1G --output-format json",
    );
    assert_eq!(o.code, 255);
    assert!(
        o.stderr.contains(
            "disk: value 'efidisk9' does not have a value in the enumeration 'ide0, ide1"
        ),
        "{}",
        o.stderr
    );
    let o = call(
        &mut st,
        "set /nodes/pve1/qemu/100/resize --disk scsi0 --size 1X --output-format json",
    );
    assert!(
        o.stderr
            .contains("size: value does not match the regex pattern"),
        "{}",
        o.stderr
    );
    let o = call(
        &mut st,
        "set /nodes/pve1/qemu/100/resize --disk scsi0 --size +1G --output-format json",
    );
    assert_eq!(o.code, 0);
    assert!(o.stdout.lines().last().unwrap().contains(":resize:100:"));
    // migrate: a pre-fork warning for a stopped VM asked to go online, then the task.
    let o = call(
        &mut st,
        "create /nodes/pve3/qemu/103/migrate --target pve1 --online 1 --with-local-disks 1 --output-format json",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .starts_with("VM isn't running. Doing offline migration instead.\n")
    );
    assert_eq!(st.guests[&103].node, "pve1");
    let o = call(
        &mut st,
        "create /nodes/pve1/qemu/103/migrate --target bad_node --output-format json",
    );
    assert!(
        o.stderr
            .contains("target: invalid format - value does not look like a valid node name")
    );
    // The agent's interfaces, RRD, tasks, HA, network.
    let o = call(
        &mut st,
        "get /nodes/pve1/qemu/100/agent/network-get-interfaces --output-format json",
    );
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["result"][1]["name"], "eth0");
    let o = call(
        &mut st,
        "get /nodes/pve1/qemu/100/rrddata --timeframe decade --output-format json",
    );
    assert!(
        o.stderr
            .contains("timeframe: value 'decade' does not have a value")
    );
    let o = call(&mut st, "get /nodes/pve1/rrddata --output-format json");
    assert!(
        o.stderr
            .contains("timeframe: property is missing and it is not optional")
    );
    for path in [
        "/nodes/pve2/rrddata --timeframe hour",
        "/nodes/pve1/lxc/200/rrddata --timeframe day --cf MAX",
        "/cluster/tasks",
        "/cluster/ha/status/current",
        "/nodes/pve3/network",
    ] {
        let o = call(&mut st, &format!("get {path} --output-format json"));
        assert_eq!(o.code, 0, "{path}: {}", o.stderr);
        assert!(
            serde_json::from_str::<Value>(&o.stdout).unwrap().is_array(),
            "{path}"
        );
    }
    // A volume id with a '/' is the rest of the path.
    let o = call(
        &mut st,
        "delete /nodes/pve2/storage/local/content/local:iso/debian-13.2.0-amd64-netinst.iso --output-format json",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Proxied: the remote's log and UPID line run together in one JSON string (pvesh.pm).
    let raw: String = serde_json::from_str(o.stdout.trim_end()).unwrap();
    assert!(
        raw.starts_with("Removed volume 'local:iso/debian-13.2.0-amd64-netinst.iso'\"UPID:"),
        "{raw}"
    );
    assert!(raw.contains(":imgdel:local:root@pam:"), "{raw}");
    assert!(
        !st.volumes
            .iter()
            .any(|v| v.node == "pve2" && v.volname.starts_with("iso/"))
    );
    assert!(
        st.volumes
            .iter()
            .any(|v| v.node == "pve1" && v.volname.starts_with("iso/"))
    );
    let o = call(
        &mut st,
        "delete /nodes/pve1/storage/local-lvm/content/local:iso/x.iso --output-format json",
    );
    assert!(
        o.stderr
            .contains("volume: storage ID mismatch (local != local-lvm)"),
        "{}",
        o.stderr
    );
}
