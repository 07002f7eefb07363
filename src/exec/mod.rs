//! Commands inside guests (issue 6): `vm exec` through the QEMU guest agent, `ct exec`
//! through `pct exec`, each with file sync (`--push LOCAL:GUEST` before, `--pull GUEST:LOCAL`
//! after) — rate-limited and argv-validated.
//!
//! The order is the engine's (design §3), stretched over several remote commands: local
//! checks (the argv, guest paths, local files and sizes — exit 2), policy and the argv
//! allowlist (exit 3), the confirmation a policy may demand (exit 4), the rate limit (exit 8,
//! counted only now, see [`crate::limits`]); then the host. Nothing is sent before the rate
//! limit admitted the call, except the reads `ct exec` needs to decide (the container's node,
//! config and status) and the tag lookup of a policy that protects tags.
//!
//! **Exit codes.** pxagent exits 0 when the guest command ran to its end, whatever its own
//! exit code: that code is `exitcode` in the JSON (and a `pxagent: the command exited N` line
//! on stderr at a terminal), so pxagent's codes (design §4) keep one meaning each — a guest
//! command exiting 3 must not read as "refused by policy". Everything else keeps its class:
//! the guest agent missing or not running, a stopped guest, a failed file transfer are exit 1;
//! a timeout is exit 7 (the guest process is reported as left running where nothing can kill
//! it); sudo refusing `pct exec` (no `--ct-exec` in the render) is exit 9.
//!
//! **Files.** VMs: the guest agent's file-write (one call, mode `wb`, no append: at most
//! 60 KiB of base64, so 46080 bytes — larger files are refused before anything is sent) and
//! file-read (at most 16 MiB). Containers: the exec's own stdin/stdout (`/usr/bin/tee PATH`,
//! `/bin/cat PATH`), never `pct push`/`pct pull`, which write host paths as root. Every file is
//! checked after the transfer against `sha256sum` run in the guest; local files are written
//! to a temporary file beside the target and moved into place, never over an existing file
//! without `--force`. Pulls run only when the command exited 0.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::catalog::{self, Kind, Op, ops};
use crate::engine::{Connector, Engine, Trail};
use crate::error::{Error, Result};
use crate::invocation::{Invocation, quote_argv};
use crate::remote::Remote;

/// The guest agent's file-write limit: `content` maxLength 60 KiB of base64.
pub const FILE_WRITE_MAX_BASE64: usize = 60 * 1024;
/// The largest file a VM push can carry (60 KiB of base64 = 46080 bytes).
pub const VM_PUSH_MAX: usize = FILE_WRITE_MAX_BASE64 / 4 * 3;
/// The guest agent's file-read limit ($MAX_READ_SIZE in PVE's Agent.pm).
pub const VM_PULL_MAX: usize = 16 * 1024 * 1024;
/// The guest agent's `input-data` limit (64 KiB).
pub const VM_STDIN_MAX: usize = 64 * 1024;
/// What pxagent sends to or takes from a container in one file or stdin.
pub const CT_FILE_MAX: usize = 64 * 1024 * 1024;
/// How long `vm exec` waits for the guest command when `--timeout` is not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Guest programs of the file sync (absolute: they do not depend on the guest's PATH).
const TEE: &str = "/usr/bin/tee";
const CAT: &str = "/bin/cat";
const SHA256SUM: &str = "/usr/bin/sha256sum";

/// One command to run in a guest, as a front end received it (nothing validated yet).
#[derive(Debug, Clone)]
pub struct Request {
    /// `vm.exec` or `ct.exec`.
    pub op: &'static Op,
    /// The guest's id as given.
    pub vmid: String,
    /// `--node` (VMs only; containers must be on the connected node).
    pub node: Option<String>,
    /// The program, then its arguments.
    pub argv: Vec<String>,
    /// Data for the command's stdin.
    pub stdin: Option<Vec<u8>>,
    /// `(local file, guest path)` to copy in before the command.
    pub push: Vec<(PathBuf, String)>,
    /// `(guest path, local file)` to copy out after it.
    pub pull: Vec<(String, PathBuf)>,
    /// Overwrite existing local files.
    pub force: bool,
    /// How long to wait for the command (VMs; containers: the connection's command timeout).
    pub timeout: Duration,
}

/// A request that passed the local checks.
#[derive(Debug)]
struct Checked {
    inv: Invocation,
    argv: Vec<String>,
    push: Vec<(PathBuf, String, Vec<u8>)>,
    pull: Vec<(String, PathBuf)>,
    /// stdin for `pct exec` (a VM's travels in the invocation as `input_data`).
    stdin: Option<Vec<u8>>,
    force: bool,
}

impl Request {
    /// Parse `--push LOCAL:GUEST` (split at the last `:/`: the guest path is absolute).
    pub fn parse_push(spec: &str) -> Result<(PathBuf, String)> {
        match spec.rfind(":/") {
            Some(i) if i > 0 => Ok((PathBuf::from(&spec[..i]), spec[i + 1..].to_string())),
            _ => Err(Error::usage(format!(
                "--push {}: expected LOCAL:/ABSOLUTE/GUEST/PATH",
                catalog::kind::printable(spec)
            ))),
        }
    }

    /// Parse `--pull GUEST:LOCAL` (split at the last `:`).
    pub fn parse_pull(spec: &str) -> Result<(String, PathBuf)> {
        match spec.rfind(':') {
            Some(i) if spec.starts_with('/') && i + 1 < spec.len() => {
                Ok((spec[..i].to_string(), PathBuf::from(&spec[i + 1..])))
            }
            _ => Err(Error::usage(format!(
                "--pull {}: expected /ABSOLUTE/GUEST/PATH:LOCAL",
                catalog::kind::printable(spec)
            ))),
        }
    }

    fn is_vm(&self) -> bool {
        self.op.area == catalog::Area::Vm
    }

    /// Everything that can be checked without the host (exit 2, nothing sent).
    fn check(&self) -> Result<Checked> {
        let mut raw = std::collections::BTreeMap::new();
        raw.insert("vmid", self.vmid.clone());
        raw.insert(
            "command",
            serde_json::to_string(&self.argv).map_err(|e| Error::Internal(e.to_string()))?,
        );
        if let Some(n) = &self.node {
            if !self.is_vm() {
                return Err(Error::usage(
                    "ct exec takes no --node: `pct exec` runs on the node pxagent connects to",
                ));
            }
            raw.insert("node", n.clone());
        }
        if let Some(data) = &self.stdin {
            if self.is_vm() {
                let text = std::str::from_utf8(data).map_err(|_| {
                    Error::usage(
                        "vm exec --stdin carries text only (the guest agent's input-data is a string); push binary data with --push",
                    )
                })?;
                if data.len() > VM_STDIN_MAX {
                    return Err(Error::usage(format!(
                        "--stdin is {} bytes; the guest agent's input-data takes at most {VM_STDIN_MAX}",
                        data.len()
                    )));
                }
                raw.insert("input_data", text.to_string());
            } else if data.len() > CT_FILE_MAX {
                return Err(Error::usage(format!(
                    "--stdin is {} bytes; ct exec sends at most {CT_FILE_MAX}",
                    data.len()
                )));
            }
        }
        let inv = Invocation::new(self.op, raw)?;
        let mut push = Vec::new();
        for (local, guest) in &self.push {
            let guest = Kind::GuestPath.parse("guest path", guest)?;
            let data = std::fs::read(local).map_err(|source| Error::ReadFile {
                path: local.clone(),
                source,
            })?;
            let max = if self.is_vm() {
                VM_PUSH_MAX
            } else {
                CT_FILE_MAX
            };
            if data.len() > max {
                return Err(Error::usage(if self.is_vm() {
                    format!(
                        "{} is {} bytes; the guest agent's file-write carries at most {FILE_WRITE_MAX_BASE64} bytes of base64 ({VM_PUSH_MAX} bytes of file) and cannot append, so it is refused before sending",
                        local.display(),
                        data.len()
                    )
                } else {
                    format!(
                        "{} is {} bytes; ct exec pushes at most {CT_FILE_MAX}",
                        local.display(),
                        data.len()
                    )
                }));
            }
            push.push((local.clone(), guest, data));
        }
        let mut pull = Vec::new();
        for (guest, local) in &self.pull {
            let guest = Kind::GuestPath.parse("guest path", guest)?;
            if local.as_os_str().is_empty() || local.to_string_lossy().ends_with('/') {
                return Err(Error::usage(format!(
                    "--pull {guest}: name a local file, not a directory"
                )));
            }
            if !self.force && std::fs::symlink_metadata(local).is_ok() {
                return Err(Error::usage(format!(
                    "{} exists; pass --force to overwrite it",
                    local.display()
                )));
            }
            let dir = parent_dir(local);
            if !dir.is_dir() {
                return Err(Error::usage(format!(
                    "cannot pull to {}: {} is not a directory",
                    local.display(),
                    dir.display()
                )));
            }
            pull.push((guest, local.clone()));
        }
        Ok(Checked {
            inv,
            argv: self.argv.clone(),
            push,
            pull,
            stdin: if self.is_vm() {
                None
            } else {
                self.stdin.clone()
            },
            force: self.force,
        })
    }
}

/// The local checks of a request (exit 2, nothing sent): its invocation and the guest argv.
pub fn check_request(req: &Request) -> Result<(Invocation, Vec<String>)> {
    let c = req.check()?;
    Ok((c.inv, c.argv))
}

/// Run one guest command with its file sync through an engine (the CLI's or the MCP
/// server's): policy, allowlist, confirmation and rate limit first, then the host. `given` is
/// a confirmation phrase passed along. Returns the result document (`data` in JSON).
pub async fn run<C: Connector>(
    engine: &Engine<'_, C>,
    req: &Request,
    given: Option<&str>,
    trail: &mut Trail,
) -> Result<Value> {
    let c = req.check()?;
    trail.argv = c.inv.remote_argv();
    let policy = engine.policy;
    let tags = if policy.needs_guest_tags() {
        Some(guest_tags(&engine.connector.remote().await?, &c.inv).await?)
    } else {
        None
    };
    let decision = policy.check(&c.inv, tags.as_deref())?;
    policy.check_command(&c.inv, &c.argv)?;
    let policy_confirm = matches!(decision, crate::policy::Decision::Confirm(_));
    trail.phrase = if engine.interactive {
        crate::confirm::gate(&c.inv, given, policy_confirm)?
    } else {
        crate::confirm::gate_with(&c.inv, given, policy_confirm, false, |_| {
            Err(Error::Internal("no terminal to ask".into()))
        })?
    };
    if req.is_vm() {
        crate::limits::admit(c.inv.op, policy)?;
        let remote = engine.connector.remote().await?;
        vm_flow(&remote, c, req.timeout, trail).await
    } else {
        let remote = engine.connector.remote().await?;
        let target = ct_target(&remote, &c.inv, policy).await?;
        crate::limits::admit(c.inv.op, policy)?;
        ct_flow(&remote, c, &target, trail).await
    }
}

/// `vm exec-status VMID PID`: the state and output of a process the agent started.
pub async fn exec_status<C: Connector>(engine: &Engine<'_, C>, inv: &Invocation) -> Result<Value> {
    engine.policy.check(inv, Some(&[]))?;
    crate::limits::admit(inv.op, engine.policy)?;
    let remote = engine.connector.remote().await?;
    let inv = remote.prepare(inv).await?;
    let out = remote
        .exec(&inv.remote_argv())
        .await
        .map_err(|e| agent_error(e, &inv))?;
    let raw: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::Remote(format!("exec-status did not return JSON: {e}")))?;
    Ok(status_doc(&raw))
}

// ---------------------------------------------------------------------------------------
// VMs: the QEMU guest agent

async fn vm_flow(
    remote: &Remote,
    c: Checked,
    timeout: Duration,
    trail: &mut Trail,
) -> Result<Value> {
    let inv = remote.prepare(&c.inv).await?;
    trail.argv = inv.remote_argv();
    let node = inv.values.get("node").cloned().unwrap_or_default();
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
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
        remote
            .exec(&step.remote_argv())
            .await
            .map_err(|e| agent_error(e, &inv))?;
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
async fn vm_run(remote: &Remote, inv: &Invocation, timeout: Duration) -> Result<(u64, Value)> {
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

/// `sha256sum PATH` in a VM, through the agent.
async fn vm_sha256(
    remote: &Remote,
    vmid: &str,
    node: &str,
    path: &str,
    timeout: Duration,
) -> Result<String> {
    let argv = vec![SHA256SUM.to_string(), path.to_string()];
    let inv = step_inv(
        &ops::VM_EXEC,
        &[
            ("vmid", vmid),
            ("node", node),
            ("command", &serde_json::to_string(&argv).unwrap_or_default()),
        ],
    )?;
    let (_, st) = vm_run(remote, &inv, timeout).await?;
    let doc = status_doc(&st);
    if doc["exitcode"] != json!(0) {
        return Err(Error::Remote(format!(
            "cannot verify {path} in VM {vmid}: `{SHA256SUM} {path}` failed: {}",
            doc["stderr"].as_str().unwrap_or("").trim()
        )));
    }
    parse_sum(doc["stdout"].as_str().unwrap_or(""), path)
}

/// The readable form of an exec-status answer.
fn status_doc(st: &Value) -> Value {
    let data = |k: &str| pve_bytes(st.get(k).and_then(Value::as_str).unwrap_or(""));
    let (out, err) = (data("out-data"), data("err-data"));
    let mut doc = json!({
        "exited": st.get("exited").is_some_and(truthy),
        "exitcode": st.get("exitcode"),
        "signal": st.get("signal"),
        "stdout": String::from_utf8_lossy(&out),
        "stderr": String::from_utf8_lossy(&err),
        "out_truncated": st.get("out-truncated").is_some_and(truthy),
        "err_truncated": st.get("err-truncated").is_some_and(truthy),
    });
    if std::str::from_utf8(&out).is_err() {
        doc["stdout_base64"] = json!(base64(&out));
    }
    if std::str::from_utf8(&err).is_err() {
        doc["stderr_base64"] = json!(base64(&err));
    }
    doc
}

/// Turn the guest agent's refusals into messages that say what to do.
fn agent_error(e: Error, inv: &Invocation) -> Error {
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
    let Error::Remote(msg) = &e else {
        return e;
    };
    let hint = if msg.contains("No QEMU guest agent configured") {
        format!(
            "VM {vmid} has no guest agent configured: enable it (`agent: 1` in its config), install qemu-guest-agent in the guest and restart the VM"
        )
    } else if msg.contains("QEMU guest agent is not running") {
        format!(
            "the guest agent of VM {vmid} does not answer: is qemu-guest-agent installed and running in the guest?"
        )
    } else if msg.contains(&format!("VM {vmid} is not running")) || msg.contains("not running") {
        format!("VM {vmid} is not running: start it first (`pxagent vm start {vmid}`)")
    } else {
        return e;
    };
    Error::Remote(format!("{hint} ({})", msg.trim()))
}

// ---------------------------------------------------------------------------------------
// Containers: `pct exec`

/// What `ct exec` found out about the container before running anything.
struct CtTarget {
    vmid: String,
    node: String,
}

/// The container must be on the connected node (pct is local), running, and unprivileged
/// unless the policy allows privileged ones. Reads only.
async fn ct_target(
    remote: &Remote,
    inv: &Invocation,
    policy: &crate::policy::Policy,
) -> Result<CtTarget> {
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
    let lookup = step_inv(&ops::CT_CONFIG, &[("vmid", &vmid)])?;
    let node = remote.resolve_node(&lookup).await?;
    let local = remote.local_node().await?;
    if node != local {
        return Err(Error::usage(format!(
            "container {vmid} is on node {node}, but pxagent is connected to {local}: `pct exec` reaches only the containers of its own node (Proxmox has no API for container exec); connect to {node} with -H"
        )));
    }
    let config = remote
        .read_op(&ops::CT_CONFIG, &[("vmid", &vmid), ("node", &node)])
        .await?;
    if !config.get("unprivileged").is_some_and(truthy) && !policy.allow_privileged_ct_exec() {
        return Err(Error::Policy(format!(
            "policy refuses ct.exec on {vmid}: container {vmid} is privileged (no `unprivileged: 1` in its config), where root in the container is close to root on the host; set `allow_privileged_ct_exec: true` in the policy to allow it ({})",
            policy.source()
        )));
    }
    let status = remote
        .read_op(&ops::CT_STATUS, &[("vmid", &vmid), ("node", &node)])
        .await?;
    if status.get("status").and_then(Value::as_str) != Some("running") {
        return Err(Error::Remote(format!(
            "container {vmid} is not running (status {}): start it first (`pxagent ct start {vmid}`)",
            status
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
        )));
    }
    Ok(CtTarget { vmid, node })
}

async fn ct_flow(remote: &Remote, c: Checked, t: &CtTarget, trail: &mut Trail) -> Result<Value> {
    let mut pushed = Vec::new();
    for (local, guest, data) in &c.push {
        let out = pct(remote, &t.vmid, &[TEE, guest], Some(data)).await?;
        if out.exit_status != 0 {
            return Err(Error::Remote(format!(
                "pushing {} to {guest} in container {}: `{TEE}` exited {}: {}",
                local.display(),
                t.vmid,
                out.exit_status,
                out.stderr_text().trim()
            )));
        }
        let sum = ct_sha256(remote, &t.vmid, guest).await?;
        verify(
            &sum,
            data,
            &format!("pushing {} to {guest}", local.display()),
        )?;
        pushed.push(json!({"local": local, "guest": guest, "bytes": data.len(), "sha256": sum}));
    }
    trail.argv = c.inv.remote_argv();
    let words: Vec<&str> = c.argv.iter().map(String::as_str).collect();
    let out = pct(remote, &t.vmid, &words, c.stdin.as_deref()).await?;
    let mut doc = json!({
        "exited": true,
        "exitcode": out.exit_status,
        "signal": Value::Null,
        "stdout": out.stdout_text(),
        "stderr": out.stderr_text(),
        "out_truncated": false,
        "err_truncated": false,
    });
    if std::str::from_utf8(&out.stdout).is_err() {
        doc["stdout_base64"] = json!(base64(&out.stdout));
    }
    if std::str::from_utf8(&out.stderr).is_err() {
        doc["stderr_base64"] = json!(base64(&out.stderr));
    }
    let mut pulled = Vec::new();
    if out.exit_status == 0 {
        for (guest, local) in &c.pull {
            let got = pct(remote, &t.vmid, &[CAT, guest], None).await?;
            if got.exit_status != 0 {
                return Err(Error::Remote(format!(
                    "pulling {guest} from container {}: `{CAT}` exited {}: {}",
                    t.vmid,
                    got.exit_status,
                    got.stderr_text().trim()
                )));
            }
            let sum = ct_sha256(remote, &t.vmid, guest).await?;
            verify(&sum, &got.stdout, &format!("pulling {guest}"))?;
            write_local(local, &got.stdout, c.force)?;
            pulled.push(
                json!({"guest": guest, "local": local, "bytes": got.stdout.len(), "sha256": sum}),
            );
        }
    } else if !c.pull.is_empty() {
        doc["pull_skipped"] = json!("the command did not exit 0, so nothing was pulled");
    }
    doc["vmid"] = json!(t.vmid.parse::<u64>().unwrap_or(0));
    doc["node"] = json!(t.node);
    doc["via"] = json!("pct-exec");
    doc["command"] = json!(c.argv);
    doc["pushed"] = json!(pushed);
    doc["pulled"] = json!(pulled);
    Ok(doc)
}

/// Run `pct exec VMID -- WORDS…` (through the catalog's `ct.exec` row) with optional stdin.
/// A non-zero exit status is the guest command's (pct passes it through) unless sudo
/// refused, which is exit 9 with the way to enable container exec.
async fn pct(
    remote: &Remote,
    vmid: &str,
    words: &[&str],
    stdin: Option<&[u8]>,
) -> Result<crate::ssh::Output> {
    let argv: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    let inv = step_inv(
        &ops::CT_EXEC,
        &[
            ("vmid", vmid),
            ("command", &serde_json::to_string(&argv).unwrap_or_default()),
        ],
    )?;
    let remote_argv = inv.remote_argv();
    let result = match stdin {
        Some(data) => remote.session.exec_with_stdin(&remote_argv, data).await,
        None => remote.session.exec(&remote_argv).await,
    };
    let out = result.map_err(|e| match e {
        Error::Connection(m) if m.contains("timed out") => Error::Connection(format!(
            "{m}; the command inside container {vmid} may still be running"
        )),
        e => e,
    })?;
    if out.exit_status != 0
        && let Err(Error::SudoRefused(m)) =
            crate::remote::classify(&out, &remote_argv, &remote.target)
    {
        return Err(Error::SudoRefused(format!(
            "{m}; container exec is in no sudoers profile: render the host's file with `pxagent sudoers render --ct-exec {vmid}` (or a range holding {vmid})"
        )));
    }
    Ok(out)
}

async fn ct_sha256(remote: &Remote, vmid: &str, path: &str) -> Result<String> {
    let out = pct(remote, vmid, &[SHA256SUM, path], None).await?;
    if out.exit_status != 0 {
        return Err(Error::Remote(format!(
            "cannot verify {path} in container {vmid}: `{SHA256SUM} {path}` exited {}: {}",
            out.exit_status,
            out.stderr_text().trim()
        )));
    }
    parse_sum(&out.stdout_text(), path)
}

// ---------------------------------------------------------------------------------------
// Shared pieces

/// A catalog invocation for one step of a flow (already-validated values).
fn step_inv(op: &'static Op, values: &[(&'static str, &str)]) -> Result<Invocation> {
    Invocation::new(
        op,
        values.iter().map(|(k, v)| (*k, v.to_string())).collect(),
    )
}

/// The tags of the guest an invocation names (for a policy that protects tags).
async fn guest_tags(remote: &Remote, inv: &Invocation) -> Result<Vec<String>> {
    let vmid = inv.vmid().unwrap_or(0);
    let resources = remote.read_op(&ops::CLUSTER_RESOURCES, &[]).await?;
    Ok(resources
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r.get("vmid").and_then(Value::as_u64) == Some(vmid))
        .and_then(|r| r.get("tags").and_then(Value::as_str))
        .map(crate::policy::parse_tags)
        .unwrap_or_default())
}

/// pvesh booleans are 0/1 (sometimes strings).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_u64().is_some_and(|n| n != 0),
        Value::String(s) => s == "1" || s == "true",
        _ => false,
    }
}

/// The bytes behind a string PVE decoded from base64: Perl holds them as a byte string and
/// pvesh's JSON encoder writes each byte as the character U+0000–U+00FF, so each character
/// is one byte. (A string with larger characters was real text: its UTF-8 is the data.)
pub fn pve_bytes(s: &str) -> Vec<u8> {
    if s.chars().all(|c| (c as u32) <= 0xFF) {
        s.chars().map(|c| c as u32 as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

/// `sha256sum` prints `HEX  PATH`; take the digest.
fn parse_sum(out: &str, path: &str) -> Result<String> {
    let hex = out.split_whitespace().next().unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err(Error::Remote(format!(
            "cannot verify {path}: `{SHA256SUM}` printed {:?}",
            out.trim()
        )))
    }
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn verify(guest_sum: &str, data: &[u8], what: &str) -> Result<()> {
    let local = sha256_hex(data);
    if local == guest_sum {
        Ok(())
    } else {
        Err(Error::Remote(format!(
            "{what}: checksum mismatch (guest sha256 {guest_sum}, pxagent's {local}); the file was not taken"
        )))
    }
}

fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Write a pulled file atomically: a temporary file beside it, then a hard link (which
/// fails when the target exists: no overwrite without `--force`, even if one appeared since
/// the check) or, with `--force`, a rename.
fn write_local(dest: &Path, data: &[u8], force: bool) -> Result<()> {
    use std::io::Write;
    let dir = parent_dir(dest);
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pull".into());
    let tmp = dir.join(format!(".{name}.pxagent-{}", std::process::id()));
    let fail = |what: &str, e: std::io::Error| {
        Error::Internal(format!("cannot write {}: {what}: {e}", dest.display()))
    };
    let mut f = std::fs::File::create(&tmp).map_err(|e| fail("create a temporary file", e))?;
    f.write_all(data).map_err(|e| fail("write", e))?;
    f.sync_all().map_err(|e| fail("sync", e))?;
    drop(f);
    let r = if force {
        std::fs::rename(&tmp, dest)
    } else {
        std::fs::hard_link(&tmp, dest).and_then(|_| std::fs::remove_file(&tmp))
    };
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            return Err(Error::usage(format!(
                "{} exists; pass --force to overwrite it",
                dest.display()
            )));
        }
        return Err(fail("move into place", e));
    }
    Ok(())
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(raw.as_bytes()), enc);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
        assert_eq!(VM_PUSH_MAX, 46080);
        assert_eq!(base64(&vec![0u8; VM_PUSH_MAX]).len(), FILE_WRITE_MAX_BASE64);
    }

    #[test]
    fn pve_strings_are_bytes() {
        // "é" as UTF-8 (C3 A9) comes back from pvesh as the characters U+00C3 U+00A9.
        assert_eq!(pve_bytes("\u{c3}\u{a9}"), vec![0xc3, 0xa9]);
        assert_eq!(pve_bytes("\u{0}\u{ff}"), vec![0, 0xff]);
        assert_eq!(pve_bytes("€"), "€".as_bytes());
    }

    #[test]
    fn push_and_pull_specs() {
        assert_eq!(
            Request::parse_push("in.txt:/tmp/in.txt").unwrap(),
            (PathBuf::from("in.txt"), "/tmp/in.txt".to_string())
        );
        assert_eq!(
            Request::parse_push("C:/x/in.txt:/tmp/in.txt").unwrap().1,
            "/tmp/in.txt"
        );
        assert!(Request::parse_push("in.txt").is_err());
        assert!(Request::parse_push("in.txt:tmp/x").is_err());
        assert_eq!(
            Request::parse_pull("/tmp/out.txt:out.txt").unwrap(),
            ("/tmp/out.txt".to_string(), PathBuf::from("out.txt"))
        );
        assert!(Request::parse_pull("tmp/out.txt:out.txt").is_err());
        assert!(Request::parse_pull("/tmp/out.txt:").is_err());
    }

    fn req(argv: &[&str]) -> Request {
        Request {
            op: catalog::find("vm.exec").unwrap(),
            vmid: "100".into(),
            node: None,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            stdin: None,
            push: vec![],
            pull: vec![],
            force: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    #[test]
    fn local_checks_refuse_before_sending() {
        assert!(req(&["uname", "-a"]).check().is_ok());
        assert_eq!(req(&[]).check().unwrap_err().exit_code(), 2);
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![7u8; VM_PUSH_MAX + 1]).unwrap();
        let mut r = req(&["true"]);
        r.push = vec![(big, "/tmp/big".into())];
        let e = r.check().unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("46080"), "{e}");
        for bad in ["tmp/x", "/tmp/../etc/shadow", "/tmp/a\nb", "/tmp/"] {
            let mut r = req(&["true"]);
            r.pull = vec![(bad.into(), dir.path().join("x"))];
            assert_eq!(r.check().unwrap_err().exit_code(), 2, "{bad:?}");
        }
        let exists = dir.path().join("exists");
        std::fs::write(&exists, "x").unwrap();
        let mut r = req(&["true"]);
        r.pull = vec![("/tmp/out".into(), exists.clone())];
        assert!(r.check().unwrap_err().to_string().contains("--force"));
        r.force = true;
        assert!(r.check().is_ok());
        let mut r = req(&["cat"]);
        r.stdin = Some(vec![0xff, 0xfe]);
        assert!(r.check().unwrap_err().to_string().contains("text only"));
    }

    #[test]
    fn the_argv_reaches_pvesh_word_by_word() {
        let c = req(&["sh", "-c", "echo a; echo b", "--output-format"])
            .check()
            .unwrap();
        let mut inv = c.inv;
        inv.values.insert("node", "pve1".into());
        assert_eq!(
            inv.argv()[1..],
            [
                "create",
                "/nodes/pve1/qemu/100/agent/exec",
                "--command",
                "sh",
                "--command",
                "-c",
                "--command",
                "echo a; echo b",
                "--command",
                "--output-format",
                "--output-format",
                "json"
            ]
        );
    }

    #[test]
    fn local_files_are_never_overwritten_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        write_local(&p, b"one", false).unwrap();
        let e = write_local(&p, b"two", false).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        write_local(&p, b"two", true).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
