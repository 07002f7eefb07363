//! Live tests of what scripts and agents rely on against the sandbox host: actions with nothing to
//! do (`changed: false`, nothing sent but the status read), bare values (`cluster nextid`, the UPID
//! of `--no-wait`, a backup's archive), guests by name and list filters, `exec --exit-code`, and
//! backups of containers through the CLI and over MCP. Like `live.rs`, these FAIL (never skip)
//! without the bed's `PXAGENT_*` variables.
//!
//! Every test that changes the simulator holds the one host [`lock`] and leaves its guests as
//! it found them.

use serde_json::Value;

use crate::support::{Home, backups, lock, sim_get, status_of};

/// Whether `s` is a UPID and nothing else (FORMATS.md §1.4).
fn is_upid(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    s.starts_with("UPID:")
        && parts.len() == 9
        && parts[8].is_empty()
        && !s.contains(char::is_whitespace)
}

/// The command lines one `-vv` run logged as sent (its own, unlike sudo's log, which other
/// tests write to at the same time).
fn remote_commands(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("remote command"))
        .map(String::from)
        .collect()
}

#[test]
fn start_twice_and_stop_twice_change_nothing_the_second_time() {
    // Done-when: `vm start 100` twice ends with exit 0 and `"changed": false`. VM 103
    // (`archive`) lives on pve3, stopped; the first start runs, the second reads only.
    let _g = lock();
    let home = Home::new();
    let px = |a: &[&str]| home.on_bed(a);
    if status_of(103) == "running" {
        assert_eq!(px(&["vm", "shutdown", "103"]).code, 0);
    }
    let first = px(&["vm", "start", "103", "-o", "json"]).data();
    assert_eq!(first["changed"], true, "{first}");
    assert!(first["upid"].as_str().unwrap().contains(":qmstart:103:"));

    let r = px(&["-vv", "vm", "start", "103", "-o", "json"]);
    let second = r.data();
    assert_eq!(second["changed"], false, "{second}");
    assert_eq!(second["status"], "running");
    let sent = remote_commands(&r.stderr);
    assert_eq!(
        sent.len(),
        2,
        "the node lookup and the status read: {sent:?}"
    );
    assert!(sent[0].contains("/cluster/resources"), "{sent:?}");
    assert!(
        sent[1].contains("/nodes/pve3/qemu/103/status/current"),
        "{sent:?}"
    );
    let human = px(&["vm", "start", "103"]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("already running"), "{}", human.stdout);

    // `vm stop` of a stopped VM needs no phrase (nothing happens); of a running one it does.
    let r = px(&["vm", "stop", "103", "-o", "json"]);
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert_eq!(status_of(103), "running");
    assert_eq!(
        px(&["vm", "shutdown", "103", "-o", "json"]).data()["changed"],
        true
    );
    let r = px(&["vm", "stop", "103", "-o", "json"]);
    assert_eq!(r.data()["changed"], false);
    assert_eq!(status_of(103), "stopped");
}

#[test]
fn nextid_prints_only_digits() {
    let r = Home::new().on_bed(&["cluster", "nextid"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = r.stdout.trim_end_matches('\n');
    assert!(
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()),
        "{:?}",
        r.stdout
    );
    let data = Home::new()
        .on_bed(&["cluster", "nextid", "-o", "json"])
        .data();
    assert!(data.is_u64(), "a JSON number: {data}");
    assert_eq!(data.as_u64().unwrap().to_string(), text);
}

#[test]
fn no_wait_prints_only_the_upid() {
    // Done-when: `pxagent --no-wait vm snapshot 100 x` prints only `UPID:…`.
    let _g = lock();
    let home = Home::new();
    let snap = format!("nw{}", std::process::id());
    let r = home.on_bed(&["--no-wait", "vm", "snapshot", "100", &snap]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let upid = r.stdout.strip_suffix('\n').unwrap_or(&r.stdout);
    assert!(is_upid(upid), "stdout is not just a UPID: {:?}", r.stdout);
    assert!(upid.contains(":qmsnapshot:100:"), "{upid}");
    assert!(
        r.stderr.contains("started task"),
        "the sentence goes to stderr: {}",
        r.stderr
    );
    // Wait for the follower's snapshot, then take it away again.
    let has = || {
        sim_get("/nodes/pve1/qemu/100/snapshot", &[])
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == snap.as_str())
    };
    for _ in 0..100 {
        if has() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(has(), "the follower did not take the snapshot");
    let phrase = format!("yes delsnapshot 100 {snap}");
    let r = home.on_bed(&["vm", "delsnapshot", "100", &snap, "--confirm", &phrase]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A no-op has no task: nothing on stdout, the sentence on stderr.
    if status_of(100) != "running" {
        assert_eq!(home.on_bed(&["vm", "start", "100"]).code, 0);
    }
    let r = home.on_bed(&["--no-wait", "vm", "start", "100"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "", "{}", r.stderr);
    assert!(r.stderr.contains("already running"), "{}", r.stderr);
}

#[test]
fn guests_by_name_and_list_filters() {
    // Done-when: `vm status web` is VM 100 (the simulator's VM 100 is `web`).
    let home = Home::new();
    let d = home.on_bed(&["vm", "status", "web", "-o", "json"]).data();
    assert_eq!(d["vmid"], 100);
    assert_eq!(d["name"], "web");
    let r = home.on_bed(&["-vv", "vm", "config", "db", "-o", "json"]);
    assert_eq!(r.data()["name"], "db");
    let sent = remote_commands(&r.stderr);
    // The name is looked up in the map the first call read moments ago (kept in the state
    // directory, src/remote/memo.rs): only the read of VM 101 goes to the host.
    assert_eq!(sent.len(), 1, "the read of VM 101 alone: {sent:?}");
    assert!(sent[0].contains("/nodes/pve2/qemu/101/config"), "{sent:?}");
    // A home of its own has no map yet: one lookup, then the read.
    let r = Home::new().on_bed(&["-vv", "vm", "config", "db", "-o", "json"]);
    let sent = remote_commands(&r.stderr);
    assert_eq!(sent.len(), 2, "one lookup, then the read: {sent:?}");
    assert!(sent[0].contains("/cluster/resources"), "{sent:?}");

    for (args, want) in [
        (&["vm", "status", "nosuch"][..], "no VM is named 'nosuch'"),
        (
            &["vm", "status", "dns"][..],
            "dns is a container: use `pxagent ct status dns`",
        ),
        (
            &["ct", "status", "web"][..],
            "web is a VM: use `pxagent vm status web`",
        ),
    ] {
        let r = home.on_bed(&[args, &["-o", "json"]].concat());
        assert_eq!(r.code, 2, "{args:?}: {}", r.stdout);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains(want), "{args:?}: {msg}");
    }
    assert_eq!(
        home.on_bed(&["ct", "status", "dns", "-o", "json"]).data()["vmid"],
        200
    );
    // A dry run by name shows the real command line and phrase (it reads the guest list).
    let d = home
        .on_bed(&["vm", "stop", "web", "--dry-run", "-o", "json"])
        .data();
    assert_eq!(d["phrase"], "yes stop 100");
    assert!(
        d["command"]
            .as_str()
            .unwrap()
            .contains("/nodes/pve1/qemu/100/status/stop"),
        "{d}"
    );

    let ids = |args: &[&str]| -> Vec<u64> {
        home.on_bed(&[args, &["-o", "json"]].concat())
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["vmid"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(ids(&["vm", "list", "--name", "w*"]), [100]);
    assert_eq!(ids(&["vm", "list", "--name", "*web"]), [100, 104]);
    assert_eq!(ids(&["ct", "list", "--node", "pve2"]), [201]);
    let running = ids(&["vm", "list", "--status", "running"]);
    assert!(!running.is_empty());
    for id in &running {
        assert_eq!(status_of(*id), "running", "{id}");
    }
    assert!(ids(&["vm", "list", "--tag", "no-such-tag"]).is_empty());
    let r = home.on_bed(&["vm", "list", "--status", "Running!"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn exec_exit_code_passes_the_guest_code_through() {
    // Done-when: `vm exec 100 --exit-code -- sh -c 'exit 3'` exits 3.
    let _g = lock();
    let home = Home::new();
    let r = home.on_bed(&[
        "vm",
        "exec",
        "100",
        "--exit-code",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let r = home.on_bed(&["vm", "exec", "100", "--", "sh", "-c", "exit 3"]);
    assert_eq!(
        r.code, 0,
        "without the flag the command's code is only reported"
    );
    let r = home.on_bed(&[
        "-o",
        "json",
        "vm",
        "exec",
        "web",
        "--exit-code",
        "--",
        "sh",
        "-c",
        "exit 4",
    ]);
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert_eq!(r.json()["data"]["exitcode"], 4, "the JSON is authoritative");
    // pxagent's own failures keep their codes: VM 9000 is a stopped template (exit 1).
    let r = home.on_bed(&["vm", "exec", "9000", "--exit-code", "--", "true"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
}

#[test]
fn backups_name_their_archive_and_take_containers() {
    // Done-when: `backup create 101` returns `…vzdump-qemu-101-…`; `backup create 200` works.
    let _g = lock();
    let home = Home::new();
    let before = backups("pve2", 101);
    let d = home
        .on_bed(&["backup", "create", "101", "-o", "json"])
        .data();
    let archive = d["archive"].as_str().unwrap_or_default().to_string();
    assert!(archive.starts_with("local:backup/vzdump-qemu-101-"), "{d}");
    let after = backups("pve2", 101);
    assert!(
        after.contains(&archive) && !before.contains(&archive),
        "{after:?}"
    );

    let before = backups("pve1", 200);
    let r = home.on_bed(&["backup", "create", "200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let archive = r.stdout.trim_end().lines().last().unwrap().to_string();
    assert!(
        archive.starts_with("local:backup/vzdump-lxc-200-"),
        "{}",
        r.stdout
    );
    let after = backups("pve1", 200);
    assert!(
        after.contains(&archive) && !before.contains(&archive),
        "{after:?}"
    );
    // By name too: `dns` is container 200.
    let d = home
        .on_bed(&["backup", "create", "dns", "-o", "json"])
        .data();
    assert!(
        d["archive"].as_str().unwrap().contains("vzdump-lxc-200-"),
        "{d}"
    );
}

#[test]
fn over_mcp_a_container_backs_up_and_a_second_start_changes_nothing() {
    // `backup_create {vmid: 200}` backs up the container.
    let _g = lock();
    let home = Home::new();
    let before = backups("pve1", 200);
    let spec = serde_json::json!([
        ["backup_create", {"vmid": 200}],
        ["vm_start", {"vmid": 100}],
    ]);
    let report = crate::mcp::client(&home, &["--calls", &spec.to_string()]);
    let calls = report["calls"].as_array().unwrap();
    let data = |i: usize| -> &Value {
        let c = &calls[i];
        assert_eq!(c["is_error"], false, "{c:#}\n{}", report["server_stderr"]);
        &c["structured"]["data"]
    };
    let archive = data(0)["archive"].as_str().unwrap_or_default().to_string();
    assert!(
        archive.starts_with("local:backup/vzdump-lxc-200-"),
        "{:#}",
        calls[0]
    );
    assert!(backups("pve1", 200).contains(&archive) && !before.contains(&archive));
    assert_eq!(
        data(1)["changed"],
        false,
        "VM 100 runs already: {:#}",
        calls[1]
    );
}
