//! `pxagent health` on the bed: a healthy cluster is exit 0; a failed
//! service, a disk failing SMART, a node offline and a failed task are each a finding with its
//! severity and a command that shows more (exit 5, kind `unhealthy`), on the plain bed and
//! through the gate; a read the local policy denies is listed as not checked. And `cluster
//! tasks` with its client-side filters: `--errors`, `--since`, `--vmid`, `--limit`. And
//! `--all-nodes` on node-scoped reads.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::support::{Home, clear_faults, fault, lock, sim};

/// Mends every node when dropped, so a failing assertion leaves no broken node behind.
struct Mend;

impl Drop for Mend {
    fn drop(&mut self) {
        for n in ["pve1", "pve2", "pve3"] {
            let _ = std::process::Command::new("/usr/local/lib/pve-sim/pve-sim")
                .args(["break", n, "none"])
                .status();
        }
        clear_faults();
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A start time later than any task an earlier test made (task times are whole seconds).
fn fresh_second() -> String {
    std::thread::sleep(std::time::Duration::from_millis(1100));
    now().to_string()
}

fn findings(doc: &Value) -> Vec<Value> {
    doc["data"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn find<'a>(list: &'a [Value], check: &str, subject: &str) -> &'a Value {
    list.iter()
        .find(|f| f["check"] == check && f["subject"] == subject)
        .unwrap_or_else(|| panic!("no {check} finding for {subject}: {list:#?}"))
}

#[test]
fn health_finds_what_is_wrong_and_names_the_command_that_shows_more() {
    let _g = lock();
    let _mend = Mend;
    let home = Home::new();
    let t0 = fresh_second();

    // A healthy cluster: every check made, nothing above info (the pending updates).
    let r = home.on_bed(&["health", "--since", &t0, "-o", "json"]);
    let data = r.data();
    assert_eq!(data["healthy"], true, "{data:#}");
    for check in [
        "quorum", "nodes", "storage", "tasks", "ha", "services", "smart", "updates",
    ] {
        assert!(
            data["checked"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == check),
            "{check}: {data:#}"
        );
    }
    assert!(
        findings(&r.json()).iter().all(|f| f["severity"] == "info"),
        "{data:#}"
    );
    assert!(
        findings(&r.json()).iter().any(|f| f["check"] == "updates"),
        "{data:#}"
    );

    // Break four things.
    fault(
        r#"{"match":"qemu/103/status/start","action":"fail","message":"start failed: QEMU exited with code 1","times":1}"#,
    );
    assert_eq!(home.on_bed(&["vm", "start", "103"]).code, 1);
    sim(&["break", "pve2", "service", "pvestatd"]);
    sim(&["break", "pve1", "disk", "/dev/sda"]);
    let down = "pve3";
    sim(&["break", down, "offline"]);

    for gate in [false, true] {
        let px = if gate {
            home.px().gated()
        } else {
            home.px().bed()
        };
        let r = px.args(["health", "--since", &t0, "-o", "json"]).run();
        assert_eq!(r.code, 5, "gate {gate}: {}\n{}", r.stdout, r.stderr);
        let doc = r.json();
        assert_eq!(doc["ok"], false);
        assert_eq!(doc["error"]["kind"], "unhealthy", "{doc:#}");
        assert_eq!(doc["data"]["healthy"], false);
        let list = findings(&doc);
        let f = find(&list, "services", "pvestatd");
        assert_eq!(
            (f["severity"].as_str(), f["node"].as_str()),
            (Some("warning"), Some("pve2"))
        );
        assert_eq!(f["more"], "pxagent node service pve2 pvestatd");
        let f = find(&list, "smart", "/dev/sda");
        assert_eq!(f["severity"], "critical");
        assert_eq!(f["more"], "pxagent node smart pve1 /dev/sda");
        let f = find(&list, "nodes", down);
        assert_eq!(f["severity"], "critical");
        let task = list
            .iter()
            .find(|f| {
                f["check"] == "tasks" && f["message"].as_str().unwrap().contains("qmstart 103")
            })
            .unwrap_or_else(|| panic!("{list:#?}"));
        assert_eq!(task["severity"], "warning");
        let upid = task["subject"].as_str().unwrap().to_string();
        assert_eq!(task["more"], format!("pxagent task log {upid}"));
        // Worst first; the offline node's own reads are not attempted.
        let rank = |s: &Value| {
            ["critical", "warning", "info"]
                .iter()
                .position(|x| s == x)
                .unwrap()
        };
        assert!(
            list.windows(2)
                .all(|w| rank(&w[0]["severity"]) <= rank(&w[1]["severity"])),
            "{list:#?}"
        );
        assert!(
            !list
                .iter()
                .any(|f| f["check"] == "updates" && f["node"] == down),
            "{list:#?}"
        );
        assert_eq!(doc["data"]["unchecked"], serde_json::json!([]), "{doc:#}");

        // Each "more" is a command that runs and shows the finding.
        for f in [
            find(&list, "services", "pvestatd"),
            find(&list, "smart", "/dev/sda"),
            task,
        ] {
            let words: Vec<&str> = f["more"].as_str().unwrap().split(' ').skip(1).collect();
            let mut args = words.clone();
            args.extend(["-o", "json"]);
            let r = home.on_bed(&args);
            assert_eq!(r.code, 0, "{words:?}: {}", r.stderr);
            let shown = r.stdout;
            assert!(
                shown.contains("failed") || shown.contains("FAILED"),
                "{words:?}: {shown}"
            );
        }
    }

    // For people: one line per finding, the exit code the same.
    let r = home.on_bed(&["health", "--since", &t0]);
    assert_eq!(r.code, 5);
    assert!(r.stdout.starts_with("unhealthy: "), "{}", r.stdout);
    assert!(r.stdout.contains("CRITICAL  smart"), "{}", r.stdout);

    // A read the local policy denies is not checked, and says why.
    home.write("deny.yaml", b"ops:\n  node.updates: deny\n");
    let r = home.on_bed(&[
        "--policy",
        "deny.yaml",
        "health",
        "--since",
        &t0,
        "-o",
        "json",
    ]);
    let doc = r.json();
    let unchecked = doc["data"]["unchecked"].as_array().unwrap();
    assert!(
        unchecked
            .iter()
            .any(|u| u["check"] == "updates" && u["reason"].as_str().unwrap().contains("policy")),
        "{doc:#}"
    );
    assert!(
        !findings(&doc).iter().any(|f| f["check"] == "updates"),
        "{doc:#}"
    );

    // Mended, and the failed task left out by --since: healthy again.
    drop(_mend);
    let r = home.on_bed(&["health", "--since", &(now() + 1).to_string(), "-o", "json"]);
    assert_eq!(r.data()["healthy"], true, "{}", r.stdout);
}

#[test]
fn cluster_tasks_filters_apply_to_the_answer_newest_first() {
    let _g = lock();
    let _mend = Mend;
    let home = Home::new();
    let t0 = fresh_second();
    fault(
        r#"{"match":"qemu/103/status/start","action":"fail","message":"start failed: QEMU exited with code 1","times":1}"#,
    );
    assert_eq!(home.on_bed(&["vm", "start", "103"]).code, 1);
    let all = home.on_bed(&["cluster", "tasks", "-o", "json"]).data();
    let all = all.as_array().unwrap();
    let starts: Vec<u64> = all
        .iter()
        .map(|t| t["starttime"].as_u64().unwrap())
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {starts:?}"
    );
    assert!(all.iter().all(|t| t["failed"].is_boolean()));

    let errors = home
        .on_bed(&["cluster", "tasks", "--errors", "--since", &t0, "-o", "json"])
        .data();
    let errors = errors.as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(
        (errors[0]["id"].as_str(), errors[0]["failed"].as_bool()),
        (Some("103"), Some(true))
    );
    let one = home
        .on_bed(&[
            "cluster", "tasks", "--vmid", "103", "--limit", "1", "-o", "json",
        ])
        .data();
    assert_eq!(one.as_array().unwrap().len(), 1);
    assert_eq!(one[0]["upid"], errors[0]["upid"]);
    // The filters never travel: the host runs the one `pvesh get /cluster/tasks`.
    let r = home.on_bed(&[
        "cluster",
        "tasks",
        "--errors",
        "--limit",
        "2",
        "--dry-run",
        "-o",
        "json",
    ]);
    let command = r.data()["command"].as_str().unwrap().to_string();
    assert!(command.contains("pvesh get /cluster/tasks"), "{command}");
    assert!(
        !command.contains("errors") && !command.contains("limit"),
        "{command}"
    );
    // Through the gate too.
    let r = home
        .px()
        .gated()
        .args(["cluster", "tasks", "--errors", "--since", &t0, "-o", "json"])
        .run();
    assert_eq!(r.data().as_array().unwrap().len(), 1, "{}", r.stdout);
}

#[test]
fn all_nodes_runs_a_node_read_on_every_online_node_over_one_connection() {
    let _g = lock();
    let _mend = Mend;
    let home = Home::new();
    let doc = home
        .on_bed(&["node", "services", "--all-nodes", "-o", "json"])
        .json();
    assert_eq!(doc["ok"], true, "{doc:#}");
    assert_eq!(doc["op"], "node.services");
    let nodes = doc["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(names, ["pve1", "pve2", "pve3"]);
    assert!(
        nodes
            .iter()
            .all(|n| n["ok"] == true && n["data"].as_array().unwrap().len() > 20),
        "{doc:#}"
    );

    // An offline node is listed, not asked; the others answer; exit 1 for the one missing.
    sim(&["break", "pve3", "offline"]);
    let before = crate::support::sudo_log_len();
    let r = home.on_bed(&["storage", "list", "--all-nodes", "-o", "json"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let doc = r.json();
    let pve3 = &doc["nodes"][2];
    assert_eq!(
        (pve3["node"].as_str(), pve3["ok"].as_bool()),
        (Some("pve3"), Some(false))
    );
    assert_eq!(pve3["error"]["kind"], "wrong_state", "{doc:#}");
    assert!(
        doc["nodes"][0]["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["storage"] == "local")
    );
    let sent = crate::support::sudo_commands_since(before);
    assert!(
        sent.iter().any(|c| c.contains("/nodes/pve2/storage")),
        "{sent:#?}"
    );
    assert!(
        !sent.iter().any(|c| c.contains("/nodes/pve3/")),
        "{sent:#?}"
    );
    // For people: a block per node and a summary.
    let r = home.on_bed(&["node", "disks", "--all-nodes"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("== pve1\n") && r.stdout.contains("== pve2\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .ends_with("2 of 3 nodes ok; failed: pve3 (wrong_state)\n"),
        "{}",
        r.stdout
    );

    // Through the gate, each node's line is judged as if asked alone.
    let r = home
        .px()
        .gated()
        .args(["node", "updates", "--all-nodes", "-o", "json"])
        .run();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["nodes"][1]["ok"], true, "{}", r.stdout);

    // Only node-scoped reads take it, and never beside a node.
    for args in [
        &["vm", "start", "100", "--all-nodes"][..],
        &["node", "status", "pve1", "--all-nodes"],
        &["storage", "list", "--node", "pve1", "--all-nodes"],
    ] {
        let r = home.on_bed(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
    }
}

/// An unknown node is `not_found`, like an unknown VMID.
#[test]
fn an_unknown_node_is_not_found() {
    let home = Home::new();
    for args in [
        &["node", "status", "pve9"][..],
        &["vm", "status", "100", "--node", "pve9"],
        &["storage", "list", "--node", "pve9"],
    ] {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let r = home.on_bed(&a);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stdout);
        assert_eq!(
            r.json()["error"]["kind"],
            "not_found",
            "{args:?}: {}",
            r.stdout
        );
    }
}
