//! VMs through the QEMU guest agent: file-write pushes, guest-exec, polling exec-status to
//! the end or the timeout, file-read pulls, each file checked against `sha256sum` in the guest.

use std::time::Duration;

use serde_json::{Value, json};

use crate::base::error::{Error, Result};
use crate::base::text::quote_argv;
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, ops};
use crate::engine::Trail;
use crate::remote::Remote;

use super::*;

pub(super) async fn vm_flow(
    remote: &Remote,
    c: Checked,
    timeout: Duration,
    trail: &mut Trail,
) -> Result<Value> {
    let inv = remote.prepare(&c.inv).await?;
    trail.set_argv(&inv);
    trail.begin(inv.op)?;
    let node = inv.values.get("node").cloned().unwrap_or_default();
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
    for dir in &c.mkdirs {
        let doc = vm_step(remote, &vmid, &node, &request::mkdir_argv(dir), timeout).await?;
        if doc["exitcode"] != json!(0) {
            return Err(super::sync::mkdir_error(
                dir,
                &format!("VM {vmid}"),
                &doc["exitcode"],
                doc["stderr"].as_str().unwrap_or(""),
            ));
        }
    }
    let mut pushed = Vec::new();
    for (local, guest, data) in &c.push {
        let step = step_inv(
            &ops::VM_FILE_WRITE,
            &[
                ("vmid", &vmid),
                ("node", &node),
                ("file", guest),
                ("content", &base64(data)),
            ],
        )?;
        remote.exec(&step.remote_argv()).await.map_err(|e| {
            super::sync::push_error(
                agent_error(e, &inv),
                local,
                guest,
                &format!("VM {vmid}"),
                &format!("vm exec {vmid}"),
            )
        })?;
        let sum = vm_sha256(remote, &vmid, &node, guest, timeout).await?;
        verify(
            &sum,
            data,
            &format!("pushing {} to {guest}", local.display()),
        )?;
        pushed.push(json!({"local": local, "guest": guest, "bytes": data.len(), "sha256": sum}));
    }
    let (pid, st) = vm_run(remote, &inv, timeout).await?;
    let mut doc = status_doc(&st);
    let ok = doc["exitcode"] == json!(0);
    let mut pulled = Vec::new();
    if ok {
        for (guest, local) in &c.pull {
            let step = step_inv(
                &ops::VM_FILE_READ,
                &[("vmid", &vmid), ("node", &node), ("file", guest)],
            )?;
            let out = remote
                .exec(&step.remote_argv())
                .await
                .map_err(|e| agent_error(e, &inv))?;
            let v: Value = serde_json::from_slice(&out.stdout)
                .map_err(|e| Error::Remote(format!("file-read did not return JSON: {e}")))?;
            if v.get("truncated").is_some_and(truthy) {
                return Err(Error::Remote(format!(
                    "{guest} in VM {vmid} is larger than the guest agent's file-read limit ({VM_PULL_MAX} bytes): nothing was written to {}",
                    local.display()
                )));
            }
            let data = pve_bytes(v.get("content").and_then(Value::as_str).unwrap_or(""));
            if let Some(n) = v.get("bytes-read").and_then(Value::as_u64)
                && n as usize != data.len()
            {
                return Err(Error::Remote(format!(
                    "file-read of {guest} reported {n} bytes but carried {}",
                    data.len()
                )));
            }
            let sum = vm_sha256(remote, &vmid, &node, guest, timeout).await?;
            verify(&sum, &data, &format!("pulling {guest}"))?;
            write_local(local, &data, c.force)?;
            pulled
                .push(json!({"guest": guest, "local": local, "bytes": data.len(), "sha256": sum}));
        }
    } else if !c.pull.is_empty() {
        doc["pull_skipped"] = json!("the command did not exit 0, so nothing was pulled");
    }
    doc["vmid"] = json!(vmid.parse::<u64>().unwrap_or(0));
    doc["node"] = json!(node);
    doc["via"] = json!("guest-agent");
    doc["command"] = json!(c.argv);
    doc["pid"] = json!(pid);
    doc["pushed"] = json!(pushed);
    doc["pulled"] = json!(pulled);
    Ok(doc)
}

/// Start a prepared `vm.exec` invocation and poll until the process exited.
pub(super) async fn vm_run(
    remote: &Remote,
    inv: &Invocation,
    timeout: Duration,
) -> Result<(u64, Value)> {
    let out = remote
        .exec(&inv.remote_argv())
        .await
        .map_err(|e| agent_error(e, inv))?;
    let started: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        Error::Remote(format!(
            "the guest agent's exec did not return JSON ({e}): {}",
            out.stdout_text().trim()
        ))
    })?;
    let pid = started
        .get("pid")
        .and_then(|p| {
            p.as_u64()
                .or_else(|| p.as_str().and_then(|s| s.parse().ok()))
        })
        .ok_or_else(|| {
            Error::Remote(format!("the guest agent's exec returned no pid: {started}"))
        })?;
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
    let node = inv.values.get("node").cloned().unwrap_or_default();
    let status = step_inv(
        &ops::VM_EXEC_STATUS,
        &[("vmid", &vmid), ("node", &node), ("pid", &pid.to_string())],
    )?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    loop {
        let out = remote
            .exec(&status.remote_argv())
            .await
            .map_err(|e| agent_error(e, inv))?;
        let st: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| Error::Remote(format!("exec-status did not return JSON: {e}")))?;
        if st.get("exited").is_some_and(truthy) {
            return Ok((pid, st));
        }
        if tokio::time::Instant::now() + pause > deadline {
            return Err(Error::Connection(format!(
                "`{}` in VM {vmid} did not finish within {}s; the guest agent cannot stop it, so process {pid} is left running in the guest (see `pxagent vm exec-status {vmid} {pid}`; raise --timeout to wait longer)",
                quote_argv(&catalog::kind::guest_argv(
                    inv.values
                        .get("command")
                        .map(String::as_str)
                        .unwrap_or("[]")
                )),
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// One step of the flow in a VM (`mkdir -p`, `sha256sum`): `argv` run to its end through the
/// agent, as the readable status document.
async fn vm_step(
    remote: &Remote,
    vmid: &str,
    node: &str,
    argv: &[String],
    timeout: Duration,
) -> Result<Value> {
    let inv = step_inv(
        &ops::VM_EXEC,
        &[
            ("vmid", vmid),
            ("node", node),
            ("command", &serde_json::to_string(argv).unwrap_or_default()),
        ],
    )?;
    let (_, st) = vm_run(remote, &inv, timeout).await?;
    Ok(status_doc(&st))
}

/// `sha256sum PATH` in a VM, through the agent.
pub(super) async fn vm_sha256(
    remote: &Remote,
    vmid: &str,
    node: &str,
    path: &str,
    timeout: Duration,
) -> Result<String> {
    let argv = vec![SHA256SUM.to_string(), path.to_string()];
    let doc = vm_step(remote, vmid, node, &argv, timeout).await?;
    if doc["exitcode"] != json!(0) {
        return Err(Error::Remote(format!(
            "cannot verify {path} in VM {vmid}: `{SHA256SUM} {path}` failed: {}",
            doc["stderr"].as_str().unwrap_or("").trim()
        )));
    }
    parse_sum(doc["stdout"].as_str().unwrap_or(""), path)
}

/// What qemu-guest-agent keeps of a command's stdout and of its stderr (`GUEST_EXEC_MAX_OUTPUT`,
/// qemu `qga/commands.c`); a stream cut there is truncated.
const AGENT_OUTPUT_MAX: usize = 16 * 1024 * 1024;

/// Whether the agent cut stream `key` (`out`, `err`) of `data`. Agents before QEMU 10.1 set the
/// `out-truncated` key's presence from the truncation but never its value, so a cut stream
/// reads `"out-truncated": 0` there, and a complete one has no key; fixed agents send the key
/// with every stream that has data, with the right value (qemu "qga: Fix truncated output
/// handling in guest-exec status reporting", 2025-08). Both agents cut a stream at exactly
/// [`AGENT_OUTPUT_MAX`] bytes, so a full stream counts as cut whatever the flag says.
fn truncated(st: &Value, key: &str, data: &[u8]) -> bool {
    st.get(format!("{key}-truncated")).is_some_and(truthy) || data.len() >= AGENT_OUTPUT_MAX
}

/// The readable form of an exec-status answer.
pub(super) fn status_doc(st: &Value) -> Value {
    let data = |k: &str| pve_bytes(st.get(k).and_then(Value::as_str).unwrap_or(""));
    let (out, err) = (data("out-data"), data("err-data"));
    let mut doc = json!({
        "exited": st.get("exited").is_some_and(truthy),
        "exitcode": st.get("exitcode"),
        "signal": st.get("signal"),
        "stdout": String::from_utf8_lossy(&out),
        "stderr": String::from_utf8_lossy(&err),
        "out_truncated": truncated(st, "out", &out),
        "err_truncated": truncated(st, "err", &err),
    });
    if std::str::from_utf8(&out).is_err() {
        doc["stdout_base64"] = json!(base64(&out));
    }
    if std::str::from_utf8(&err).is_err() {
        doc["stderr_base64"] = json!(base64(&err));
    }
    doc
}

/// Turn the guest agent's refusals into messages that say what to do. Only the real texts
/// count (qemu-server e6352be67f70 `src/PVE/QemuServer/Agent.pm`): `assert_agent_available`
/// dies with `No QEMU guest agent configured`, `VM N is not running` or `QEMU guest agent is
/// not running`; what the agent itself refuses comes back as `Agent error: <desc>`
/// (`check_agent_error`), and a command left out of the agent's allowed RPCs is QEMU's
/// `Command guest-exec has been disabled[: the command is not allowed]` (qapi/qmp-dispatch.c;
/// REAL `tests/fixtures/pve/qm_guest_exec_disabled_rhel.txt`), the default of RHEL-family guests.
pub(super) fn agent_error(e: Error, inv: &Invocation) -> Error {
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
    let (Error::Remote(msg) | Error::WrongState(msg)) = &e else {
        return e;
    };
    let with = |hint: String| format!("{hint} ({})", msg.trim());
    if msg.contains("No QEMU guest agent configured") {
        Error::Remote(with(format!(
            "VM {vmid} has no guest agent configured: enable it (`agent: 1` in its config), install qemu-guest-agent in the guest and restart the VM"
        )))
    } else if msg.contains("QEMU guest agent is not running") {
        Error::Remote(with(format!(
            "the guest agent of VM {vmid} does not answer: is qemu-guest-agent installed and running in the guest?"
        )))
    } else if msg.contains(&format!("VM {vmid} is not running")) {
        Error::WrongState(with(format!(
            "VM {vmid} is not running: start it first (`pxagent vm start {vmid}`)"
        )))
    } else if msg.contains("Agent error: Command guest-") && msg.contains("has been disabled") {
        Error::Remote(with(format!(
            "the guest agent of VM {vmid} refuses this command: it runs with a list of allowed RPCs that leaves it out (RHEL-family guests ship FILTER_RPC_ARGS=\"--allow-rpcs=…\" in /etc/sysconfig/qemu-ga; elsewhere qemu-ga's --allow-rpcs/--block-rpcs); add guest-exec and guest-exec-status (and guest-file-open, -read, -write, -close for --push/--pull) in the guest and restart qemu-guest-agent"
        )))
    } else {
        e
    }
}

// ---------------------------------------------------------------------------------------
// Containers: `pct exec`
