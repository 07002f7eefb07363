//! The kill switch on the gated bed (issue 25, item 2): root's freeze file and an approver's
//! signed freeze stop every change, confirm and exec operation with exit 3, kind `frozen`,
//! while reads go on; a signed thaw (or root) lifts it, and an old thaw never lifts a newer
//! freeze. Every test holds the host lock and leaves the bed unfrozen.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::*;

/// The gated bed's freeze file and control directory (`scripts/testbed.sh env`).
fn switch() -> (PathBuf, PathBuf) {
    let get = |k: &str| {
        PathBuf::from(std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is not set: run scripts/test.sh (the gated bed's env names it)")
        }))
    };
    (
        get("PXAGENT_GATED_TESTBED_FREEZE"),
        get("PXAGENT_GATED_TESTBED_GATE_CONTROL"),
    )
}

/// Removes the freeze file and every signed record on drop: the bed is never left frozen.
struct Thawed(PathBuf, PathBuf);

impl Drop for Thawed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        for e in std::fs::read_dir(&self.1).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn gated_run(home: &Home, args: &[&str]) -> Run {
    home.px().gated().args(args).run()
}

/// `pxagent ARGS -o json --key KEY` on the gated bed, from `home`.
fn signed(home: &Home, key: &std::path::Path, args: &[&str]) -> Run {
    home.px()
        .gated()
        .args(args)
        .args(["-o", "json", "--key"])
        .arg_path(key)
        .run()
}

fn assert_frozen(r: &Run, reason: &str) {
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    assert_eq!(e["kind"], "frozen", "{e}");
    assert_eq!(e["source"], "host", "{e}");
    assert!(e["message"].as_str().unwrap_or("").contains(reason), "{e}");
}

#[test]
fn the_freeze_file_stops_changes_confirms_and_execs_and_reads_go_on() {
    let _g = lock();
    let _s = sim_reset();
    let g = gated();
    let (file, control) = switch();
    let _t = Thawed(file.clone(), control);
    let home = Home::new();
    std::fs::write(&file, "incident 7: storage array degraded\nmore text\n").unwrap();
    let sent = sudo_log_len();

    let r = gated_run(&home, &["vm", "start", "103", "-o", "json"]);
    assert_frozen(&r, "incident 7: storage array degraded");
    assert_eq!(r.json()["error"]["exit_code"], 3);
    let r = gated_run(
        &home,
        &[
            "vm",
            "stop",
            "101",
            "--confirm",
            "yes stop 101",
            "-o",
            "json",
        ],
    );
    assert_frozen(&r, "incident 7");
    let r = gated_run(&home, &["vm", "snapshot", "100", "frozen1", "-o", "json"]);
    assert_frozen(&r, "incident 7");
    // Nothing of it reached sudo; the host audit says why.
    assert_not_sent(sent, &["status/start", "status/stop", "frozen1"]);
    let log = std::fs::read_to_string(&g.log).unwrap();
    assert!(
        log.contains("\"kind\":\"frozen\""),
        "no frozen refusal logged"
    );

    // Reads go on, and say the host is frozen.
    let r = gated_run(&home, &["vm", "status", "103", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = gated_run(&home, &["status", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d = &r.json()["data"];
    assert_eq!(d["gated"], true, "{d}");
    assert_eq!(d["frozen"]["by"], "root", "{d}");
    assert!(
        d["frozen"]["reason"]
            .as_str()
            .unwrap()
            .contains("incident 7"),
        "{d}"
    );
    let r = gated_run(&home, &["preflight", "-o", "json"]);
    let checks = r.json()["data"]["checks"].clone();
    let frozen = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "frozen")
        .unwrap_or_else(|| panic!("{}", r.stdout))
        .clone();
    assert_eq!(frozen["status"], "warn", "{frozen}");

    // Root lifts it: the same start runs.
    std::fs::remove_file(&file).unwrap();
    let r = gated_run(&home, &["vm", "start", "103", "-o", "json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let r = gated_run(&home, &["status", "-o", "json"]);
    assert_eq!(r.json()["data"]["frozen"], Value::Null, "{}", r.stdout);
}

#[test]
fn an_approver_freezes_and_thaws_from_another_client_without_root() {
    let _g = lock();
    let _s = sim_reset();
    let g = gated();
    let (file, control) = switch();
    let _t = Thawed(file, control.clone());
    let agent = Home::new();
    let approver = Home::new();

    // Without a key: the statement to sign, nothing frozen.
    let r = gated_run(
        &approver,
        &["freeze", "--reason", "audit at 14:00", "-o", "json"],
    );
    assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
    let st = r.json()["error"]["approval_request"]["statement"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", r.stdout))
        .to_string();
    assert!(
        st.contains("op: host.freeze") && st.contains("arg reason: \"audit at 14:00\""),
        "{st}"
    );
    // Signed by a key that is no approver's (the agent's own): refused, not frozen.
    let own = std::env::var("PXAGENT_GATED_IDENTITY").unwrap();
    let r = signed(
        &approver,
        std::path::Path::new(&own),
        &["freeze", "--reason", "mine"],
    );
    assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["error"]["reason"], "unlisted_key", "{}", r.stdout);
    let r = gated_run(
        &agent,
        &["vm", "snapshot", "100", "notfrozen", "-o", "json"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    // Signed by the approver: frozen for every client.
    let r = signed(
        &approver,
        &g.approver_key,
        &["freeze", "--reason", "audit at 14:00"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["data"]["frozen"]["reason"], "audit at 14:00");
    let r = gated_run(&agent, &["vm", "start", "103", "-o", "json"]);
    assert_frozen(&r, "audit at 14:00");
    let r = gated_run(&agent, &["vm", "status", "103", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    // A signed thaw lifts it.
    let r = signed(&approver, &g.approver_key, &["thaw"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["data"]["thawed"].as_array().map(Vec::len), Some(1));
    assert_eq!(r.json()["data"]["frozen"], Value::Null, "{}", r.stdout);
    let r = gated_run(&agent, &["vm", "start", "103", "-o", "json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    // A newer freeze is not lifted by the old thaw, even when its record reappears.
    let r = signed(
        &approver,
        &g.approver_key,
        &["freeze", "--reason", "second"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let thaw = std::fs::read_dir(&control)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("thaw-"))
        .unwrap()
        .path();
    std::fs::copy(
        &thaw,
        control.join(format!("thaw-{}.json", "ab".repeat(16))),
    )
    .unwrap();
    let r = gated_run(&agent, &["vm", "shutdown", "103", "-o", "json"]);
    assert_frozen(&r, "second");
    // A thaw with nothing of an approver's in force changes nothing and says so.
    let r = signed(&approver, &g.approver_key, &["thaw"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let r = signed(&approver, &g.approver_key, &["thaw"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["data"]["thawed"],
        serde_json::json!([]),
        "{}",
        r.stdout
    );
}
