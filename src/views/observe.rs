//! Views of the observation reads: a VM's network interfaces as its QEMU
//! guest agent reports them (`vm ips`), and RRD metrics history (`vm rrd`, `ct rrd`,
//! `node rrd`). [`crate::views`] hands these two views here; both parse leniently, like the
//! rest of the views (numbers may come as strings, keys may be missing).
//!
//! Shapes: `network-get-interfaces` is `{"result":[{"name","hardware-address"?,
//! "ip-addresses"?:[{"ip-address","ip-address-type","prefix"}],"statistics"?}]}` (qemu
//! `qga/qapi-schema.json` GuestNetworkInterface, wrapped in `result` by qemu-server
//! `API2/Qemu/Agent.pm`); `rrddata` is an array of `{"time":T, <source>:value…}` whose
//! sources depend on the RRD file (pve-cluster `PVE::RRD::create_rrd_data`, pmxcfs
//! `status.c`); a source with no value in a step is absent from that row.

use serde_json::{Value, json};

use crate::base::error::{Error, Result};
use crate::base::time::human_utc;
use crate::output::table;
use crate::views::bytes;

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(|v| {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    })
}

/// `network-get-interfaces` as typed data: one entry per interface with `name`, `mac`,
/// `ipv4` and `ipv6` (bare addresses), `addresses` (with type and prefix), `loopback`, and
/// the agent's `statistics` when it sent them. Every interface is kept (loopback too); the
/// human view leaves loopback out.
pub fn interfaces(data: &Value) -> Result<Value> {
    let list = data
        .get("result")
        .and_then(Value::as_array)
        .or_else(|| data.as_array())
        .ok_or_else(|| {
            Error::Remote(format!(
                "unexpected network-get-interfaces answer from the host: {data}"
            ))
        })?;
    let mut out = Vec::new();
    for iface in list {
        let name = iface.get("name").and_then(Value::as_str).unwrap_or("");
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        let mut addrs = Vec::new();
        for a in iface
            .get("ip-addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(addr) = a.get("ip-address").and_then(Value::as_str) else {
                continue;
            };
            let kind = a
                .get("ip-address-type")
                .and_then(Value::as_str)
                .unwrap_or(if addr.contains(':') { "ipv6" } else { "ipv4" });
            match kind {
                "ipv6" => v6.push(addr.to_string()),
                _ => v4.push(addr.to_string()),
            }
            let mut e = json!({"address": addr, "type": kind});
            if let Some(p) = num(a.get("prefix")) {
                e["prefix"] = json!(p as u64);
            }
            addrs.push(e);
        }
        let loopback = name == "lo"
            || (!addrs.is_empty()
                && addrs.iter().all(|a| {
                    let s = a["address"].as_str().unwrap_or("");
                    s.starts_with("127.") || s == "::1"
                }));
        let mut e = json!({
            "name": name,
            "ipv4": v4,
            "ipv6": v6,
            "addresses": addrs,
            "loopback": loopback,
        });
        if let Some(mac) = iface.get("hardware-address").and_then(Value::as_str) {
            e["mac"] = json!(mac);
        }
        if let Some(stats) = iface.get("statistics") {
            e["statistics"] = stats.clone();
        }
        out.push(e);
    }
    Ok(Value::Array(out))
}

/// The interfaces for people: name, MAC and addresses with their prefix, loopback left out.
pub fn interfaces_human(data: &Value) -> String {
    let rows: Vec<Vec<String>> = data
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["loopback"] != true)
        .map(|i| {
            let list = |kind: &str| -> String {
                i["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|a| a["type"] == kind)
                    .map(|a| match a["prefix"].as_u64() {
                        Some(p) => format!("{}/{p}", a["address"].as_str().unwrap_or("")),
                        None => a["address"].as_str().unwrap_or("").to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            vec![
                i["name"].as_str().unwrap_or("").to_string(),
                i["mac"].as_str().unwrap_or("").to_string(),
                list("ipv4"),
                list("ipv6"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no interfaces but loopback (is the guest's network up?)".into();
    }
    table(&["NAME", "MAC", "IPV4", "IPV6"], &rows)
}

/// `rrddata` rows, oldest first (the raw values are kept for `-o json`).
pub fn rrd(data: &Value) -> Result<Value> {
    let mut rows = data
        .as_array()
        .cloned()
        .ok_or_else(|| Error::Remote(format!("unexpected rrddata answer from the host: {data}")))?;
    rows.sort_by(|a, b| {
        num(a.get("time"))
            .partial_cmp(&num(b.get("time")))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(Value::Array(rows))
}

/// How a metric reads for people.
#[derive(Clone, Copy)]
enum Unit {
    /// A fraction of 1: `0.25` is 25%.
    Fraction,
    /// Already a percentage (pressure stall averages).
    Percent,
    /// Bytes.
    Bytes,
    /// Bytes per second.
    Rate,
    /// A plain number (load average, CPU count).
    Plain,
}

/// The metrics the RRD files hold (pmxcfs `status.c`: `pve-node-9.0` and `pve-vm-9.0`), in
/// the order people read them; sizes that are limits come after what they limit.
const METRICS: &[(&str, Unit)] = &[
    ("cpu", Unit::Fraction),
    ("maxcpu", Unit::Plain),
    ("loadavg", Unit::Plain),
    ("iowait", Unit::Fraction),
    ("mem", Unit::Bytes),
    ("maxmem", Unit::Bytes),
    ("memhost", Unit::Bytes),
    ("memused", Unit::Bytes),
    ("memavailable", Unit::Bytes),
    ("memtotal", Unit::Bytes),
    ("arcsize", Unit::Bytes),
    ("swapused", Unit::Bytes),
    ("swaptotal", Unit::Bytes),
    ("disk", Unit::Bytes),
    ("maxdisk", Unit::Bytes),
    ("rootused", Unit::Bytes),
    ("roottotal", Unit::Bytes),
    ("netin", Unit::Rate),
    ("netout", Unit::Rate),
    ("diskread", Unit::Rate),
    ("diskwrite", Unit::Rate),
    ("pressurecpusome", Unit::Percent),
    ("pressurecpufull", Unit::Percent),
    ("pressureiosome", Unit::Percent),
    ("pressureiofull", Unit::Percent),
    ("pressurememorysome", Unit::Percent),
    ("pressurememoryfull", Unit::Percent),
];

fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Fraction => format!("{:.1}%", v * 100.0),
        Unit::Percent => format!("{v:.1}%"),
        Unit::Bytes => bytes(v),
        Unit::Rate => format!("{}/s", bytes(v)),
        Unit::Plain if v.fract() == 0.0 => format!("{v:.0}"),
        Unit::Plain => format!("{v:.2}"),
    }
}

/// The history for people: its span and step, then one line per metric with its last,
/// smallest, mean and largest value over the steps that have one.
pub fn rrd_human(data: &Value) -> String {
    let rows: Vec<&Value> = data.as_array().into_iter().flatten().collect();
    let times: Vec<u64> = rows
        .iter()
        .filter_map(|r| num(r.get("time")).map(|t| t as u64))
        .collect();
    let (Some(first), Some(last)) = (times.first(), times.last()) else {
        return "no metrics recorded for this time frame".into();
    };
    let step = match times.as_slice() {
        [a, b, ..] => format!(", every {}s", b.saturating_sub(*a)),
        _ => String::new(),
    };
    let mut out = format!(
        "{} steps from {} to {}{step}\n",
        rows.len(),
        human_utc(*first),
        human_utc(*last)
    );
    let mut lines = Vec::new();
    for (name, unit) in METRICS {
        let vals: Vec<f64> = rows.iter().filter_map(|r| num(r.get(*name))).collect();
        let Some(latest) = vals.last() else {
            continue;
        };
        let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let avg = vals.iter().sum::<f64>() / vals.len() as f64;
        lines.push(vec![
            name.to_string(),
            show(*unit, *latest),
            show(*unit, min),
            show(*unit, avg),
            show(*unit, max),
        ]);
    }
    if lines.is_empty() {
        out.push_str("no values in these steps (was it running?)");
        return out;
    }
    out.push_str(&table(&["METRIC", "LAST", "MIN", "AVG", "MAX"], &lines));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        serde_json::from_str(&crate::base::testing::fixture(&format!("pve/{name}"))).unwrap()
    }

    #[test]
    fn agent_interfaces_keep_every_address_and_hide_loopback_from_people() {
        let raw = fixture("qga_network_get_interfaces_schema_sample.json");
        let v = interfaces(&raw).unwrap();
        let list = v.as_array().unwrap();
        assert_eq!(list[0]["name"], "lo");
        assert_eq!(list[0]["loopback"], true);
        let eth = &list[1];
        assert_eq!(eth["loopback"], false);
        assert_eq!(eth["ipv4"], json!(["192.168.122.104"]));
        assert_eq!(eth["addresses"][0]["prefix"], 24);
        assert!(eth["mac"].is_string());
        let text = interfaces_human(&v);
        assert!(text.contains("192.168.122.104/24"), "{text}");
        assert!(!text.contains("127.0.0.1"), "{text}");
        // A prefix sent as a string, no type, no MAC: still read.
        let odd = json!({"result":[{"name":"ens18","ip-addresses":[{"ip-address":"10.0.0.5","prefix":"16"}]}]});
        let v = interfaces(&odd).unwrap();
        assert_eq!(v[0]["ipv4"], json!(["10.0.0.5"]));
        assert_eq!(v[0]["addresses"][0]["prefix"], 16);
        assert!(interfaces(&json!("nonsense")).is_err());
    }

    #[test]
    fn real_node_rrd_row_reads_with_units() {
        let raw = fixture("https_api_node_rrddata_pve9_capture.json");
        let rows = rrd(&raw["data"]).unwrap();
        let text = rrd_human(&rows);
        assert!(text.starts_with("1 steps from 2025-12-17"), "{text}");
        // cpu is a fraction of the node's CPUs; memory in binary units; network per second.
        assert!(text.contains("2.8%"), "{text}");
        assert!(text.contains("GiB"), "{text}");
        assert!(text.contains("KiB/s"), "{text}");
        assert!(!text.contains("135038619648"), "{text}");
    }

    #[test]
    fn history_is_sorted_and_summarised() {
        let raw = json!([
            {"time": 120, "cpu": 0.5, "netin": 2048.0},
            {"time": 60, "cpu": 0.25},
            {"time": 180}
        ]);
        let rows = rrd(&raw).unwrap();
        assert_eq!(rows[0]["time"], 60);
        let text = rrd_human(&rows);
        assert!(
            text.contains("3 steps") && text.contains("every 60s"),
            "{text}"
        );
        let cpu = text.lines().find(|l| l.starts_with("cpu")).unwrap();
        // last, min, avg, max over the steps that have a value
        assert!(
            cpu.contains("50.0%") && cpu.contains("25.0%") && cpu.contains("37.5%"),
            "{cpu}"
        );
        assert!(text.contains("2.0 KiB/s"), "{text}");
        assert_eq!(
            rrd_human(&json!([])),
            "no metrics recorded for this time frame"
        );
    }
}
