//! `pxagent vm exec|ct exec … -- PROGRAM ARGS…` from the command line: a dry run, or a run
//! through the engine over one connection; the guest's stdout on stdout and its stderr on
//! stderr at a terminal, one JSON document otherwise.

use serde_json::{Value, json};

use crate::cli::settings::Settings;
use crate::context::{Context, runtime};
use crate::engine::Trail;
use crate::error::Result;
use crate::exec::Request;
use crate::output::{self, Format, Output};

/// Run (or dry-run) one guest command.
pub fn exec(
    s: &Settings,
    ctx: &Context,
    req: &Request,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<u8> {
    let op = req.op;
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
    let mut target = super::resolve(ctx, out, trail)?;
    // `ct exec` has no polling loop: without `--timeout`, the exec's default wait bounds every
    // command of the flow, so a `pct exec` that hangs is signalled.
    if target.command_timeout.is_none() {
        target.command_timeout = Some(req.timeout);
    }
    let connector = ctx.connector(target);
    let engine = ctx.engine(&connector, true);
    let data = runtime()?.block_on(async {
        let r = engine.exec(req, s.confirm.as_deref(), trail).await;
        connector.close().await;
        r
    })?;
    match out.format {
        Format::Json => out.success(op.id, data, |_| String::new()),
        Format::Table => {
            output::write_raw(data["stdout"].as_str().unwrap_or(""));
            output::write_stderr(data["stderr"].as_str().unwrap_or(""));
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
    Ok(0)
}
