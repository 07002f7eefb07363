//! Commands inside guests: `vm exec` through the QEMU guest agent, `ct exec`
//! through `pct exec`, each with file sync (`--push LOCAL:GUEST` before, `--pull GUEST:LOCAL`
//! after) — rate-limited and argv-validated.
//!
//! The order is the engine's, stretched over several remote commands: local
//! checks (the argv, guest paths, local files and sizes — exit 2), policy and the argv
//! allowlist (exit 3), the confirmation a policy may demand (exit 4), the rate limit (exit 8,
//! counted only now, see [`crate::policy::limits`]); then the host. Nothing is sent before the rate
//! limit admitted the call, except the reads `ct exec` needs to decide (the container's node,
//! config and status) and the tag lookup of a policy that protects tags.
//!
//! **Exit codes.** pxagent exits 0 when the guest command ran to its end, whatever its own
//! exit code: that code is `exitcode` in the JSON (and a `pxagent: the command exited N` line
//! on stderr at a terminal), so pxagent's own exit codes keep one meaning each — a guest
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

use std::time::Duration;

use serde_json::Value;

use crate::base::error::{Error, Result};
use crate::catalog::guest::{
    CAT, CT_FILE_MAX, CT_STREAM_MAX, FILE_WRITE_MAX_BASE64, MKDIR, SHA256SUM, TEE, VM_PULL_MAX,
    VM_PUSH_MAX, VM_STDIN_MAX,
};
use crate::catalog::invocation::Invocation;
use crate::engine::{Connector, Engine, Trail};

mod ct;
mod request;
mod sync;
mod vm;

use ct::*;
use request::Checked;
pub use request::{GuestRequest, check_request};
pub use sync::{base64, pve_bytes};
use sync::{parent_dir, parse_sum, step_inv, truthy, verify, write_local};
use vm::*;

/// How long `vm exec` waits for the guest command when `--timeout` is not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Run one guest command with its file sync through an engine (the CLI's or the MCP
/// server's): policy, allowlist, confirmation and rate limit first, then the host. `given` is
/// a confirmation phrase passed along. Returns the result document (`data` in JSON).
pub async fn run<C: Connector>(
    engine: &Engine<'_, C>,
    req: &GuestRequest,
    given: Option<&str>,
    trail: &mut Trail,
) -> Result<Value> {
    let c = req.check()?;
    trail.set_argv(&c.inv);
    let policy = engine.policy;
    let tags = if policy.wants_tags(&c.inv) {
        Some(crate::engine::guest_tags(&engine.connector.remote().await?).await?)
    } else {
        None
    };
    let decision = policy.check(&c.inv, tags.as_ref())?;
    policy.check_command(&c.inv, &c.argv)?;
    check_transfers(policy, req, &c.inv)?;
    trail.transfers = req.transfers();
    let policy_confirm = match decision {
        crate::policy::Decision::Confirm(_) => crate::policy::Ask::Policy,
        _ => crate::policy::Ask::No,
    };
    trail.phrase = if engine.interactive {
        crate::policy::confirm::gate(&c.inv, given, &policy_confirm)?
    } else {
        crate::policy::confirm::gate_with(&c.inv, given, &policy_confirm, false, |_| {
            Err(Error::Internal("no terminal to ask".into()))
        })?
    };
    if req.is_vm() {
        crate::policy::limits::admit(c.inv.op, policy)?;
        let remote = engine.connector.remote().await?;
        vm_flow(&remote, c, req.timeout, trail).await
    } else {
        let remote = engine.connector.remote().await?;
        let target = ct_target(&remote, &c.inv, policy).await?;
        crate::policy::limits::admit(c.inv.op, policy)?;
        ct_flow(&remote, c, &target, trail).await
    }
}

/// `vm exec-status VMID PID`: the state and output of a process the agent started. Judged
/// like the other exec ops, the guest's tags included.
pub async fn exec_status<C: Connector>(engine: &Engine<'_, C>, inv: &Invocation) -> Result<Value> {
    let tags = if engine.policy.wants_tags(inv) {
        Some(crate::engine::guest_tags(&engine.connector.remote().await?).await?)
    } else {
        None
    };
    engine.policy.check(inv, tags.as_ref())?;
    crate::policy::limits::admit(inv.op, engine.policy)?;
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

#[cfg(test)]
mod pve_tests;
#[cfg(test)]
mod tests;

/// The policy's `push`/`pull` paths for every file of the request, and with `--mkdir` its
/// command allowlist for each `mkdir -p DIR` (exit 3 before anything is sent).
pub(crate) fn check_transfers(
    policy: &crate::policy::Policy,
    req: &GuestRequest,
    inv: &Invocation,
) -> Result<()> {
    use crate::policy::Transfer;
    for (_, guest) in &req.push {
        policy.check_transfer(inv.op, Transfer::Push, guest)?;
    }
    for (guest, _) in &req.pull {
        policy.check_transfer(inv.op, Transfer::Pull, guest)?;
    }
    for dir in req.mkdirs() {
        policy.check_command(inv, &request::mkdir_argv(&dir))?;
    }
    Ok(())
}

impl GuestRequest {
    /// The files this request moves, as the dry run and the audit record show them:
    /// `push LOCAL -> GUEST`, `pull GUEST -> LOCAL`.
    pub fn transfers(&self) -> Vec<String> {
        let mkdir = self.mkdirs().into_iter().map(|d| format!("mkdir -p {d}"));
        let push = self
            .push
            .iter()
            .map(|(local, guest)| format!("push {} -> {guest}", local.display()));
        let pull = self
            .pull
            .iter()
            .map(|(guest, local)| format!("pull {guest} -> {}", local.display()));
        mkdir.chain(push).chain(pull).collect()
    }

    /// The guest directories `--mkdir` makes before the pushes, each once, in order (none
    /// without `--mkdir`; `/` is never made).
    pub(super) fn mkdirs(&self) -> Vec<String> {
        let mut dirs: Vec<String> = Vec::new();
        if self.mkdir {
            for (_, guest) in &self.push {
                let dir = request::guest_dir(guest);
                if dir != "/" && !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
        dirs
    }
}
