//! `pxagent persist status|stop`: the persistent connections (`--persist`) of this account —
//! list them with what each holds, or end them (with `-H`, only that host's).

use serde_json::{Value, json};

use crate::base::error::Result;
use crate::base::runtime::runtime;
use crate::cli::settings::Settings;
use crate::config::context::Context;
use crate::output::Output;

/// One holder's line: what it holds, or that nobody answers on its socket.
async fn describe(socket: &std::path::Path) -> Value {
    match crate::persist::client::status(socket).await {
        Ok(h) => json!({
            "socket": socket, "running": true, "target": h.target, "pid": h.pid,
            "host_key": h.host_key, "auth_key": h.auth_key, "idle_secs": h.idle_secs,
            "idle_for_secs": h.idle_for_secs, "up_secs": h.up_secs, "commands": h.commands,
        }),
        Err(e) => json!({"socket": socket, "running": false, "error": e.to_string()}),
    }
}

/// List this account's holders.
pub fn status(out: &Output) -> Result<u8> {
    let sockets = crate::persist::sockets()?;
    let list: Vec<Value> = runtime()?.block_on(async {
        let mut v = Vec::new();
        for s in &sockets {
            v.push(describe(s).await);
        }
        v
    });
    out.success("persist.status", json!(list), |d| {
        let rows: Vec<Vec<String>> = d
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| {
                let s = |k: &str| match &h[k] {
                    Value::String(s) => s.clone(),
                    Value::Null => "-".into(),
                    v => v.to_string(),
                };
                if h["running"] == true {
                    vec![
                        s("target"),
                        s("pid"),
                        format!("{}s of {}s", s("idle_for_secs"), s("idle_secs")),
                        s("commands"),
                    ]
                } else {
                    vec![s("socket"), "-".into(), "not answering".into(), "-".into()]
                }
            })
            .collect();
        if rows.is_empty() {
            "no persistent connections".to_string()
        } else {
            crate::output::table(&["TARGET", "PID", "IDLE", "COMMANDS"], &rows)
        }
    });
    Ok(0)
}

/// End this account's holders (with `-H`: only that host's).
pub fn stop(s: &Settings, ctx: &Context, out: &Output) -> Result<u8> {
    let sockets = match &s.connect.host {
        Some(_) => vec![crate::persist::socket_path(&ctx.target()?)?],
        None => crate::persist::sockets()?,
    };
    let stopped: Vec<Value> = runtime()?.block_on(async {
        let mut v = Vec::new();
        for sock in sockets.iter().filter(|p| p.exists()) {
            let d = describe(sock).await;
            let r = crate::persist::client::stop(sock).await;
            if r.is_err() && crate::persist::check_owned(sock, false).is_ok() {
                // Nobody answers: a socket left by a holder that died.
                let _ = std::fs::remove_file(sock);
            }
            v.push(json!({"socket": sock, "target": d["target"], "stopped": r.is_ok()}));
        }
        v
    });
    out.success("persist.stop", json!(stopped), |d| {
        let n = d.as_array().map_or(0, Vec::len);
        format!(
            "stopped {n} persistent connection{}",
            if n == 1 { "" } else { "s" }
        )
    });
    Ok(0)
}
