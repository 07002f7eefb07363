//! `pxagent vm exec|ct exec … -- PROGRAM ARGS…` from the command line: a dry run, or a run
//! through the engine over one connection; the guest's stdout on stdout and its stderr on
//! stderr at a terminal (control characters escaped there), one JSON document otherwise.

use serde_json::{Value, json};

use crate::base::error::Result;
use crate::base::runtime::runtime;
use crate::cli::settings::Settings;
use crate::config::context::Context;
use crate::engine::guest::GuestRequest;
use crate::engine::{Connector, OnceConnector, Trail};
use crate::output::{self, Format, Output};

/// Run (or dry-run) one guest command. With `exit_code` (`--exit-code`), pxagent exits with
/// the guest command's own exit code once the command ran (128+N when signal N killed it).
pub fn exec(
    s: &Settings,
    ctx: &Context,
    req: &GuestRequest,
    exit_code: bool,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<u8> {
    let op = req.op;
    // One runtime for everything below: the connection lives in it.
    let rt = runtime()?;
    // A guest given by name is looked up first, on the connection the command then uses.
    let mut opened = None;
    let resolved;
    let req = if crate::catalog::invocation::is_guest_name(&req.vmid) {
        let connector = ctx.connector(exec_target(ctx, req, out, trail)?);
        let r = resolve_name(&rt, &connector, req);
        if r.is_err() || s.dry_run {
            rt.block_on(connector.close());
        }
        resolved = r?;
        opened = Some(connector);
        &resolved
    } else {
        req
    };
    if s.dry_run {
        let data = crate::engine::dry_run_exec(&ctx.policy, req, trail)?;
        out.success(op.id, data, |d| {
            format!(
                "{} (risk: exec)\n  remote:   {}\n  sudoers:  {}\n  policy:   {}\n  limits:   {}\n  dry run: nothing was sent",
                op.id,
                d["command"].as_str().unwrap_or(""),
                d["sudoers_rule"].as_str().unwrap_or(""),
                d["policy"].as_str().unwrap_or(""),
                d["limits"]
            )
        });
        return Ok(0);
    }
    let connector = match opened {
        Some(c) => c,
        None => ctx.connector(exec_target(ctx, req, out, trail)?),
    };
    let engine = ctx.engine(&connector, !s.no_input);
    // Once the command is sent, a signal still leaves its audit record.
    let armed = trail.sending();
    let data = rt.block_on(async {
        let r = crate::base::signals::interruptible(
            engine.exec(req, s.confirm.as_deref(), trail),
            &armed,
            || {},
        )
        .await;
        connector.close().await;
        r
    });
    let data = match data {
        Ok(r) => r?,
        Err(sig) => return Err(trail.interrupt(sig.name(), &quote_guest(req))),
    };
    match out.format {
        Format::Json => out.success(op.id, data.clone(), |_| String::new()),
        Format::Table => {
            // At a terminal the guest's bytes are escaped (they come from an untrusted guest);
            // into a pipe or file they pass as they are.
            output::guest_output(data["stdout"].as_str().unwrap_or(""), false);
            output::guest_output(data["stderr"].as_str().unwrap_or(""), true);
            for (k, what) in [("out_truncated", "stdout"), ("err_truncated", "stderr")] {
                if data[k] == json!(true) {
                    output::note(format!("the guest agent truncated the command's {what}"));
                }
            }
            for p in data["pulled"].as_array().into_iter().flatten() {
                output::note(format!(
                    "pulled {} to {} ({} bytes, sha256 verified)",
                    p["guest"].as_str().unwrap_or(""),
                    p["local"].as_str().unwrap_or(""),
                    p["bytes"]
                ));
            }
            if let Some(s) = data["pull_skipped"].as_str() {
                output::note(s);
            }
            match (&data["exitcode"], &data["signal"]) {
                (Value::Number(n), _) if n.as_u64() != Some(0) => {
                    output::note(format!("the command exited {n}"))
                }
                (_, Value::Number(s)) => {
                    output::note(format!("the command was killed by signal {s}"))
                }
                _ => {}
            }
        }
    }
    Ok(if exit_code { guest_code(&data) } else { 0 })
}

/// The guest command's own exit code as pxagent's (`--exit-code`): its `exitcode`, or 128+N
/// for a command killed by signal N (as a shell reports it), each taken modulo 256 like any
/// process exit status.
fn guest_code(data: &Value) -> u8 {
    match (data["exitcode"].as_i64(), data["signal"].as_i64()) {
        (Some(code), _) => code.rem_euclid(256) as u8,
        (None, Some(sig)) => (128 + sig).rem_euclid(256) as u8,
        (None, None) => 0,
    }
}

/// The host of a guest command. `ct exec` has no polling loop: without `--timeout`, the
/// exec's default wait bounds every command of the flow, so a `pct exec` that hangs is
/// signalled.
fn exec_target(
    ctx: &Context,
    req: &GuestRequest,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<crate::ssh::Target> {
    let mut target = super::resolve(ctx, out, trail)?;
    if target.command_timeout.is_none() {
        target.command_timeout = Some(req.timeout);
    }
    Ok(target)
}

/// A request whose guest was given by name (`vm exec web -- uname`): the local
/// checks first (exit 2 before anything is sent), then the guest's VMID (and a VM's node)
/// from one read of the cluster's guests.
fn resolve_name(
    rt: &tokio::runtime::Runtime,
    connector: &OnceConnector,
    req: &GuestRequest,
) -> Result<GuestRequest> {
    let mut stand_in = req.clone();
    stand_in.vmid = crate::catalog::kind::VMID_MIN.to_string();
    crate::engine::guest::check_request(&stand_in)?;
    let guest = rt.block_on(async {
        let remote = connector.remote().await?;
        remote.guest_named(req.op, &req.vmid).await
    })?;
    let mut resolved = req.clone();
    resolved.vmid = guest.vmid.to_string();
    if req.op.area == crate::catalog::Area::Vm && resolved.node.is_none() {
        resolved.node = Some(guest.node);
    }
    Ok(resolved)
}

/// The guest command as the user gave it, for messages.
fn quote_guest(req: &GuestRequest) -> String {
    format!(
        "{} {} -- {}",
        req.op.cli.join(" "),
        crate::base::text::printable(&req.vmid),
        crate::base::text::printable(&crate::base::text::quote_argv(&req.argv))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_of_guest_commands() {
        assert_eq!(guest_code(&json!({"exitcode": 3})), 3);
        assert_eq!(guest_code(&json!({"exitcode": 0})), 0);
        assert_eq!(guest_code(&json!({"exitcode": 300})), 44, "modulo 256");
        assert_eq!(guest_code(&json!({"exitcode": -1})), 255);
        assert_eq!(guest_code(&json!({"signal": 9})), 137, "killed: 128+N");
    }
}
