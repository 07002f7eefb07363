//! `pxagent mcp` through the real stdio binary, driven by real MCP clients: the two official SDKs —
//! Python in `tests/mcp_client.py`, TypeScript in `tests/mcp_ts/client.mjs` — each recording what
//! happened as one JSON report that this file asserts.
//!
//! Live: needs the sandbox host (`scripts/test.sh` brings it up and exports `PXAGENT_*`), the
//! Python `mcp` package and the TypeScript SDK (`scripts/test.sh` installs both). Without any
//! of them these tests FAIL with a message; they never skip. The in-process tests (schemas,
//! annotations, errors, the tool list over a duplex pipe) are unit tests in `src/mcp/`, and
//! the raw JSON-RPC layer's black-box tests are in `tests/mcp_wire.rs`.
//!
//! Both scenarios hold the host [`lock`]: they kill the account's sshd sessions, so two servers
//! (or a live test) must never overlap them.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::{Home, bed_env, bin, clear_faults, fault, isolate, lock};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python that has the MCP SDK: `PXAGENT_TEST_PYTHON` (scripts/test.sh sets it to the venv
/// it installs `mcp` into, target/venv/bin/python3), else `python3` from PATH by its real path,
/// so it runs under an isolated HOME (pyenv shims need theirs).
fn python() -> String {
    if let Some(p) = std::env::var_os("PXAGENT_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return p.to_string_lossy().into_owned();
    }
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("PXAGENT_TEST_PYTHON is not set and python3 is not on PATH: the MCP tests need a Python 3 with the `mcp` package; run scripts/test.sh, which makes the venv target/venv and sets PXAGENT_TEST_PYTHON");
    assert!(out.status.success(), "python3 does not run");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Run the client script with the bed's environment in `home` (the server it starts inherits
/// both, so its audit log is the home's); returns its report.
pub(crate) fn client(home: &Home, args: &[&str]) -> Value {
    client_with(home, args, &[])
}

/// [`client`], with these variables over the bed's (the gated bed's connection).
pub(crate) fn client_with(home: &Home, args: &[&str], env: &[(&str, String)]) -> Value {
    let mut c = Command::new(python());
    isolate(&mut c, home.path())
        .arg(root().join("tests/mcp_client.py"))
        .arg(bin())
        .args(args);
    bed_env(&mut c);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run tests/mcp_client.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(3),
        "the Python MCP SDK is missing from {}: run scripts/test.sh, which installs `mcp>=1.0` into the venv target/venv and sets PXAGENT_TEST_PYTHON to its python3 (or set PXAGENT_TEST_PYTHON to a Python that has it)\n{stderr}",
        python()
    );
    assert!(
        out.status.success(),
        "tests/mcp_client.py failed ({}):\n{stderr}",
        out.status
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The first text block of a result is its structured content, serialized (MCP's advice
/// for tools that return structured content). Numbers compare by value: a JavaScript client
/// hands `2.0` back as `2`.
fn first_block_is_the_document(step: &Value) {
    fn canon(v: &Value) -> Value {
        match v {
            Value::Number(n) => serde_json::json!(n.as_f64()),
            Value::Array(a) => Value::Array(a.iter().map(canon).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), canon(v))).collect())
            }
            other => other.clone(),
        }
    }
    let first: Value =
        serde_json::from_str(step["first_text"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    assert_eq!(canon(&first), canon(&step["structured"]), "{step:#}");
}

fn ok(step: &Value) -> &Value {
    assert_eq!(step["protocol_error"], false, "{step:#}");
    assert_eq!(step["is_error"], false, "{step:#}");
    assert_eq!(step["structured"]["ok"], true, "{step:#}");
    first_block_is_the_document(step);
    &step["structured"]["data"]
}

fn tool_error(step: &Value) -> &str {
    assert_eq!(step["protocol_error"], false, "{step:#}");
    assert_eq!(step["is_error"], true, "{step:#}");
    assert_eq!(step["structured"]["ok"], false, "{step:#}");
    first_block_is_the_document(step);
    step["text"].as_str().unwrap()
}

fn invalid_params(step: &Value) -> &str {
    assert_eq!(step["protocol_error"], true, "{step:#}");
    assert_eq!(step["code"], -32602, "{step:#}");
    step["message"].as_str().unwrap()
}

/// An argument error as the SDK's 2025-11-25 session gets it (SEP-1303): a tool result with
/// isError and the structured error of kind invalid_input.
fn invalid_argument(step: &Value) -> &str {
    let text = tool_error(step);
    assert_eq!(
        step["structured"]["error"]["kind"], "invalid_input",
        "{step:#}"
    );
    assert_eq!(step["structured"]["error"]["exit_code"], 2, "{step:#}");
    text
}

#[test]
fn a_real_mcp_client_drives_the_sandbox() {
    let _host = lock();
    let home = Home::new();
    // The full tool list (titles, output schemas); the default lean one: see below.
    let r = client_with(
        &home,
        &[],
        &[("PXAGENT_TEST_MCP_ARGS", "--output-schemas".to_string())],
    );
    let steps = &r["steps"];

    assert_eq!(r["server"]["name"], "pxagent");
    assert_eq!(r["server"]["version"], env!("CARGO_PKG_VERSION"));

    // The full profile with no policy lists every op of the catalog's three profiles.
    let tools = r["tools"].as_object().unwrap();
    let expected = pxagent::mcp::tool_specs(
        &pxagent::policy::Policy::default(),
        pxagent::catalog::Profile::Full,
    );
    let mut names: Vec<&str> = tools.keys().map(String::as_str).collect();
    let mut want: Vec<&str> = expected.iter().map(|s| s.name.as_str()).collect();
    want.push("health");
    names.sort();
    want.sort();
    assert_eq!(names, want);
    assert_eq!(tools["health"]["read_only"], true);
    assert_eq!(tools["vm_list"]["read_only"], true);
    assert_eq!(tools["vm_list"]["idempotent"], true);
    assert_eq!(tools["vm_destroy"]["destructive"], true);
    assert_eq!(tools["vm_destroy"]["read_only"], false);
    assert_eq!(tools["vm_start"]["open_world"], false);
    assert_eq!(tools["vm_start"]["required"], serde_json::json!(["vmid"]));
    assert_eq!(r["server"]["protocol"], "2025-11-25");
    // The tool annotations mean what the MCP spec says they mean.
    assert_eq!(tools["vm_exec"]["destructive"], true);
    assert_eq!(tools["vm_exec"]["open_world"], true);
    assert_eq!(tools["vm_exec_status"]["read_only"], true);
    assert_eq!(tools["iso_download"]["open_world"], true);
    assert_eq!(tools["vm_shutdown"]["destructive"], true);
    assert_eq!(tools["vm_start"]["destructive"], false);
    assert_eq!(tools["vm_start"]["title"], "Start a VM");
    for (name, t) in tools {
        assert!(t["title"].as_str().is_some_and(|s| !s.is_empty()), "{name}");
        assert_eq!(t["has_output_schema"], true, "{name}");
    }

    // A read.
    let list = ok(&steps["vm_list"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|g| g["vmid"] == 100 && g["type"] == "qemu"),
        "{list:#}"
    );
    assert_eq!(steps["vm_list"]["structured"]["op"], "vm.list");
    assert!(
        steps["vm_list"]["structured"]["host"]
            .as_str()
            .unwrap()
            .contains("@127.0.0.1:")
    );

    // A change, then put back with a confirmed stop.
    let target = r["start_target"]
        .as_u64()
        .expect("neither VM 102 nor 103 is stopped on the bed: something left them running");
    let started = ok(&steps["vm_start"]);
    assert_eq!(started["task"]["exitstatus"], "OK", "{started:#}");
    // The simulator's qmstart prints no log line, only the UPID, which is not progress (the
    // backup below has its log as progress).
    let progress = steps["vm_start"]["progress"].as_array().unwrap();
    assert!(
        progress
            .iter()
            .all(|p| !p["message"].as_str().unwrap_or("").contains("UPID:")),
        "the UPID line came as progress: {progress:#?}"
    );
    assert_eq!(ok(&steps["status_after_start"])["status"], "running");
    let refusal = tool_error(&steps["vm_stop_unconfirmed"]);
    assert!(
        refusal.contains(&format!("ask the user to reply `yes stop {target}`")),
        "{refusal}"
    );
    ok(&steps["vm_stop_confirmed"]);
    assert_eq!(ok(&steps["status_after_stop"])["status"], "stopped");

    // A confirm op without the phrase: refused, with the reference wording, what goes and
    // what stays (read before asking), and the phrase.
    let refusal = tool_error(&steps["vm_destroy_unconfirmed"]);
    assert!(
        refusal.starts_with("I won't run `vm destroy 103` without explicit confirmation — this deletes the VM and its disks irrecoverably; with it go: disk scsi0 ("),
        "{refusal}"
    );
    assert!(
        refusal.contains("Reply `yes destroy 103` if you want me to proceed."),
        "{refusal}"
    );
    assert!(
        refusal.contains("must come from the human user"),
        "{refusal}"
    );
    assert!(
        refusal.contains("\"confirm\": \"yes destroy 103\""),
        "{refusal}"
    );
    let e = &steps["vm_destroy_unconfirmed"]["structured"]["error"];
    assert_eq!(e["kind"], "confirmation_required");
    assert_eq!(e["phrase"], "yes destroy 103");
    assert_eq!(e["exit_code"], 4);
    assert!(e["goes"].as_array().is_some_and(|g| !g.is_empty()), "{e}");
    // A running VM is not asked about at all: Proxmox would refuse the destroy.
    let e = &steps["vm_destroy_running"]["structured"]["error"];
    assert_eq!(e["kind"], "wrong_state", "{e}");
    assert!(e.get("phrase").is_none(), "{e}");
    ok(&steps["status_100_after_refusal"]);

    // ... and with it, on a throwaway VM (a wrong phrase is refused first).
    let new = r["throwaway"].as_u64().expect("cluster_nextid gave no id");
    ok(&steps["vm_create"]);
    let wrong = tool_error(&steps["vm_destroy_wrong_phrase"]);
    assert!(
        wrong.contains(&format!("needs exactly `yes destroy {new}`")),
        "{wrong}"
    );
    assert!(
        wrong.contains("exactly what the human user typed"),
        "{wrong}"
    );
    let e = &steps["vm_destroy_wrong_phrase"]["structured"]["error"];
    assert_eq!(e["kind"], "confirmation_mismatch", "{e}");
    assert_eq!(e["phrase_from"], "user", "{e}");
    let e = &steps["vm_destroy_unconfirmed"]["structured"]["error"];
    assert_eq!(e["phrase_from"], "user", "{e}");
    let destroyed = ok(&steps["vm_destroy_confirmed"]);
    assert_eq!(destroyed["task"]["exitstatus"], "OK", "{destroyed:#}");
    tool_error(&steps["status_after_destroy"]);

    // Arguments that do not fit: results the model can read (isError), nothing sent; an
    // unknown tool stays a protocol error.
    assert!(invalid_argument(&steps["bad_vmid"]).contains("VMID"));
    assert!(invalid_argument(&steps["status_99"]).contains("VMID"));
    assert!(invalid_argument(&steps["bad_snapshot_name"]).contains("snapshot"));
    assert!(invalid_argument(&steps["unknown_property"]).contains("force"));
    assert!(invalid_argument(&steps["variant_without_switch"]).contains("vmstate"));
    // Through the base's tool (the lean list's only one), the switch chooses the variant: its
    // phrase, nothing sent.
    let through = &steps["variant_through_base"]["structured"]["error"];
    assert_eq!(through["kind"], "confirmation_required", "{through}");
    assert!(
        tool_error(&steps["variant_through_base"]).contains("yes vmstate 100 before"),
        "{through}"
    );
    invalid_params(&steps["unknown_tool"]);
    assert_eq!(ok(&steps["integral_vmid"])["vmid"], 100);

    // A backup's progress: its log's percentage with total 100 (the SDK validated the
    // structured result against the tool's output schema before handing it over).
    let backup = ok(&steps["backup_create"]);
    assert_eq!(backup["task"]["exitstatus"], "OK", "{backup:#}");
    let progress = steps["backup_create"]["progress"].as_array().unwrap();
    assert!(
        progress
            .iter()
            .any(|p| p["total"] == 100.0 && p["progress"] == 100.0),
        "no progress of 100 out of 100: {progress:#?}"
    );
    assert!(
        progress
            .iter()
            .all(|p| !p["message"].as_str().unwrap_or("").contains("UPID:")),
        "{progress:#?}"
    );
    assert_eq!(r["backup_archives"].as_array().unwrap().len(), 1, "{r:#}");
    ok(&steps["backup_remove"]);

    // Concurrent calls over the one connection.
    for (k, step) in steps["concurrent"].as_object().unwrap() {
        assert_eq!(step["is_error"], false, "concurrent {k}: {step:#}");
    }

    // The server survives a killed sshd: a read reconnects (retried once), a change that hit
    // the dead connection is not retried and says so.
    assert_eq!(
        r["sshd_killed"], true,
        "pkill found no sshd session to kill"
    );
    ok(&steps["after_kill"]);
    ok(&steps["after_kill_again"]);
    let lost = tool_error(&steps["change_after_kill"]);
    assert!(lost.contains("may or may not have happened"), "{lost}");
    assert!(lost.contains("vm_status (vmid 100)"), "{lost}");
    assert_eq!(
        steps["change_after_kill"]["structured"]["error"]["kind"],
        "connection_failed"
    );
    ok(&steps["read_after_change_failed"]);
    let log = r["server_stderr"].as_str().unwrap();
    assert!(
        log.contains("vm_list: connection lost, retrying the read on a new connection"),
        "{log}"
    );
    assert!(
        !log.contains("vm_start: connection lost, retrying"),
        "a change was retried: {log}"
    );

    // The exec rate limit: the eleventh call within a minute is refused.
    if let Some(exec) = r.get("exec").and_then(Value::as_array) {
        for (i, step) in exec.iter().enumerate().take(10) {
            assert_ne!(
                step["structured"]["error"]["kind"], "rate_limited",
                "call {i}: {step:#}"
            );
        }
        let last = tool_error(&exec[10]);
        assert_eq!(exec[10]["structured"]["error"]["kind"], "rate_limited");
        assert!(last.contains("nothing was sent"), "{last}");
        assert!(last.contains("Wait until the window resets"), "{last}");
    }

    // Every call left an audit record marked as coming through MCP.
    let out = home.px().args(["audit", "show", "-o", "json"]).run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let records = doc["data"].as_array().unwrap();
    assert!(records.iter().all(|rec| rec["via"] == "mcp"), "{doc:#}");
    let find = |op: &str, decision: &str| {
        records
            .iter()
            .any(|rec| rec["op"] == op && rec["decision"] == decision)
    };
    assert!(find("vm.destroy", "refused"));
    assert!(find("vm.destroy", "confirmed"));
    assert!(find("vm.start", "allowed"));
    assert!(find("vm.start", "failed"), "the bad VMID call is audited");
    assert!(
        records
            .iter()
            .all(|rec| rec["error"].as_str().is_none_or(|e| e.len() < 2048)),
        "an audit record quotes more than a kibibyte"
    );
    // Every tool call except the unknown tool (it names no op).
    let calls = steps
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| match k.as_str() {
            "concurrent" => v.as_object().unwrap().len(),
            "unknown_tool" => 0,
            _ => 1,
        })
        .sum::<usize>()
        + r.get("exec").and_then(Value::as_array).map_or(0, Vec::len);
    assert_eq!(records.len(), calls, "{doc:#}");
    pxagent_audit_verifies(&home);
}

fn pxagent_audit_verifies(home: &Home) {
    let out = home.px().args(["audit", "verify"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_readonly_server_lists_and_runs_only_reads() {
    let _host = lock();
    let home = Home::new();
    let r = client(&home, &["--readonly"]);
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut want: Vec<String> = pxagent::catalog::OPS
        .iter()
        .filter(|op| op.risk == pxagent::catalog::Risk::Read && !op.is_step())
        // A read variant (`vm status --brief`) folds into its base's tool (a read too).
        .filter(|op| op.variant_of.is_empty())
        .map(|op| op.tool_name())
        .chain(["health".to_string()])
        .collect();
    want.sort();
    assert_eq!(names, want);
    for step in [&r["vm_start"], &r["vm_destroy"]] {
        let text = tool_error(step);
        assert!(text.contains("profile readonly"), "{text}");
        assert_eq!(step["structured"]["error"]["kind"], "policy_refused");
    }
}

/// A cancelled `backup_create` on a backup the simulator holds running ends with its command:
/// pxagent ends the tool on the host, which passes the signal on to its worker, so no archive
/// appears, the task list shows it interrupted, and the audit trail records the cancellation,
/// the task and how it ended. (A worker that outlives its tool is stopped with `task.stop`:
/// `audit.rs`, `a_task_that_outlives_its_cancelled_command_is_stopped`.)
#[test]
fn a_cancelled_backup_stops_its_task_and_leaves_no_archive() {
    let _host = lock();
    clear_faults();
    fault(r#"{"match":"vzdump --vmid 101","action":"hold","seconds":90,"times":1}"#);
    let home = Home::new();
    let r = client(&home, &["--cancel"]);
    clear_faults();
    assert_eq!(r["cancelled"], true, "the call was not cancelled: {r:#}");
    assert!(
        r.get("answer").is_none(),
        "a cancelled call got an answer: {r:#}"
    );
    let task = &r["task"];
    assert!(task.is_object(), "the backup's task never stopped: {r:#}");
    assert_eq!(task["status"], "interrupted by signal", "{task:#}");
    assert!(r["seconds"].as_f64().unwrap() < 40.0, "{r:#}");
    let volids = |step: &Value| -> Vec<String> {
        step["structured"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["volid"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        volids(&r["backups_before"]),
        volids(&r["backups_after"]),
        "a cancelled backup left an archive"
    );
    ok(&r["after"]);

    let out = home.px().args(["audit", "show", "-o", "json"]).run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let records = doc["data"].as_array().unwrap();
    let upid = task["upid"].as_str().unwrap();
    let backup = records
        .iter()
        .find(|rec| rec["op"] == "backup.create")
        .expect("no audit record of the backup");
    let why = backup["error"].as_str().unwrap();
    assert!(why.contains("cancelled by the client"), "{why}");
    assert!(
        why.contains(&format!("its task {upid} ended: interrupted by signal")),
        "{why}"
    );
    assert_eq!(backup["upid"], upid);
    assert!(
        !records.iter().any(|rec| rec["op"] == "task.stop"),
        "the task ended with its command: nothing to stop"
    );
    pxagent_audit_verifies(&home);
}

/// When the host's gate wants a signed approval — here for a read, which a host policy may mark
/// `approve` too — the result carries `approval_request` (the text to relay), and the same call
/// with `approval` runs.
#[test]
fn a_gated_host_asks_for_an_approval_and_the_tool_takes_it() {
    let _host = lock();
    let g = crate::support::gated();
    let _p = g.policy("ops:\n  vm.config: approve\n");
    let home = Home::new();
    let key = g.approver_key.to_string_lossy().into_owned();
    let r = client_with(&home, &["--approve", &key], &g.env);
    let refused = &r["refused"];
    let text = tool_error(refused);
    assert!(
        text.contains("Only a human approver can sign this"),
        "{text}"
    );
    let doc = &refused["structured"];
    assert_eq!(doc["error"]["kind"], "approval_required", "{doc:#}");
    let relay = doc["approval_request"].as_str().expect("approval_request");
    assert!(relay.contains("op: vm.config"), "{relay}");
    assert!(relay.contains("pxagent approve"), "{relay}");
    assert_eq!(r["signed"], true, "{r:#}");
    let config = ok(&r["approved"]);
    assert!(config.is_object(), "{config:#}");
}

/// Node for the TypeScript SDK: `PXAGENT_TEST_NODE` (scripts/test.sh sets it), else `node`.
fn node() -> String {
    std::env::var("PXAGENT_TEST_NODE")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "node".to_string())
}

/// With the TypeScript SDK, the default (lean) tool list is at most 40 KB, has no
/// output schemas and still serves every operation, typed; `--tools compact` is at most 8 KB and
/// runs a read and refuses a phrase-less destroy as the per-op tool does.
#[test]
fn the_typescript_sdk_reads_the_lean_and_the_compact_lists() {
    let _host = lock();
    let home = Home::new();
    let mut c = Command::new(node());
    isolate(&mut c, home.path())
        .arg(root().join("tests/mcp_ts/client.mjs"))
        .arg(bin())
        .arg("--modes");
    bed_env(&mut c);
    let out = c.output().unwrap_or_else(|e| {
        panic!(
            "cannot run {} ({e}): the TypeScript MCP tests need Node; run scripts/test.sh",
            node()
        )
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client.mjs --modes failed ({}):\n{stderr}",
        out.status
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lean = &r["lean"];
    let bytes = lean["bytes"].as_u64().unwrap();
    assert!(bytes <= 40 * 1024, "the lean list is {bytes} bytes");
    assert_eq!(lean["has_output_schema"], false);
    let listed = lean["tools"].as_object().unwrap();
    let want = every_tool();
    assert_eq!(listed.len(), want.len() + 1, "every operation and health");
    assert_eq!(listed["health"], serde_json::json!([]));
    for (name, req) in want {
        let got = listed
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is missing from the lean list"));
        assert_eq!(got, &serde_json::json!(req), "{name}");
    }
    let own = ok(&lean["vm_status"]);
    assert_eq!(own["vmid"], 100);
    let refusal = &lean["vm_destroy"]["structured"]["error"];
    assert_eq!(refusal["kind"], "confirmation_required", "{refusal}");

    let compact = &r["compact"];
    let bytes = compact["bytes"].as_u64().unwrap();
    assert!(bytes <= 8 * 1024, "the compact list is {bytes} bytes");
    assert_eq!(
        compact["names"],
        serde_json::json!([
            "describe_operation",
            "find_operation",
            "health",
            "run_operation"
        ])
    );
    // "Is anything wrong?" is one call in both lists.
    for h in [&lean["health"], &compact["health"]] {
        let doc = &h["structured"];
        assert_eq!(doc["op"], "health", "{h}");
        assert_eq!(h["is_error"], false, "{h}");
        let checked = doc["data"]["checked"].as_array().unwrap();
        assert!(
            checked.iter().any(|c| c == "quorum") && checked.iter().any(|c| c == "smart"),
            "{h}"
        );
        assert_eq!(doc["ok"], doc["data"]["healthy"], "{h}");
    }
    assert_eq!(
        lean["health_bad"]["is_error"], true,
        "{}",
        lean["health_bad"]
    );
    assert_eq!(
        lean["health_bad"]["structured"]["error"]["kind"],
        "invalid_input"
    );
    let found: Vec<&str> = compact["found"]["structured"]["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["tool"].as_str().unwrap())
        .collect();
    assert!(found.contains(&"vm_destroy"), "{found:?}");
    assert_eq!(compact["described"]["structured"]["op"], "vm.destroy");
    let run = ok(&compact["status"]);
    for k in ["vmid", "name", "status", "node"] {
        assert_eq!(run[k], own[k], "{k}");
    }
    let refused = &compact["destroy"]["structured"]["error"];
    assert_eq!(refused["kind"], refusal["kind"]);
    assert_eq!(refused["phrase"], refusal["phrase"]);
    assert_eq!(
        compact["invalid"]["is_error"], true,
        "{}",
        compact["invalid"]
    );
}

/// The official TypeScript SDK drives the real binary against the bed: list, read, confirm flow,
/// invalid argument as isError, exec, progress, and a cancelled backup that leaves no archive and a
/// stopped task.
#[test]
fn the_typescript_sdk_drives_the_sandbox() {
    let _host = lock();
    clear_faults();
    fault(r#"{"match":"vzdump --vmid 101","action":"hold","seconds":90,"times":1}"#);
    let home = Home::new();
    let mut c = Command::new(node());
    isolate(&mut c, home.path())
        .arg(root().join("tests/mcp_ts/client.mjs"))
        .arg(bin());
    bed_env(&mut c);
    c.env("PXAGENT_TEST_MCP_ARGS", "--output-schemas");
    let out = c.output().unwrap_or_else(|e| {
        panic!("cannot run {} ({e}): the TypeScript MCP tests need Node; run scripts/test.sh, which installs nodejs and the SDK", node())
    });
    clear_faults();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(3),
        "the TypeScript MCP SDK is missing: run scripts/test.sh, which runs `npm ci` in tests/mcp_ts\n{stderr}"
    );
    assert!(
        out.status.success(),
        "tests/mcp_ts/client.mjs failed ({}):\n{stderr}",
        out.status
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let steps = &r["steps"];
    assert_eq!(r["server"]["name"], "pxagent");
    assert_eq!(r["protocol"], "2025-11-25");

    let tools = r["tools"].as_object().unwrap();
    assert_eq!(tools["vm_exec"]["destructive"], true);
    assert_eq!(tools["vm_exec"]["open_world"], true);
    assert_eq!(tools["vm_exec_status"]["read_only"], true);
    assert_eq!(tools["iso_download"]["open_world"], true);
    assert_eq!(tools["vm_shutdown"]["destructive"], true);
    for (name, t) in tools {
        assert!(t["title"].as_str().is_some_and(|s| !s.is_empty()), "{name}");
        assert_eq!(t["has_output_schema"], true, "{name}");
    }

    let list = ok(&steps["vm_list"]);
    assert!(list.as_array().unwrap().iter().any(|g| g["vmid"] == 100));

    let target = r["start_target"]
        .as_u64()
        .expect("neither VM 102 nor 103 is stopped on the bed");
    assert_eq!(ok(&steps["vm_start"])["task"]["exitstatus"], "OK");
    let refusal = tool_error(&steps["vm_stop_unconfirmed"]);
    assert!(
        refusal.contains(&format!("`yes stop {target}`")),
        "{refusal}"
    );
    ok(&steps["vm_stop_confirmed"]);

    assert!(invalid_argument(&steps["status_99"]).contains("VMID"));
    assert_eq!(steps["unknown_tool"]["protocol_error"], true);
    assert_eq!(steps["unknown_tool"]["code"], -32602);

    let exec = ok(&steps["vm_exec"]);
    assert_eq!(exec["exitcode"], 0, "{exec:#}");

    let progress = steps["backup_create"]["progress"].as_array().unwrap();
    ok(&steps["backup_create"]);
    assert!(
        progress
            .iter()
            .any(|p| p["total"] == 100 && p["progress"] == 100),
        "{progress:#?}"
    );
    assert!(
        progress
            .iter()
            .all(|p| !p["message"].as_str().unwrap_or("").contains("UPID:"))
    );
    assert_eq!(r["backup_archives"].as_array().unwrap().len(), 1, "{r:#}");
    ok(&steps["backup_remove"]);

    // The aborted call: the SDK gives up on it; the server ended its command, and so its task.
    assert_eq!(
        steps["cancelled_backup"]["protocol_error"], true,
        "{:#}",
        steps["cancelled_backup"]
    );
    let cancel = &r["cancel"];
    assert_eq!(
        cancel["task"]["status"], "interrupted by signal",
        "{cancel:#}"
    );
    assert_eq!(
        cancel["backups_before"], cancel["backups_after"],
        "an archive appeared"
    );
    ok(&steps["after_cancel"]);
    let out = home.px().args(["audit", "show", "-o", "json"]).run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let records = doc["data"].as_array().unwrap();
    assert!(
        records.iter().any(|rec| {
            rec["op"] == "backup.create"
                && rec["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("cancelled by the client"))
        }),
        "{records:#?}"
    );
    pxagent_audit_verifies(&home);
}

/// The tool table of docs/agents-and-mcp.md is generated from the catalog (`pxagent mcp
/// --list-tools`); it must name every tool.
#[test]
fn the_docs_list_every_tool() {
    let doc = std::fs::read_to_string(root().join("docs/agents-and-mcp.md")).unwrap();
    let section = doc
        .split("## The tools")
        .nth(1)
        .expect("docs/agents-and-mcp.md has a `## The tools` section");
    let section = section.split("\n## ").next().unwrap();
    for s in pxagent::mcp::tool_specs(
        &pxagent::policy::Policy::default(),
        pxagent::catalog::Profile::Full,
    ) {
        assert!(
            section.contains(&format!("`{}`", s.name)),
            "docs/agents-and-mcp.md's tool table does not list {} (regenerate it with scripts/regen.sh)",
            s.name
        );
    }
}

/// How many ops the full profile offers as tools of their own (the full list, the compact
/// mode's operations, the catalog resource).
fn every_op_tool() -> usize {
    pxagent::mcp::tool_specs(
        &pxagent::policy::Policy::default(),
        pxagent::catalog::Profile::Full,
    )
    .len()
}

/// The lean list's tools and their required arguments, from the catalog: every op's tool,
/// except that a variant is folded into its base's (one tool per CLI path), which then needs
/// only what every op at its path needs. Every op is still offered: its own tool or its base's.
fn every_tool() -> Vec<(String, Vec<String>)> {
    use pxagent::mcp::{ToolSpec, folded_into};
    let specs = pxagent::mcp::tool_specs(
        &pxagent::policy::Policy::default(),
        pxagent::catalog::Profile::Full,
    );
    let required = |s: &ToolSpec| -> Vec<String> {
        let mut req: Vec<String> = s.input_schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        req.sort();
        req
    };
    specs
        .iter()
        .filter(|s| folded_into(s, &specs).is_none())
        .map(|base| {
            let mut req = required(base);
            for v in specs
                .iter()
                .filter(|v| folded_into(v, &specs).is_some_and(|b| b.name == base.name))
            {
                let theirs = required(v);
                req.retain(|r| theirs.contains(r));
            }
            (base.name.clone(), req)
        })
        .collect()
}

/// The default tool list, as the Python SDK receives it, is at most 40 KB and still
/// offers every operation with the same required arguments; its tools run.
#[test]
fn the_default_tool_list_fits_in_40_kb_and_offers_every_operation() {
    let _host = lock();
    let home = Home::new();
    let r = client(&home, &["--lean"]);
    let bytes = r["bytes"].as_u64().unwrap();
    assert!(bytes <= 40 * 1024, "the tool list is {bytes} bytes");
    assert_eq!(r["has_output_schema"], false);
    let listed = r["tools"].as_object().unwrap();
    for (name, req) in every_tool() {
        let got: Vec<String> = listed
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is missing from the lean list"))
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, req, "{name}");
    }
    // Every operation, and the health check.
    assert_eq!(listed.len(), every_tool().len() + 1);
    assert!(listed.contains_key("health"));
    assert_eq!(ok(&r["vm_status"])["vmid"], 100);
    let refused = &r["vm_destroy"]["structured"];
    assert_eq!(
        refused["error"]["kind"], "confirmation_required",
        "{refused:#}"
    );
}

/// `--tools compact`: three tools in at most 8 KB that find, describe and run every
/// operation; a read and a change that needs a phrase answer as the operations' own tools do.
#[test]
fn the_compact_tools_find_describe_and_run_every_operation() {
    let _host = lock();
    let home = Home::new();
    let r = client(&home, &["--compact"]);
    let bytes = r["bytes"].as_u64().unwrap();
    assert!(bytes <= 8 * 1024, "the compact list is {bytes} bytes");
    assert_eq!(
        r["names"],
        serde_json::json!([
            "describe_operation",
            "find_operation",
            "health",
            "run_operation"
        ])
    );
    let found = &r["found"]["structured"];
    let names: Vec<&str> = found["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["tool"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"vm_snapshot") && names.contains(&"vm_delsnapshot"),
        "{names:?}"
    );
    assert_eq!(
        r["all"]["structured"]["count"].as_u64().unwrap() as usize,
        every_op_tool()
    );
    let described = &r["described"]["structured"];
    assert_eq!(described["op"], "vm.delsnapshot");
    assert!(described["input_schema"]["properties"]["confirm"].is_object());
    // A read: the same answer through run_operation as from vm_status.
    let (run, own) = (ok(&r["status_run"]), ok(&r["status_own"]));
    for k in ["vmid", "name", "status", "node"] {
        assert_eq!(run[k], own[k], "{k}");
    }
    assert_eq!(r["status_run"]["structured"]["op"], "vm.status");
    ok(&r["snapshot"]);
    // A change that needs a phrase: refused alike, then run with the user's phrase.
    let (run, own) = (&r["del_run"]["structured"], &r["del_own"]["structured"]);
    assert_eq!(run["error"]["kind"], "confirmation_required", "{run:#}");
    assert_eq!(run["error"]["kind"], own["error"]["kind"]);
    assert_eq!(run["error"]["phrase"], own["error"]["phrase"]);
    ok(&r["deleted"]);
    let unknown = &r["unknown"]["structured"];
    assert_eq!(unknown["error"]["kind"], "invalid_input", "{unknown:#}");
    let out = home.px().args(["audit", "show", "-o", "json"]).run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let ops: Vec<&str> = doc["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["op"].as_str().unwrap())
        .collect();
    assert!(
        ops.contains(&"vm.snapshot") && ops.contains(&"vm.delsnapshot"),
        "{ops:?}"
    );
}

/// An approval round trip through `run_operation` on the gated bed, as through the tool.
#[test]
fn the_compact_tools_relay_an_approval() {
    let _host = lock();
    let g = crate::support::gated();
    let _p = g.policy("ops:\n  vm.config: approve\n");
    let home = Home::new();
    let key = g.approver_key.to_string_lossy().into_owned();
    let r = client_with(&home, &["--compact", &key], &g.env);
    let doc = &r["refused"]["structured"];
    assert_eq!(doc["error"]["kind"], "approval_required", "{doc:#}");
    assert_eq!(r["signed"], true, "{r:#}");
    assert!(ok(&r["approved"]).is_object());
}

/// The skill is a prompt, and the catalog, the server's rules and the audit tail are
/// resources: listed and readable with the Python SDK.
#[test]
fn the_skill_prompt_and_the_resources_are_listed_and_readable() {
    let _host = lock();
    let home = Home::new();
    let r = client(&home, &["--prompts"]);
    assert_eq!(r["prompts"], serde_json::json!(["pxagent-skill"]));
    let skill = r["prompt_text"].as_str().unwrap();
    assert!(skill.starts_with("---\nname: pxagent\n"), "{skill}");
    assert!(skill.contains("[`vm.destroy`]"));
    assert_eq!(
        r["resources"],
        serde_json::json!([
            "pxagent://catalog",
            "pxagent://rules",
            "pxagent://audit/tail"
        ])
    );
    let read = &r["read"];
    let catalog: Value = serde_json::from_str(read["pxagent://catalog"].as_str().unwrap()).unwrap();
    assert_eq!(catalog.as_array().unwrap().len(), every_op_tool());
    let rules: Value = serde_json::from_str(read["pxagent://rules"].as_str().unwrap()).unwrap();
    assert_eq!(rules["profile"], "full");
    assert!(
        rules["needs_phrase"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o == "vm.destroy")
    );
    // What the host admits, read as preflight reads it: the bed's full render, no gate.
    let host = &rules["host_rules"];
    assert_eq!(host["gated"], false, "{rules:#}");
    let may: Vec<&str> = host["may_run"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // The bed's render has no `--ct-exec`, so commands in containers are not the account's.
    assert!(!may.contains(&"ct.exec"), "{may:?}");
    for op in pxagent::catalog::OPS
        .iter()
        .filter(|op| !op.is_step() && op.id != "ct.exec")
    {
        assert!(may.contains(&op.id), "{} is missing: {may:?}", op.id);
    }
    // The call made before reading: its record is in the tail.
    let tail = read["pxagent://audit/tail"].as_str().unwrap();
    let last: Value = serde_json::from_str(tail.lines().last().unwrap()).unwrap();
    assert_eq!(last["op"], "pve.version");
}
