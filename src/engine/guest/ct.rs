//! Containers through `pct exec`: the node, config and status reads that decide, then the
//! command, with pushes and pulls over the exec's own stdin/stdout (`tee`, `cat`), never
//! `pct push`/`pull`.

use serde_json::{Value, json};

use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::ops;
use crate::engine::Trail;
use crate::remote::Remote;

use super::*;

/// What `ct exec` found out about the container before running anything.
pub(super) struct CtTarget {
    pub(super) vmid: String,
    pub(super) node: String,
}

/// The container must be on the connected node (pct is local), running, and unprivileged
/// unless the policy allows privileged ones. Reads only.
pub(super) async fn ct_target(
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
        return Err(Error::WrongState(format!(
            "container {vmid} is not running (status {}): start it first (`pxagent ct start {vmid}`)",
            status
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
        )));
    }
    Ok(CtTarget { vmid, node })
}

pub(super) async fn ct_flow(
    remote: &Remote,
    c: Checked,
    t: &CtTarget,
    trail: &mut Trail,
) -> Result<Value> {
    trail.argv = c.inv.remote_argv();
    trail.begin(c.inv.op)?;
    for dir in &c.mkdirs {
        let argv = request::mkdir_argv(dir);
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = pct(remote, &t.vmid, &words, None).await?.output;
        if out.exit_status != 0 {
            return Err(super::sync::mkdir_error(
                dir,
                &format!("container {}", t.vmid),
                &json!(out.exit_status),
                &out.stderr_text(),
            ));
        }
    }
    let mut pushed = Vec::new();
    for (local, guest, data) in &c.push {
        let out = pct(remote, &t.vmid, &[TEE, guest], Some(data))
            .await?
            .output;
        if out.exit_status != 0 {
            return Err(super::sync::push_error(
                Error::Remote(format!(
                    "`{TEE}` exited {}: {}",
                    out.exit_status,
                    out.stderr_text().trim()
                )),
                local,
                guest,
                &format!("container {}", t.vmid),
                &format!("ct exec {}", t.vmid),
            ));
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
    let ran = pct(remote, &t.vmid, &words, c.stdin.as_deref()).await?;
    let out = &ran.output;
    let mut doc = json!({
        "exited": true,
        "exitcode": out.exit_status,
        "signal": Value::Null,
        "stdout": out.stdout_text(),
        "stderr": out.stderr_text(),
        "out_truncated": ran.stdout_truncated,
        "err_truncated": ran.stderr_truncated,
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
            if got.stdout_truncated {
                return Err(Error::Remote(format!(
                    "{guest} in container {} is larger than {CT_STREAM_MAX} bytes, the most pxagent pulls: nothing was written to {}",
                    t.vmid,
                    local.display()
                )));
            }
            let got = got.output;
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

/// Run `pct exec VMID -- WORDS…` (through the catalog's `ct.exec` row) with optional stdin,
/// keeping at most [`CT_STREAM_MAX`] bytes of each of its streams (the rest is dropped as it
/// arrives, and the flags say so). A non-zero exit status is the guest command's (pct passes
/// it through) unless sudo refused, which is exit 9 with the way to enable container exec. A
/// program missing in the container is the guest's 127 like any other code (lxc-attach's `…
/// No such file or directory - Failed to exec "P"`, REAL
/// `pct_exec_missing_program_lxc_attach.txt`; [`classify`] tells it from a missing sudo by the
/// shell's own line).
///
/// [`classify`]: crate::remote::classify
pub(super) async fn pct(
    remote: &Remote,
    vmid: &str,
    words: &[&str],
    stdin: Option<&[u8]>,
) -> Result<crate::ssh::Bounded> {
    let argv: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    let inv = step_inv(
        &ops::CT_EXEC,
        &[
            ("vmid", vmid),
            ("command", &serde_json::to_string(&argv).unwrap_or_default()),
        ],
    )?;
    let remote_argv = inv.remote_argv();
    let result = remote
        .session
        .exec_bounded(&remote_argv, stdin, CT_STREAM_MAX)
        .await;
    let crate::ssh::Bounded {
        output: out,
        stdout_truncated,
        stderr_truncated,
    } = result.map_err(|e| match e {
        Error::Connection(m) if m.contains("timed out") => Error::Connection(format!(
            "{m}; the command inside container {vmid} may still be running"
        )),
        e => e,
    })?;
    // A gated host's refusal is not the guest command's exit status.
    if let Some(r) = crate::remote::gate_refusal(&out) {
        return Err(Error::Host(Box::new(r)));
    }
    if out.exit_status != 0
        && let Err(Error::SudoRefused(m)) =
            crate::remote::classify(&out, &remote_argv, &remote.target)
    {
        return Err(Error::SudoRefused(format!(
            "{m}; container exec is in no sudoers profile: render the host's file with `pxagent sudoers render --ct-exec {vmid}` (or a range holding {vmid})"
        )));
    }
    Ok(crate::ssh::Bounded {
        output: out,
        stdout_truncated,
        stderr_truncated,
    })
}

pub(super) async fn ct_sha256(remote: &Remote, vmid: &str, path: &str) -> Result<String> {
    let out = pct(remote, vmid, &[SHA256SUM, path], None).await?.output;
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
