//! The host audit chain (issue 25, item 7): the gate hands each record to the root-side helper,
//! which appends it hash-chained and MAC'd to root's `/var/log/pxagent/gate.jsonl`; `pxagent
//! audit verify --host` checks it through a read operation and finds an edited, deleted,
//! appended or cut-off record.

use serde_json::Value;

use crate::support::*;

const CHAIN: &str = "/var/log/pxagent/gate.jsonl";

/// Moves the host's chain aside for the test and puts it back after, however the test ends.
struct Aside(String);

impl Aside {
    fn new() -> Aside {
        let saved = format!("{CHAIN}.before-test-{}", std::process::id());
        let _ = std::fs::rename(CHAIN, &saved);
        Aside(saved)
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        match std::fs::exists(&self.0) {
            Ok(true) => {
                let _ = std::fs::rename(&self.0, CHAIN);
            }
            _ => {
                let _ = std::fs::remove_file(CHAIN);
            }
        }
    }
}

fn lines() -> Vec<String> {
    std::fs::read_to_string(CHAIN)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write(lines: &[String]) {
    std::fs::write(CHAIN, lines.join("\n") + "\n").unwrap();
}

#[test]
fn audit_verify_host_finds_an_edited_deleted_appended_or_cut_record() {
    let _g = lock();
    let _aside = Aside::new();
    let g = gated();
    let home = Home::new();
    let at = g.log_len();
    for args in [
        &["vm", "status", "100"][..],
        &["vm", "set", "100", "--description", "chained"],
        &["node", "list"],
    ] {
        let r = home.px().gated().args(args).run();
        assert_eq!(r.code, 0, "{args:?}: {}\n{}", r.stdout, r.stderr);
    }
    let host = g
        .env
        .iter()
        .find(|(k, _)| *k == "PXAGENT_HOST")
        .unwrap()
        .1
        .clone();
    let verify = || {
        home.px()
            .gated()
            .args(["audit", "verify", "--host", &host, "-o", "json"])
            .run()
    };
    let r = verify();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let d = r.data();
    let n = d["lines"].as_u64().unwrap();
    assert!(n >= 5, "{d}");

    // Each record: the account sudo ran the helper for, the gate's record with its request id
    // and decision, and the I/O log session of the command that ran.
    let recs: Vec<Value> = lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let set = recs
        .iter()
        .find(|r| r["record"]["op"] == "vm.set")
        .expect("the set's record");
    assert_eq!(set["account"], g.user);
    assert_eq!(set["record"]["decision"], "allowed");
    assert!(set["record"]["request"].as_str().is_some(), "{set}");
    let iolog = set["iolog"].as_str().expect("an I/O log id");
    let session = std::fs::read_to_string(format!("/var/log/sudo-io/{}/{iolog}/log", g.user))
        .unwrap_or_else(|e| panic!("sudo's I/O log session {iolog}: {e}"));
    assert!(
        session.contains("/qemu/100/config") && session.contains("--description chained"),
        "session {iolog} is not the set: {session}"
    );
    // The gate's syslog record carries the chain's head.
    let logged = g.log_since(at);
    assert!(
        logged
            .iter()
            .any(|r| r["op"] == "vm.set" && r["chain_head"].as_str().is_some_and(|h| h.len() == 64)),
        "{logged:?}"
    );

    let good = lines();
    let broken = |what: &str| {
        let r = verify();
        assert_eq!(r.code, 1, "{what}: {}\n{}", r.stdout, r.stderr);
        let e = &r.json()["error"];
        assert_eq!(e["kind"], "findings", "{what}: {e}");
        write(&good);
        e["message"].as_str().unwrap().to_string()
    };
    // Edited: its MAC no longer holds.
    let mut edited = good.clone();
    edited[1] = edited[1].replacen("\"allowed\"", "\"refused\"", 1);
    assert_ne!(edited[1], good[1]);
    write(&edited);
    let m = broken("edited");
    assert!(m.contains("breaks at line 2") && m.contains("mac"), "{m}");
    // Deleted: the next line's seq and prev.
    let mut deleted = good.clone();
    deleted.remove(1);
    write(&deleted);
    let m = broken("deleted");
    assert!(m.contains("breaks at line 2"), "{m}");
    // Appended by someone without the key: a well-formed line, chained, but no valid MAC.
    let mut forged: Value = serde_json::from_str(good.last().unwrap()).unwrap();
    forged["seq"] = (n + 1).into();
    forged["prev"] = sha2_hex(good.last().unwrap()).into();
    let mut appended = good.clone();
    appended.push(forged.to_string());
    write(&appended);
    let m = broken("appended");
    assert!(m.contains(&format!("breaks at line {}", n + 1)), "{m}");
    // Cut off the end: the chain alone holds, the head kept here does not.
    write(&good[..good.len() - 2]);
    let m = broken("cut");
    assert!(m.contains("fewer than"), "{m}");
    // Restored, it verifies again.
    let r = verify();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// SHA-256 of a line, as hex (through sha256sum: the tests have no hashing crate of their own).
fn sha2_hex(line: &str) -> String {
    use std::io::Write;
    let mut c = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(line.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}
