//! Honest outcomes (issue 25, item 4): a change whose connection is cut after it was sent
//! ends with exit 11, kind `outcome_unknown` (never a failure or a success guessed), its audit
//! completion says so, and `pxagent reconcile SEQ` finds out what really happened on the host
//! and records it.

use crate::support::*;

/// The `pxagent reconcile N` an outcome_unknown error names.
fn record_of(message: &str) -> String {
    let at = message
        .find("pxagent reconcile ")
        .unwrap_or_else(|| panic!("no record named: {message}"));
    message[at + "pxagent reconcile ".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

#[test]
fn a_change_cut_off_after_sending_is_outcome_unknown_and_reconcile_records_its_end() {
    let _g = lock();
    let _s = sim_reset();
    let b = bed();
    clear_faults();
    let home = Home::new();
    let name = fresh("cut");
    // The snapshot's task runs 4 s in a worker of its own (as a PVE task outlives its CLI).
    fault(&format!(
        r#"{{"match":"--snapname {name}","action":"hold","seconds":4,"times":1}}"#
    ));
    fault(&format!(
        r#"{{"match":"--snapname {name}","action":"detach","times":1}}"#
    ));
    let child = home
        .px()
        .bed()
        .args(["vm", "snapshot", "100", &name, "-o", "json"])
        .spawn();
    // Once the command runs on the host, cut the connection.
    let killed = cut_sessions_when_running(
        &format!("snapname {name}"),
        &b.user,
        std::time::Duration::from_millis(300),
    );
    let r = child.wait();
    assert!(killed, "never saw the snapshot start");
    assert_eq!(r.code, 11, "{}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    assert_eq!(e["kind"], "outcome_unknown", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("may or may not have happened"), "{msg}");
    let seq = record_of(msg);
    // The audit's completion of that record says the same.
    let log = std::fs::read_to_string(home.audit_log()).unwrap();
    let done = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|rec| rec["started"].as_u64() == seq.parse().ok())
        .unwrap_or_else(|| panic!("no completion of {seq}: {log}"));
    assert_eq!(done["exit_code"], 11, "{done}");

    // The task ends on the host all the same; reconcile finds and records that.
    std::thread::sleep(std::time::Duration::from_secs(5));
    clear_faults();
    let r = home
        .px()
        .bed()
        .args(["reconcile", &seq, "-o", "json"])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let d = &r.json()["data"];
    assert_eq!(d["outcome"], "ok", "{d}");
    assert!(d["upid"].as_str().unwrap().contains("qmsnapshot"), "{d}");
    let snaps = sim_get("/nodes/pve1/qemu/100/snapshot", &[]);
    assert!(snaps.to_string().contains(&name), "{snaps}");
    let log = std::fs::read_to_string(home.audit_log()).unwrap();
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["op"], "reconcile", "{last}");
    assert_eq!(last["reconciles"].as_u64(), seq.parse().ok(), "{last}");
    assert_eq!(last["outcome"], "ok", "{last}");
    assert_eq!(home.px().args(["audit", "verify"]).run().code, 0);
    // A record that sent nothing (the reconcile record itself), or none at all: exit 2.
    let own = last["seq"].to_string();
    let r = home
        .px()
        .bed()
        .args(["reconcile", &own, "-o", "json"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stdout);
    let r = home
        .px()
        .bed()
        .args(["reconcile", "999", "-o", "json"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stdout);
}
