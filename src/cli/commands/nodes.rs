//! `--all-nodes`: a node-scoped read (`node disks`, `node services`, `storage list`, …) on every
//! online node of the cluster, over one connection. The node list is the cluster's own
//! (`/nodes`, the op `node.list`); then the op runs once per online node, side by side, each
//! through the engine (policy, audit record) as if it had been asked for that node alone. An
//! offline node is listed with an error and not asked.

use std::time::Instant;

use serde_json::{Value, json};

use crate::audit::Via;
use crate::base::error::{Error, Result};
use crate::base::runtime::runtime;
use crate::catalog::invocation::Invocation;
use crate::catalog::ops;
use crate::cli::fleet::HostResult;
use crate::cli::settings::{AllNodes, Settings};
use crate::config::context::Context;
use crate::engine::Trail;
use crate::output::{Format, Output};

/// How many nodes are asked at once.
const PARALLEL: usize = 8;

/// Run `a` on every online node; one result per node, in the cluster's node order.
pub fn all_nodes(
    s: &Settings,
    ctx: &Context,
    a: &AllNodes,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<u8> {
    let target = super::resolve(ctx, out, trail)?;
    // Each node's run has its own audit record (the node list's too), as fleet hosts do.
    trail.audited = false;
    let host = target.display();
    let connector = ctx.connector(target.clone());
    let engine = ctx.engine(&connector, false);
    let audited = |trail: &mut Trail| {
        trail.audited = true;
        trail.host = Some(host.clone());
        trail.account = Some(target.user.clone());
    };
    let rt = runtime()?;
    let results = rt.block_on(async {
        let started = Instant::now();
        let mut t = Trail::default();
        audited(&mut t);
        let list = Invocation::new(&ops::NODE_LIST, Default::default())?;
        let nodes = engine.execute(&list, None, &mut t, &mut |_| {}).await;
        t.record(
            list.op.id,
            Via::Cli,
            nodes.as_ref().err(),
            nodes.as_ref().map_or_else(Error::exit_code, |_| 0),
            started.elapsed(),
        );
        let nodes = nodes?.data;
        let mut names = Vec::new();
        let mut offline = Vec::new();
        for n in nodes.as_array().into_iter().flatten() {
            let Some(name) = n["node"].as_str() else {
                continue;
            };
            if n["status"] == "online" {
                names.push(name.to_string());
            } else {
                offline.push(name.to_string());
            }
        }
        let ran = crate::cli::fleet::each(&names, PARALLEL, |node| {
            let engine = &engine;
            let audited = &audited;
            Box::pin(async move {
                let started = Instant::now();
                let mut t = Trail::default();
                audited(&mut t);
                let result = match a.on(node) {
                    Err(e) => Err(e),
                    Ok(inv) if s.dry_run => {
                        crate::engine::dry_run(&ctx.policy, &inv, &mut t).map(|d| (d, Vec::new()))
                    }
                    Ok(inv) => engine
                        .execute(&inv, None, &mut t, &mut |_| {})
                        .await
                        .map(|d| (a.filter.apply(d.data), d.warnings)),
                };
                let code = result.as_ref().map_or_else(Error::exit_code, |_| 0);
                t.record(
                    a.op.id,
                    Via::Cli,
                    result.as_ref().err(),
                    code,
                    started.elapsed(),
                );
                HostResult {
                    host: node.to_string(),
                    target: None,
                    result,
                }
            })
        })
        .await;
        connector.close().await;
        let mut results = ran;
        for name in offline {
            results.push(HostResult {
                result: Err(Error::WrongState(format!(
                    "node {name} is offline: not asked"
                ))),
                host: name,
                target: None,
            });
        }
        results.sort_by(|x, y| x.host.cmp(&y.host));
        Ok::<_, Error>(results)
    })?;
    match out.format {
        Format::Json => {
            crate::output::write_stdout(&document(a.op.id, &host, &results).to_string())
        }
        Format::Table => crate::output::write_stdout(&crate::cli::fleet::human_of(
            &results,
            |d| {
                if s.dry_run {
                    d["command"].as_str().unwrap_or_default().to_string()
                } else {
                    crate::views::human(a.op.view, d)
                }
            },
            "nodes",
        )),
    }
    Ok(crate::cli::fleet::exit_code(&results))
}

/// `{"ok", "op", "host", "nodes": [{"node", "ok", "data" | "error"}]}`: `ok` when every node
/// answered.
fn document(op: &str, host: &str, results: &[HostResult]) -> Value {
    let nodes = crate::cli::fleet::entries(results, |r| json!({"node": r.host}));
    json!({"ok": results.iter().all(|r| r.result.is_ok()), "op": op, "host": host, "nodes": nodes})
}
