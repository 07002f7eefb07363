//! What the simulated Proxmox holds, asked of the simulator directly so a test can hold pxagent's
//! answers against it: a guest's node, a guest's backups, the running tasks; and names no earlier
//! run used, for what a test creates there.

use std::time::{Duration, Instant};

use super::bed::{guest, sim_get};

/// The node of guest `vmid`; panics when the simulator has no such guest.
pub fn node_of(vmid: u64) -> String {
    guest(vmid).expect("guest exists")["node"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The backup volids of guest `vmid` on `node`'s `local` storage.
pub fn backups(node: &str, vmid: u64) -> Vec<String> {
    sim_get(
        &format!("/nodes/{node}/storage/local/content"),
        &["--content", "backup", "--vmid", &vmid.to_string()],
    )
    .as_array()
    .unwrap()
    .iter()
    .map(|b| b["volid"].as_str().unwrap().to_string())
    .collect()
}

/// The UPID of the running task of type `kind` on `node` (for guest `vmid` when given), once
/// the simulator lists it; panics when none shows up within 20 s.
pub fn running_task(node: &str, kind: &str, vmid: Option<u64>) -> String {
    let until = Instant::now() + Duration::from_secs(20);
    let vmid = vmid.map(|v| v.to_string());
    let mut filter = vec!["--source", "active"];
    if let Some(v) = &vmid {
        filter.extend(["--vmid", v.as_str()]);
    }
    loop {
        let list = sim_get(&format!("/nodes/{node}/tasks"), &filter);
        if let Some(t) = list
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == kind && t["status"] == "RUNNING")
        {
            return t["upid"].as_str().unwrap().to_string();
        }
        assert!(
            Instant::now() < until,
            "no running {kind} task on {node} ({filter:?}): {list}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `prefix` followed by a number no earlier run used (the clock's nanoseconds), for a snapshot
/// or a counter a test makes on the host.
pub fn fresh(prefix: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        % 1_000_000_000;
    format!("{prefix}{n}")
}
