//! `pxagent status`: one summary of the host or cluster.

use serde_json::{Value, json};

use super::open;
use crate::base::error::Result;
use crate::base::runtime::runtime;
use crate::catalog::{self, ops};
use crate::config::context::Context;
use crate::engine::Trail;
use crate::output::Output;
use crate::remote::Remote;

/// Print the summary.
pub fn status(ctx: &Context, out: &mut Output, trail: &mut Trail) -> Result<u8> {
    let target = super::resolve(ctx, out, trail)?;
    let data = runtime()?.block_on(async {
        let remote = open(ctx, &target).await?;
        let r = summary(&remote).await;
        remote.session.close().await;
        r
    })?;
    out.success("status", data, human);
    Ok(0)
}

/// The summary's data: version, nodes, storages and guests by state, from three reads sent
/// concurrently over the one connection.
pub async fn summary(remote: &Remote) -> Result<Value> {
    let (version, cluster, resources, gate) = {
        let (v, c, r, g) = tokio::join!(
            remote.read_op(&ops::PVE_VERSION, &[]),
            remote.read_op(&ops::CLUSTER_STATUS, &[]),
            remote.read_op(&ops::CLUSTER_RESOURCES, &[]),
            crate::host::preflight::gate_freeze(remote),
        );
        (v?, c?, r?, g)
    };
    let resources = crate::views::normalize(catalog::View::Resources(None), &resources, None)?;
    let list = resources.as_array().cloned().unwrap_or_default();
    let of = |t: &str| {
        list.iter()
            .filter(|r| r["type"] == t)
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut guests = serde_json::Map::new();
    for g in list
        .iter()
        .filter(|r| r["type"] == "qemu" || r["type"] == "lxc")
    {
        let key = format!(
            "{}_{}",
            if g["type"] == "qemu" { "vm" } else { "ct" },
            g["status"].as_str().unwrap_or("unknown")
        );
        let n = guests.get(&key).and_then(Value::as_u64).unwrap_or(0);
        guests.insert(key, json!(n + 1));
    }
    let cluster_entry = cluster
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["type"] == "cluster")
        .cloned();
    let data = json!({
        "version": version,
        "cluster": cluster_entry,
        "nodes": of("node"),
        "storages": of("storage"),
        "guests": guests,
        "gated": gate.is_some(),
        "frozen": gate.flatten(),
    });
    Ok(data)
}

/// The summary for people.
pub fn human(d: &Value) -> String {
    let mut s = format!(
        "Proxmox VE {}",
        d["version"]["version"].as_str().unwrap_or("?")
    );
    if let Some(c) = d["cluster"].as_object() {
        s.push_str(&format!(
            ", cluster {} ({} nodes, {})",
            c.get("name").and_then(Value::as_str).unwrap_or("?"),
            c.get("nodes").map(|v| v.to_string()).unwrap_or_default(),
            if c.get("quorate").and_then(Value::as_u64) == Some(1) {
                "quorate"
            } else {
                "NOT quorate"
            }
        ));
    }
    if let Some(f) = d["frozen"].as_object() {
        let get = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("?");
        s.push_str(&format!(
            "\nFROZEN by {} since {}: {} (only reads run until {})",
            get("by"),
            get("since"),
            get("reason"),
            get("lift")
        ));
    }
    s.push_str("\n\nNodes\n");
    s.push_str(&crate::views::human(
        catalog::View::Resources(None),
        &d["nodes"],
    ));
    s.push_str("\n\nStorages\n");
    s.push_str(&crate::views::human(
        catalog::View::Resources(None),
        &d["storages"],
    ));
    s.push_str("\n\nGuests\n");
    s.push_str(&crate::views::status::guest_counts(&d["guests"]));
    s
}
