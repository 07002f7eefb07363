//! `pxagent mcp` (issue 7) through the real stdio binary, driven by a real MCP client: the
//! official Python SDK, in `tests/mcp_client.py`, which records what happened as one JSON
//! report that this file asserts.
//!
//! Live: needs the sandbox host (`scripts/test.sh` brings it up and exports `PXAGENT_*`) and
//! the Python `mcp` package (`scripts/test.sh` installs it). Without either these tests FAIL
//! with a message; they never skip. The in-process tests (schemas, annotations, the tool list
//! over a duplex pipe) are unit tests in `src/mcp.rs`.
//!
//! Both scenarios hold the host [`lock`]: they kill the account's sshd sessions, so two servers
//! (or a live test) must never overlap them.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::{Home, bed_env, bin, isolate, lock};

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
    let mut c = Command::new(python());
    isolate(&mut c, home.path())
        .arg(root().join("tests/mcp_client.py"))
        .arg(bin())
        .args(args);
    bed_env(&mut c);
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

fn ok(step: &Value) -> &Value {
    assert_eq!(step["protocol_error"], false, "{step:#}");
    assert_eq!(step["is_error"], false, "{step:#}");
    assert_eq!(step["structured"]["ok"], true, "{step:#}");
    &step["structured"]["data"]
}

fn tool_error(step: &Value) -> &str {
    assert_eq!(step["protocol_error"], false, "{step:#}");
    assert_eq!(step["is_error"], true, "{step:#}");
    assert_eq!(step["structured"]["ok"], false, "{step:#}");
    step["text"].as_str().unwrap()
}

fn invalid_params(step: &Value) -> &str {
    assert_eq!(step["protocol_error"], true, "{step:#}");
    assert_eq!(step["code"], -32602, "{step:#}");
    step["message"].as_str().unwrap()
}

#[test]
fn a_real_mcp_client_drives_the_sandbox() {
    let _host = lock();
    let home = Home::new();
    let r = client(&home, &[]);
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
    names.sort();
    want.sort();
    assert_eq!(names, want);
    assert_eq!(tools["vm_list"]["read_only"], true);
    assert_eq!(tools["vm_list"]["idempotent"], true);
    assert_eq!(tools["vm_destroy"]["destructive"], true);
    assert_eq!(tools["vm_destroy"]["read_only"], false);
    assert_eq!(tools["vm_start"]["open_world"], false);
    assert_eq!(tools["vm_start"]["required"], serde_json::json!(["vmid"]));

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

    // A change, with progress notifications, then put back with a confirmed stop.
    let target = r["start_target"]
        .as_u64()
        .expect("neither VM 102 nor 103 is stopped on the bed: something left them running");
    let started = ok(&steps["vm_start"]);
    assert_eq!(started["task"]["exitstatus"], "OK", "{started:#}");
    assert!(
        !steps["vm_start"]["progress"].as_array().unwrap().is_empty(),
        "no progress notification for vm_start"
    );
    assert_eq!(ok(&steps["status_after_start"])["status"], "running");
    let refusal = tool_error(&steps["vm_stop_unconfirmed"]);
    assert!(
        refusal.contains(&format!("ask the user to reply `yes stop {target}`")),
        "{refusal}"
    );
    ok(&steps["vm_stop_confirmed"]);
    assert_eq!(ok(&steps["status_after_stop"])["status"], "stopped");

    // A confirm op without the phrase: refused, with the reference wording and the phrase.
    let refusal = tool_error(&steps["vm_destroy_unconfirmed"]);
    assert!(
        refusal.starts_with("I won't run `vm destroy 100` without explicit confirmation — this deletes the VM and its disks irrecoverably. Reply `yes destroy 100` if you want me to proceed."),
        "{refusal}"
    );
    assert!(
        refusal.contains("must come from the human user"),
        "{refusal}"
    );
    assert!(
        refusal.contains("\"confirm\": \"yes destroy 100\""),
        "{refusal}"
    );
    let e = &steps["vm_destroy_unconfirmed"]["structured"]["error"];
    assert_eq!(e["kind"], "confirmation_required");
    assert_eq!(e["phrase"], "yes destroy 100");
    assert_eq!(e["exit_code"], 4);
    ok(&steps["status_100_after_refusal"]);

    // ... and with it, on a throwaway VM (a wrong phrase is refused first).
    let new = r["throwaway"].as_u64().expect("cluster_nextid gave no id");
    ok(&steps["vm_create"]);
    let wrong = tool_error(&steps["vm_destroy_wrong_phrase"]);
    assert!(
        wrong.contains(&format!("needs exactly `yes destroy {new}`")),
        "{wrong}"
    );
    let destroyed = ok(&steps["vm_destroy_confirmed"]);
    assert_eq!(destroyed["task"]["exitstatus"], "OK", "{destroyed:#}");
    tool_error(&steps["status_after_destroy"]);

    // Arguments that do not fit: invalid params, nothing sent.
    assert!(invalid_params(&steps["bad_vmid"]).contains("VMID"));
    assert!(invalid_params(&steps["bad_snapshot_name"]).contains("snapshot"));
    assert!(invalid_params(&steps["unknown_property"]).contains("force"));
    assert!(invalid_params(&steps["variant_without_switch"]).contains("vmstate"));
    invalid_params(&steps["unknown_tool"]);

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

    // The exec rate limit (issue 6): the eleventh call within a minute is refused.
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
        .filter(|op| op.risk == pxagent::catalog::Risk::Read)
        .map(|op| op.tool_name())
        .collect();
    want.sort();
    assert_eq!(names, want);
    for step in [&r["vm_start"], &r["vm_destroy"]] {
        let text = tool_error(step);
        assert!(text.contains("profile readonly"), "{text}");
        assert_eq!(step["structured"]["error"]["kind"], "policy_refused");
    }
}

/// The README's tool table is generated from the catalog (`pxagent mcp --list-tools`); it
/// must name every tool.
#[test]
fn the_readme_lists_every_tool() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## MCP server")
        .nth(1)
        .expect("README has an `## MCP server` section");
    let section = section.split("\n## ").next().unwrap();
    for s in pxagent::mcp::tool_specs(
        &pxagent::policy::Policy::default(),
        pxagent::catalog::Profile::Full,
    ) {
        assert!(
            section.contains(&format!("`{}`", s.name)),
            "README's MCP section does not list {} (regenerate the table with `pxagent mcp --list-tools`)",
            s.name
        );
    }
}
