//! The audit trail on the bed: a change is two records (started before sending, its result after)
//! shown as one operation; it fails closed when its record cannot be written (exit 10, nothing
//! reaches the host) until `audit new-chain` starts a chain linked to the old head; reads go on
//! with a warning; SIGTERM while the command runs — of the CLI and of `pxagent mcp` — still leaves
//! the record.
//!
//! A command is held running with the simulator's `hang` fault (it sleeps before it acts).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// The records of the home's audit log, as written.
fn records(home: &Home) -> Vec<Value> {
    std::fs::read_to_string(home.audit_log())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// VM 100's snapshot names, from the simulator itself.
fn snapshots_of_100() -> Vec<String> {
    let node = node_of(100);
    sim_get(&format!("/nodes/{node}/qemu/100/snapshot"), &[])
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str().map(String::from))
        .collect()
}

/// Wait up to `secs` for `f`.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    f()
}

/// A held command may still create its snapshot once the hang ends; remove it then.
fn remove_late_snapshot(name: &str, within: u64) {
    if eventually(within, || snapshots_of_100().iter().any(|s| s == name)) {
        let r = on_bed(&[
            "vm",
            "delsnapshot",
            "100",
            name,
            "--confirm",
            &format!("yes delsnapshot 100 {name}"),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
}

/// Send SIG`name` (TERM, INT, HUP) to `pid`.
fn signal(pid: u32, name: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{name} {pid}");
}

#[test]
fn a_snapshot_with_a_broken_audit_tail_is_exit_10_and_no_snapshot_appears() {
    let _g = lock();
    let home = Home::new();
    // One good record, then a torn line (a write cut short).
    assert_eq!(home.on_bed(&["vm", "status", "100"]).code, 0);
    let log = home.audit_log();
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(b"{\"seq\":2,\"time\":\"2026-").unwrap();
    drop(f);
    let name = fresh("failclosed");
    let before = sudo_log_len();
    let r = home.on_bed(&["vm", "snapshot", "100", &name, "-o", "json"]);
    assert_eq!(r.code, 10, "{}\n{}", r.stdout, r.stderr);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("was not sent"), "{msg}");
    assert!(msg.contains("pxagent audit new-chain"), "{msg}");
    assert_not_sent(before, &[&name]);
    assert!(!snapshots_of_100().contains(&name));
    // Reads go on, with a warning.
    let r = home.on_bed(&["vm", "status", "100"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("could not write the audit log"),
        "{}",
        r.stderr
    );
    // A new chain linked to the old head unblocks changes.
    let head = home.on_bed(&["audit", "verify", "-o", "json"]);
    assert_eq!(head.code, 1, "the torn line is named: {}", head.stdout);
    let old_head = head.json()["data"]["head"].as_str().unwrap().to_string();
    let r = home.on_bed(&["audit", "new-chain", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d = r.json()["data"].clone();
    assert_eq!(d["record"]["continues"]["head"], old_head.as_str());
    assert_eq!(d["record"]["continues"]["first_broken"], 2);
    let r = home.on_bed(&["vm", "snapshot", "100", &name]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(snapshots_of_100().contains(&name));
    let v = home.on_bed(&["audit", "verify", "-o", "json"]);
    assert_eq!(v.code, 0, "{}", v.stdout);
    assert_eq!(v.json()["data"]["continues"]["head"], old_head.as_str());
    remove_late_snapshot(&name, 0);
}

#[test]
fn a_change_is_two_records_and_audit_show_one_operation() {
    let _g = lock();
    let home = Home::new();
    let name = fresh("twophase");
    assert_eq!(home.on_bed(&["vm", "snapshot", "100", &name]).code, 0);
    let recs = records(&home);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0]["phase"], "started");
    assert_eq!(recs[0]["exit_code"], 0);
    assert!(recs[0]["argv"].to_string().contains(&name));
    assert_eq!(recs[1]["phase"], "done");
    assert_eq!(recs[1]["started"], 1);
    assert!(recs[1]["upid"].as_str().unwrap().contains("qmsnapshot"));
    let shown = home.on_bed(&["audit", "show", "-o", "json"]).json()["data"].clone();
    let shown = shown.as_array().unwrap();
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert_eq!(shown[0]["phase"], "done");
    assert_eq!(home.on_bed(&["audit", "verify"]).code, 0);
    remove_late_snapshot(&name, 0);
}

#[test]
fn sigterm_during_a_snapshot_leaves_its_audit_record() {
    signal_during_a_snapshot_leaves_its_audit_record("TERM");
}

#[test]
fn sigint_and_sighup_during_a_snapshot_leave_its_audit_record() {
    signal_during_a_snapshot_leaves_its_audit_record("INT");
    signal_during_a_snapshot_leaves_its_audit_record("HUP");
}

/// SIG`sig` while a snapshot runs is exit 7 with a completed record.
fn signal_during_a_snapshot_leaves_its_audit_record(sig: &str) {
    let _g = lock();
    let home = Home::new();
    let name = fresh(&format!("sig{}", sig.to_lowercase()));
    clear_faults();
    fault(&format!(
        r#"{{"match":"--snapname {name}","action":"hang","seconds":6,"times":1}}"#
    ));
    let running = home
        .px()
        .bed()
        .args(["vm", "snapshot", "100", &name, "-o", "json"])
        .spawn();
    // The started record is written right before the command is sent.
    let started = eventually(20, || {
        records(&home).iter().any(|r| r["phase"] == "started")
    });
    assert!(started, "no started record: {:?}", records(&home));
    std::thread::sleep(Duration::from_millis(300));
    signal(running.pid(), sig);
    let r = running.wait();
    clear_faults();
    assert_eq!(r.code, 7, "SIG{sig}: {}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    let named = format!("SIG{sig}");
    assert!(e["message"].as_str().unwrap().contains(&named), "{e}");
    let recs = records(&home);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[1]["phase"], "interrupted");
    assert_eq!(recs[1]["started"], recs[0]["seq"]);
    assert_eq!(recs[1]["exit_code"], 7);
    assert!(recs[1]["argv"].to_string().contains(&name), "{}", recs[1]);
    assert!(recs[1]["error"].as_str().unwrap().contains(&named));
    let shown = home.on_bed(&["audit", "show"]);
    assert!(shown.stdout.contains("(interrupted)"), "{}", shown.stdout);
    assert_eq!(home.on_bed(&["audit", "verify"]).code, 0);
    remove_late_snapshot(&name, 12);
}

/// `pxagent mcp` on the bed with stdin and stdout piped to this test.
struct Mcp {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Mcp {
    fn start(home: &Home) -> Mcp {
        Mcp::start_on(home, false)
    }

    /// The server for the plain bed, or (`gated`) the gated one.
    fn start_on(home: &Home, gated: bool) -> Mcp {
        let mut cmd = Command::new(bin());
        isolate(&mut cmd, home.path());
        if gated {
            for (k, v) in crate::support::gated().env {
                cmd.env(k, v);
            }
        } else {
            bed_env(&mut cmd);
        }
        let mut child = cmd
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut m = Mcp { child, out };
        m.send(
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"pxagent-test","version":"0"}}}),
        );
        let init = m.read();
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        m.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        m
    }

    fn send(&mut self, v: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or(Value::Null)
    }

    /// Call `backup_create` of VM 101 (request id 7) and wait until its started record is
    /// written, right before the command is sent: the backup's task is then on its way.
    fn backup_101_started(&mut self, home: &Home) {
        self.send(
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{
            "name":"backup_create","arguments":{"vmid":101}}}),
        );
        assert!(
            eventually(20, || records(home).iter().any(|r| r["phase"] == "started")),
            "no started record: {:?}",
            records(home)
        );
    }

    fn snapshot(&mut self, id: u64, name: &str) {
        self.send(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
            "name":"vm_snapshot","arguments":{"vmid":100,"snapshot":name}}}),
        );
    }
}

#[test]
fn sigterm_during_vm_snapshot_over_mcp_leaves_an_audit_record_naming_the_snapshot() {
    signal_during_vm_snapshot_over_mcp("TERM");
}

#[test]
fn sighup_and_sigint_end_the_mcp_server_like_sigterm() {
    signal_during_vm_snapshot_over_mcp("HUP");
    signal_during_vm_snapshot_over_mcp("INT");
}

/// Over MCP, the server exits 0 after its grace period, and the call in flight has an `interrupted`
/// record naming the snapshot.
fn signal_during_vm_snapshot_over_mcp(sig: &str) {
    let _g = lock();
    let home = Home::new();
    let name = fresh(&format!("mcp{}", sig.to_lowercase()));
    clear_faults();
    // Longer than the server's grace period (5 s).
    fault(&format!(
        r#"{{"match":"--snapname {name}","action":"hang","seconds":9,"times":1}}"#
    ));
    let mut m = Mcp::start(&home);
    m.snapshot(1, &name);
    let started = eventually(20, || {
        records(&home).iter().any(|r| r["phase"] == "started")
    });
    assert!(started, "no started record: {:?}", records(&home));
    signal(m.child.id(), sig);
    let t = Instant::now();
    let status = m.child.wait().unwrap();
    clear_faults();
    assert_eq!(status.code(), Some(0), "SIG{sig}");
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let recs = records(&home);
    let end = recs
        .iter()
        .find(|r| r["phase"] == "interrupted")
        .unwrap_or_else(|| panic!("no interrupted record: {recs:#?}"));
    assert_eq!(end["op"], "vm.snapshot");
    assert_eq!(end["via"], "mcp");
    assert!(end["argv"].to_string().contains(&name), "{end}");
    assert_eq!(home.on_bed(&["audit", "verify"]).code, 0);
    remove_late_snapshot(&name, 12);
}

/// On the wire, a cancelled call gets no response at all — not an error, not a late result — while
/// the server stops its task and answers the next request.
#[test]
fn a_cancelled_call_gets_no_response_and_the_session_goes_on() {
    let _g = lock();
    let home = Home::new();
    clear_faults();
    fault(r#"{"match":"vzdump --vmid 101","action":"hold","seconds":60,"times":1}"#);
    let mut m = Mcp::start(&home);
    m.backup_101_started(&home);
    std::thread::sleep(Duration::from_millis(1500));
    m.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":7,"reason":"test"}}));
    // The server has finished with the call once the backup's completion is recorded.
    let done = eventually(40, || {
        records(&home).iter().any(|r| {
            r["op"] == "backup.create"
                && r["phase"] != "started"
                && r["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("cancelled by the client"))
        })
    });
    clear_faults();
    assert!(
        done,
        "the cancelled backup was never completed: {:#?}",
        records(&home)
    );
    m.send(json!({"jsonrpc":"2.0","id":8,"method":"ping"}));
    let mut seen = Vec::new();
    loop {
        let v = m.read();
        assert!(
            !v.is_null(),
            "the server closed before answering the ping: {seen:?}"
        );
        assert_ne!(v["id"], 7, "a cancelled call got a response: {v}");
        if v["id"] == 8 {
            assert!(v["result"].is_object(), "{v}");
            break;
        }
        seen.push(v);
    }
    drop(m.child.stdin.take());
    assert_eq!(m.child.wait().unwrap().code(), Some(0));
    // Its command was ended, and with it the backup's task (the tool passes SIGTERM on to
    // its worker); a task still running would have been stopped with task.stop.
    assert!(
        records(&home).iter().any(|r| r["op"] == "backup.create"
            && r["error"]
                .as_str()
                .is_some_and(|e| e.contains("interrupted by signal"))),
        "the backup's task was not ended: {:#?}",
        records(&home)
    );
}

/// What a cancelled call is checked against: which tool, with which arguments, whose command
/// a fault slows, and how to tell on the host that nothing came of it.
struct Slowed {
    /// The MCP tool and its arguments.
    tool: &'static str,
    args: Value,
    /// The fault rule's `match`: a substring of the command line that changes the host.
    line: &'static str,
    /// The guest whose task list and lock are checked.
    vmid: u64,
}

/// The host's side of a guest: its node, tasks, archives, lock.
fn host_view(vmid: u64) -> (String, Vec<Value>, usize, Value) {
    let node = node_of(vmid);
    let tasks = sim_get(
        &format!("/nodes/{node}/tasks"),
        &["--source", "all", "--vmid", &vmid.to_string()],
    )
    .as_array()
    .unwrap()
    .clone();
    let archives = backups(&node, vmid).len();
    let lock = guest(vmid).unwrap()["lock"].clone();
    (node, tasks, archives, lock)
}

/// The issue's scenario: the call's command is slowed on the host by `action` (`hang`: the tool
/// sleeps 10 s before it does anything; `delay-task`: its task starts 10 s late), the client
/// cancels 2.5 s after the call's started record, and 14 s after the cancel the host shows
/// nothing of the call: no new task (running or not), no new archive, no lock, the guest on its
/// node, the command's processes gone; the audit says what became of it.
fn a_cancelled_call_changes_nothing(gated: bool, action: &str, call: &Slowed) -> String {
    let _g = lock();
    let home = Home::new();
    clear_faults();
    let (node, tasks_before, archives_before, _) = host_view(call.vmid);
    fault(&format!(
        r#"{{"match":"{}","action":"{action}","seconds":10,"times":1}}"#,
        call.line
    ));
    let mut m = Mcp::start_on(&home, gated);
    m.send(
        json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{
        "name": call.tool, "arguments": call.args}}),
    );
    assert!(
        eventually(20, || records(&home)
            .iter()
            .any(|r| r["phase"] == "started")),
        "no started record: {:?}",
        records(&home)
    );
    std::thread::sleep(Duration::from_millis(2500));
    m.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":7,"reason":"test"}}));
    let cancelled_at = Instant::now();
    let completion = |home: &Home| {
        records(home).into_iter().find(|r| {
            r["phase"] != "started"
                && r["op"] != "task.stop"
                && r["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("cancelled by the client"))
        })
    };
    let recorded = eventually(30, || completion(&home).is_some());
    let left = cancelled_at + Duration::from_secs(14);
    std::thread::sleep(left.saturating_duration_since(Instant::now()));
    let (node_after, tasks_after, archives_after, lock_after) = host_view(call.vmid);
    let processes = pids_with_cmdline(call.line);
    clear_faults();
    drop(m.child.stdin.take());
    let _ = m.child.wait();
    let new_tasks: Vec<&Value> = tasks_after
        .iter()
        .filter(|t| !tasks_before.iter().any(|b| b["upid"] == t["upid"]))
        .collect();
    assert!(recorded, "no completion record: {:#?}", records(&home));
    let why = completion(&home).unwrap()["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        new_tasks.is_empty(),
        "the cancelled call still started a task (audit: {why}): {new_tasks:#?}"
    );
    assert_eq!(
        archives_after, archives_before,
        "a new archive (audit: {why})"
    );
    assert_eq!(node_after, node, "the guest moved (audit: {why})");
    assert!(
        lock_after.is_null(),
        "left locked: {lock_after} (audit: {why})"
    );
    assert!(
        processes.is_empty(),
        "still running on the host: {processes:?}"
    );
    assert!(
        why.contains("ended on the host before it started a task: nothing was started")
            || why.contains("on the host was ended"),
        "{why}"
    );
    assert_eq!(home.on_bed(&["audit", "verify"]).code, 0);
    why
}

/// The pids of processes whose command line (words joined by spaces) contains `text`.
fn pids_with_cmdline(text: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline"))
            && String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains(text)
        {
            pids.push(pid);
        }
    }
    pids
}

fn backup_102() -> Slowed {
    Slowed {
        tool: "backup_create",
        args: json!({"vmid": 102, "storage": "local"}),
        line: "/vzdump --vmid 102",
        vmid: 102,
    }
}

fn migrate_102() -> Slowed {
    let target = if node_of(102) == "pve1" {
        "pve2"
    } else {
        "pve1"
    };
    Slowed {
        tool: "vm_migrate",
        args: json!({"vmid": 102, "target": target}),
        line: "qemu/102/migrate",
        vmid: 102,
    }
}

#[test]
fn a_cancelled_backup_whose_tool_hangs_leaves_no_archive_and_no_task() {
    a_cancelled_call_changes_nothing(false, "hang", &backup_102());
}

#[test]
fn a_cancelled_backup_whose_task_starts_late_leaves_no_archive_and_no_task() {
    a_cancelled_call_changes_nothing(false, "delay-task", &backup_102());
}

/// Through the gate: sshd passes no signal to a forced command; the gate ends sudo when the
/// channel closes.
#[test]
fn a_cancelled_backup_through_the_gate_leaves_no_archive_and_no_task() {
    a_cancelled_call_changes_nothing(true, "hang", &backup_102());
    a_cancelled_call_changes_nothing(true, "delay-task", &backup_102());
}

#[test]
fn a_cancelled_migration_leaves_the_vm_where_it_was() {
    a_cancelled_call_changes_nothing(false, "hang", &migrate_102());
    a_cancelled_call_changes_nothing(false, "delay-task", &migrate_102());
}

/// A guest command that had not reached the guest agent yet (the host's `pvesh` hangs before
/// it hands it over) never runs: its file never appears.
#[test]
fn a_cancelled_guest_command_that_had_not_started_never_runs() {
    let proof = fresh("cancel-exec-");
    let file = std::path::PathBuf::from("/var/lib/pve-sim/guests/100/root/tmp").join(&proof);
    let _ = std::fs::remove_file(&file);
    let why = a_cancelled_call_changes_nothing(
        false,
        "hang",
        &Slowed {
            tool: "vm_exec",
            args: json!({"vmid": 100, "command": ["sh", "-c", format!("echo ran > tmp/{proof}")]}),
            line: "100/agent/exec --command",
            vmid: 100,
        },
    );
    assert!(!file.exists(), "the guest command ran: {why}");
    assert!(why.contains("guest agent runs on in the guest"), "{why}");
}

/// A caller interrupted while its backup's tool hangs on the host (`pxagent backup create`,
/// the same with `--persist`, a `batch`): SIGTERM ends pxagent, and its command on the host is
/// ended with it, so 14 s later (the hang was 10 s) there is no new task, no new archive and
/// no process left; the audit says the request was interrupted.
fn an_interrupted_caller_leaves_nothing_running(how: &str) {
    let _g = lock();
    let home = Home::new();
    clear_faults();
    let (_, tasks_before, archives_before, _) = host_view(102);
    let line = "/vzdump --vmid 102";
    fault(&format!(
        r#"{{"match":"{line}","action":"hang","seconds":10,"times":1}}"#
    ));
    let px = home.px().bed();
    let running = match how {
        "cli" => px.args(["backup", "create", "102", "--storage", "local", "-o", "json"]),
        "persist" => px.args([
            "--persist", "30s", "backup", "create", "102", "--storage", "local", "-o", "json",
        ]),
        _ => px.args(["batch"]).stdin(
            "{\"id\": 1, \"op\": \"backup.create\", \"args\": {\"vmid\": 102, \"storage\": \"local\"}}\n",
        ),
    }
    .spawn();
    assert!(
        eventually(20, || records(&home)
            .iter()
            .any(|r| r["phase"] == "started")),
        "{how}: no started record: {:?}",
        records(&home)
    );
    std::thread::sleep(Duration::from_millis(1000));
    signal(running.pid(), "TERM");
    let at = Instant::now();
    let r = running.wait();
    std::thread::sleep((at + Duration::from_secs(14)).saturating_duration_since(Instant::now()));
    let (_, tasks_after, archives_after, lock_after) = host_view(102);
    let processes = pids_with_cmdline(line);
    clear_faults();
    if how == "persist" {
        let _ = home.px().bed().args(["persist", "stop"]).run();
    }
    assert_eq!(r.code, 7, "{how}: {}\n{}", r.stdout, r.stderr);
    let new_tasks: Vec<&Value> = tasks_after
        .iter()
        .filter(|t| !tasks_before.iter().any(|b| b["upid"] == t["upid"]))
        .collect();
    assert!(
        new_tasks.is_empty(),
        "{how}: a task still started: {new_tasks:#?}"
    );
    assert_eq!(archives_after, archives_before, "{how}: a new archive");
    assert!(lock_after.is_null(), "{how}: left locked");
    assert!(processes.is_empty(), "{how}: still running: {processes:?}");
    let recs = records(&home);
    assert!(
        recs.iter()
            .any(|r| r["op"] == "backup.create" && r["phase"] == "interrupted"),
        "{how}: {recs:#?}"
    );
    assert_eq!(home.on_bed(&["audit", "verify"]).code, 0);
}

#[test]
fn an_interrupted_cli_call_ends_its_command_on_the_host() {
    an_interrupted_caller_leaves_nothing_running("cli");
}

#[test]
fn an_interrupted_persist_call_ends_its_command_on_the_host() {
    an_interrupted_caller_leaves_nothing_running("persist");
}

#[test]
fn an_interrupted_batch_ends_its_commands_on_the_host() {
    an_interrupted_caller_leaves_nothing_running("batch");
}

/// What a cancelled backup of VM 101, held running by the simulator (`faults`), left: the
/// cancelled call's audit text, its task as the node's task list shows it once the call was
/// recorded, the home (for its records) and the archives before. A task still running then
/// is stopped afterwards, so the host is left as it was whatever the outcome.
fn cancel_a_running_backup_of_101(faults: &[&str]) -> (String, Value, Home, usize) {
    let home = Home::new();
    clear_faults();
    let (node, before, archives_before, _) = host_view(101);
    for f in faults {
        fault(f);
    }
    let mut m = Mcp::start(&home);
    m.backup_101_started(&home);
    let new_task = || {
        host_view(101)
            .1
            .into_iter()
            .find(|t| !before.iter().any(|b| b["upid"] == t["upid"]))
    };
    assert!(
        eventually(20, || new_task().is_some()),
        "the backup never started"
    );
    m.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":7,"reason":"test"}}));
    let completion = |home: &Home| {
        records(home).into_iter().find(|r| {
            r["op"] == "backup.create"
                && r["phase"] != "started"
                && r["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("cancelled by the client"))
        })
    };
    let ended = eventually(40, || completion(&home).is_some());
    let task = new_task();
    clear_faults();
    if let Some(t) = task.as_ref().filter(|t| t["status"] == "RUNNING") {
        sim(&[
            "pvesh",
            "delete",
            &format!("/nodes/{node}/tasks/{}", t["upid"].as_str().unwrap()),
        ]);
    }
    drop(m.child.stdin.take());
    let _ = m.child.wait();
    assert!(ended, "no completion record: {:#?}", records(&home));
    let why = completion(&home).unwrap()["error"]
        .as_str()
        .unwrap()
        .to_string();
    (why, task.unwrap(), home, archives_before)
}

/// A worker that outlives its tool (the simulator's `detach`: the tool dies on the signal
/// without passing it on) keeps the backup running after the call's command was ended: the
/// server finds it in the node's task list and stops it with `task.stop`, and the audit trail
/// has the stop and names the task in the cancelled call's record. No archive is left.
#[test]
fn a_task_that_outlives_its_cancelled_command_is_stopped() {
    let _g = lock();
    let (why, task, home, archives_before) = cancel_a_running_backup_of_101(&[
        r#"{"match":"vzdump --vmid 101","action":"hold","seconds":60,"times":1}"#,
        r#"{"match":"vzdump --vmid 101","action":"detach","times":1}"#,
    ]);
    let upid = task["upid"].as_str().unwrap();
    assert_eq!(task["status"], "interrupted by signal", "{why}: {task}");
    assert!(
        why.contains(&format!(
            "its task {upid} was stopped (task.stop; found running"
        )),
        "{why}"
    );
    assert!(
        why.contains("the task ended: interrupted by signal"),
        "{why}"
    );
    assert!(
        records(&home).iter().any(|r| r["op"] == "task.stop"
            && r["phase"] == "done"
            && r["exit_code"] == 0
            && r["upid"] == upid),
        "{:#?}",
        records(&home)
    );
    assert_eq!(host_view(101).2, archives_before);
    assert_eq!(home.on_bed(&["audit", "verify"]).code, 0);
}

/// A task already running when the call is cancelled ends with its command: the tool passes
/// SIGTERM to its worker, so the backup ends interrupted, with no archive; the audit names it.
#[test]
fn a_cancelled_backup_whose_task_runs_ends_interrupted() {
    let _g = lock();
    let (why, task, home, archives_before) = cancel_a_running_backup_of_101(&[
        r#"{"match":"vzdump --vmid 101","action":"hold","seconds":60,"times":1}"#,
    ]);
    assert_eq!(
        (task["status"].as_str(), task.get("endtime").is_some()),
        (Some("interrupted by signal"), true),
        "{why}: {task}"
    );
    assert!(
        why.contains(task["upid"].as_str().unwrap()) && why.contains("interrupted by signal"),
        "{why}"
    );
    assert_eq!(host_view(101).2, archives_before);
    assert_eq!(home.on_bed(&["audit", "verify"]).code, 0);
}

#[test]
fn a_call_that_ends_within_the_grace_period_is_answered_and_audited() {
    let _g = lock();
    let home = Home::new();
    let name = fresh("mcpgrace");
    clear_faults();
    fault(&format!(
        r#"{{"match":"--snapname {name}","action":"hang","seconds":2,"times":1}}"#
    ));
    let mut m = Mcp::start(&home);
    m.snapshot(1, &name);
    assert!(eventually(20, || records(&home)
        .iter()
        .any(|r| r["phase"] == "started")));
    signal(m.child.id(), "TERM");
    // A call after the signal (once the server saw it) is refused; the one in flight still
    // gets its result.
    std::thread::sleep(Duration::from_millis(500));
    let never = fresh("neverrun");
    m.snapshot(2, &never);
    let mut answers = Vec::new();
    for _ in 0..2 {
        answers.push(m.read());
    }
    let status = m.child.wait().unwrap();
    clear_faults();
    assert_eq!(status.code(), Some(0));
    let by_id = |id: u64| answers.iter().find(|a| a["id"] == id).cloned();
    let first = by_id(1).unwrap_or_else(|| panic!("{answers:#?}"));
    assert!(first["result"].is_object(), "{first}");
    assert_ne!(first["result"]["isError"], true, "{first}");
    let second = by_id(2).unwrap_or_else(|| panic!("{answers:#?}"));
    assert!(
        second["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{second}"
    );
    let recs = records(&home);
    assert!(
        recs.iter()
            .any(|r| r["phase"] == "done" && r["exit_code"] == 0),
        "{recs:#?}"
    );
    assert!(!recs.iter().any(|r| r["argv"].to_string().contains(&never)));
    assert!(!snapshots_of_100().contains(&never));
    assert!(snapshots_of_100().contains(&name));
    remove_late_snapshot(&name, 0);
}
