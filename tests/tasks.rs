//! `task wait` and `task stop` on the bed: a task followed to its end (exit 0), a failed one (exit
//! 1), one still running at `--timeout` (exit 7), and a running backup stopped on its node (it ends
//! `interrupted by signal`, no archive). The held-running tasks come from the simulator's `hold`
//! fault.

use serde_json::Value;

use crate::support::{Home, clear_faults, fault, lock, node_of, running_task};

#[test]
fn task_wait_follows_a_task_to_its_end() {
    let _g = lock();
    let home = Home::new();
    let snap = format!("tw{}", std::process::id());
    let r = home.on_bed(&["--no-wait", "vm", "snapshot", "100", &snap]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let upid = r.stdout.trim().to_string();
    let r = home.on_bed(&["task", "wait", &upid, "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let data = r.data();
    assert_eq!(data["status"], "stopped", "{data:#}");
    assert_eq!(data["exitstatus"], "OK", "{data:#}");
    let human = home.on_bed(&["task", "wait", &upid]);
    assert_eq!(human.stdout.trim(), format!("task {upid}: OK"));
    let phrase = format!("yes delsnapshot 100 {snap}");
    let r = home.on_bed(&["vm", "delsnapshot", "100", &snap, "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn task_stop_ends_a_running_backup_and_task_wait_reports_it() {
    let _g = lock();
    clear_faults();
    fault(r#"{"match":"vzdump --vmid 101","action":"hold","seconds":90,"times":1}"#);
    let home = Home::new();
    let node = node_of(101);
    let archives = || -> Vec<Value> {
        let r = Home::new().on_bed(&["backup", "list", "--vmid", "101", "-o", "json"]);
        r.data().as_array().unwrap().clone()
    };
    let before = archives();
    let r = home.on_bed(&["--no-wait", "backup", "create", "101"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let upid = r.stdout.trim().to_string();
    assert_eq!(upid, running_task(&node, "vzdump", Some(101)));
    // Still running at the timeout: exit 7, and the message says how to go on.
    let r = home.on_bed(&["--timeout", "2", "task", "wait", &upid]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(r.stderr.contains("still running after 2s"), "{}", r.stderr);
    assert!(r.stderr.contains("task stop"), "{}", r.stderr);
    // Stopped on its node; waiting for it then tells how it ended: exit 1.
    let r = home.on_bed(&["task", "stop", &upid, "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let argv = r.stderr.clone();
    let r = home.on_bed(&["task", "wait", &upid, "-o", "json"]);
    clear_faults();
    assert_eq!(r.code, 1, "{}", r.stdout);
    let e = &r.json()["error"];
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("interrupted by signal"),
        "{e:#} {argv}"
    );
    assert_eq!(archives(), before, "a stopped backup left an archive");
    // The stop went to the task's own node (the audit record's argv).
    let out = home.px().args(["audit", "show", "-o", "json"]).run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let stop = doc["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|rec| rec["op"] == "task.stop")
        .expect("the stop is audited")
        .clone();
    let words: Vec<&str> = stop["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        words[2..5],
        [
            "/usr/bin/pvesh",
            "delete",
            &*format!("/nodes/{node}/tasks/{upid}")
        ]
    );
}
