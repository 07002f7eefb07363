//! `pxagent health`: the checks of [`crate::engine::health`] on one host, printed. Exit 0
//! when nothing is a warning or critical, exit 5 (`unhealthy`) otherwise; the invocation has
//! one audit record, `health`.

use serde_json::Value;

use super::{Failure, open};
use crate::base::runtime::runtime;
use crate::config::context::Context;
use crate::engine::Trail;
use crate::engine::health::{Options, denied_by, human, report, unhealthy};
use crate::output::{self, Format, Output};

/// Run the checks on the context's host and print the report.
pub fn health(
    ctx: &Context,
    opts: &Options,
    out: &mut Output,
    trail: &mut Trail,
) -> std::result::Result<u8, Failure> {
    let target = super::resolve(ctx, out, trail).map_err(|e| (e, None))?;
    let report = runtime()
        .and_then(|rt| {
            rt.block_on(async {
                let remote = open(ctx, &target).await?;
                let r = report(&remote, &|op| denied_by(&ctx.policy, op), opts).await;
                remote.session.close().await;
                r
            })
        })
        .map_err(|e| (e, None))?;
    let data = serde_json::to_value(&report).unwrap_or(Value::Null);
    if !report.healthy {
        if out.format == Format::Table {
            output::write_human(&human(&data));
        }
        return Err((unhealthy(&report), Some(data)));
    }
    out.success("health", data, human);
    Ok(0)
}
