//! In-process tests of two operations, over the replay
//! transport: `vm set` (one synchronous config line, done without a task) and `vm ips` (the
//! guest agent's interfaces normalised). The helpers are the parent module's.

use super::*;

/// `vm set`: the node from `/cluster/resources`, then one synchronous
/// `pvesh set …/config` whose `null` result is no task: the op is done when it exits 0.
#[tokio::test]
async fn vm_set_sends_one_config_line_and_is_done_without_a_task() {
    let host = Replay::new("pve")
        .expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer())
        .expect(&words(CONFIG_100), Answer::ok(config_100(2)))
        .expect(
            &words(&format!("sudo -n /usr/bin/pvesh set /nodes/node2/qemu/100/config --cores 3 --tags web;prod --digest {} --output-format json", DIGEST_2)),
            // replay/pvesh_set_qemu_config_cores_sim.stdout
            Answer::ok(fixture("replay/pvesh_set_qemu_config_cores_sim.stdout")),
        );
    let inv = invocation(
        "vm.set",
        &[("vmid", "100"), ("tags", "web;prod"), ("cores", "3")],
    );
    let run = execute(&Policy::default(), host, &inv, None).await;
    assert_eq!(run.code(), 0);
    assert_eq!(run.data()["done"], true);
    assert!(run.trail.upid.is_none());
    assert_eq!(run.sent().len(), 3);
}

/// `vm set` is pinned to the config it read: Proxmox's refusal of a stale digest (pve-common
/// `PVE::Tools::assert_if_modified`, exit 255 from pvesh) is exit 1, kind `conflict`, and names
/// what changed meanwhile, read once more.
#[tokio::test]
async fn vm_set_after_a_concurrent_edit_is_a_conflict_naming_what_changed() {
    let host = Replay::new("pve")
        .expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer())
        .expect(&words(CONFIG_100), Answer::ok(config_100(2)))
        .expect(
            &words(&format!("sudo -n /usr/bin/pvesh set /nodes/node2/qemu/100/config --memory 4096 --digest {} --output-format json", DIGEST_2)),
            Answer::fail(
                255,
                "detected modified configuration - file changed by other user? Try again.\n",
            ),
        )
        .expect(&words(CONFIG_100), Answer::ok(config_100(8)));
    let inv = invocation("vm.set", &[("vmid", "100"), ("memory", "4096")]);
    let run = execute(&Policy::default(), host, &inv, None).await;
    assert_eq!(run.code(), 1);
    let e = run.err();
    assert_eq!(e.kind(), "conflict");
    assert!(e.to_string().contains("cores: 2 -> 8"), "{e}");
    assert!(!e.to_string().contains("memory:"), "{e}");
}

/// `pvesh get /nodes/node2/qemu/100/config` (FORMATS.md §2.13: the config keys, typed as PVE
/// parses them, and `digest`).
const CONFIG_100: &str =
    "sudo -n /usr/bin/pvesh get /nodes/node2/qemu/100/config --output-format json";
const DIGEST_2: &str = "5e1f0c3a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f";

fn config_100(cores: u32) -> String {
    let digest = if cores == 2 {
        DIGEST_2.to_string()
    } else {
        format!("{cores:040}")
    };
    format!(
        r#"{{"boot":"order=scsi0","cores":{cores},"memory":"2048","name":"web01","ostype":"l26","scsi0":"local-lvm:vm-100-disk-0,size=32G","digest":"{digest}"}}"#
    )
}

/// `vm ips`: the agent's answer (pve/qga_network_get_interfaces_schema_sample.json)
/// becomes one entry per interface with bare IPv4/IPv6 lists.
#[tokio::test]
async fn vm_ips_reads_the_agents_interfaces() {
    let host = Replay::new("pve")
        .expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer())
        .expect(
            &words("sudo -n /usr/bin/pvesh get /nodes/node1/qemu/101/agent/network-get-interfaces --output-format json"),
            Answer::ok(fixture("pve/qga_network_get_interfaces_schema_sample.json")),
        );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.ips", &[("vmid", "101")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 0);
    let eth0 = &run.data()[1];
    assert_eq!(eth0["name"], "eth0");
    assert_eq!(eth0["ipv4"], serde_json::json!(["192.168.122.104"]));
    assert_eq!(run.data()[0]["loopback"], true);
}
