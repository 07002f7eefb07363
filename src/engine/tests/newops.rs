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
        .expect(
            &words("sudo -n /usr/bin/pvesh set /nodes/node2/qemu/100/config --cores 3 --tags web;prod --output-format json"),
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
    assert_eq!(run.sent().len(), 2);
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
