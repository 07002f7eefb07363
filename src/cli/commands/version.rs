//! `pxagent version [--client]`: both sides, like `kubectl version` —
//! pxagent's own version, and the Proxmox VE version of the host it reaches (one read,
//! `pve.version`, through the engine like any op). `--client` sends nothing and needs no host.

use serde_json::{Value, json};

use super::Failure;
use crate::base::error::Result;
use crate::base::runtime::runtime;
use crate::catalog::invocation::Invocation;
use crate::cli::settings::Settings;
use crate::config::context::Context;
use crate::engine::Trail;
use crate::output::{Format, Output};

/// pxagent's side: its name, version, and the platform it was built for.
pub fn client() -> Value {
    json!({
        "name": "pxagent",
        "version": crate::VERSION,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

fn client_line(c: &Value) -> String {
    format!(
        "Client: pxagent {} ({} {})",
        c["version"].as_str().unwrap_or("?"),
        c["os"].as_str().unwrap_or("?"),
        c["arch"].as_str().unwrap_or("?")
    )
}

/// `version --client`: the local part only.
pub fn client_only(out: &Output) -> Result<u8> {
    out.success("version", json!({"client": client()}), |d| {
        client_line(&d["client"])
    });
    Ok(0)
}

/// `version`: both sides. When the host cannot be read, the client's part is still shown
/// (stdout in table mode, `data.client` of the JSON error) and the error keeps its exit code.
pub fn both(
    s: &Settings,
    ctx: &Context,
    inv: &Invocation,
    out: &mut Output,
    trail: &mut Trail,
) -> std::result::Result<u8, Failure> {
    if s.dry_run {
        return super::op::run_op(s, ctx, inv, &crate::views::Filter::default(), out, trail)
            .map_err(|e| (e, None));
    }
    let done = (|| {
        let target = super::resolve(ctx, out, trail)?;
        let connector = ctx.connector(target);
        let engine = ctx.engine(&connector, !s.no_input);
        runtime()?.block_on(async {
            let r = engine.execute(inv, None, trail, &mut |_| {}).await;
            connector.close().await;
            r
        })
    })();
    match done {
        Ok(done) => {
            let host = out.host.clone().unwrap_or_default();
            out.success(
                inv.op.id,
                json!({"client": client(), "server": done.data}),
                |d| {
                    let v = &d["server"];
                    format!(
                        "{}\nServer: Proxmox VE {} (release {}, repoid {}) on {host}",
                        client_line(&d["client"]),
                        v["version"].as_str().unwrap_or("?"),
                        v["release"].as_str().unwrap_or("?"),
                        v["repoid"].as_str().unwrap_or("?"),
                    )
                },
            );
            Ok(0)
        }
        Err(e) => {
            if out.format == Format::Table {
                crate::output::write_stdout(&client_line(&client()));
            }
            Err((e, Some(json!({"client": client()}))))
        }
    }
}
