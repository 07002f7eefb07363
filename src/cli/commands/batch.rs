//! `pxagent batch` from the command line: requests from stdin, result lines on stdout (always
//! JSON Lines, whatever `-o` says), over one connection — or, with `--hosts`, the same
//! requests on every host, each result line labelled with its host (see [`crate::batch`]).

use std::sync::Arc;

use crate::base::error::{Error, Result};
use crate::base::runtime::runtime;
use crate::batch::{self, Options};
use crate::cli::fleet::Fleet;
use crate::cli::settings::Settings;
use crate::config::context::Context;

/// Run the batch; its exit code.
pub fn run(s: &Settings, ctx: &Context, fleet: Option<&Fleet>, stop_on_error: bool) -> Result<u8> {
    // One phrase or approval for a whole batch would confirm every line of it: each line
    // carries its own.
    if s.confirm.is_some() || s.approval.is_some() {
        return Err(Error::usage(
            "batch: give each request its own `confirm` (or `approval`) in its `args`, not --confirm/--approval for all of them",
        ));
    }
    if s.no_wait {
        return Err(Error::usage(
            "batch: --no-wait is not supported; every request runs to its end",
        ));
    }
    let exec_timeout = s
        .connect
        .timeout
        .unwrap_or(crate::engine::guest::DEFAULT_TIMEOUT);
    let policy = Arc::new(ctx.policy.clone());
    // Set by a signal: every batch drops its requests in flight and returns.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let base = Options {
        stop: Some(stop_rx),
        stop_on_error,
        dry_run: s.dry_run,
        exec_timeout,
        label: None,
        host: None,
        account: None,
        refuse_changes: None,
        audit: true,
        refuse_phrases: None,
        taint: Default::default(),
    };
    let stdin = std::io::BufReader::new(std::io::stdin());
    let rt = runtime()?;
    let Some(fleet) = fleet else {
        let target = ctx.target()?;
        let opts = Options {
            host: Some(target.display()),
            account: Some(target.user.clone()),
            ..base
        };
        let connector = Arc::new(ctx.connector(target));
        return rt.block_on(async {
            let lines = batch::read_lines(stdin);
            let code = stopping(
                batch::run(policy, connector.clone(), lines, opts, &mut |l| {
                    crate::output::write_stdout(l)
                }),
                &stop_tx,
            )
            .await;
            // After a signal this waits until the commands in flight were ended on the host.
            connector.close().await;
            code.map_err(interrupted)
        });
    };
    crate::cli::commands::fleet::check(s, fleet, None)?;
    let fleet_run = async {
        // Every host runs the same requests: read them all first.
        let mut all = Vec::new();
        let mut rx = batch::read_lines(stdin);
        while let Some(l) = rx.recv().await {
            all.push(l);
        }
        let all = Arc::new(all);
        let several = fleet.hosts.len() > 1;
        let codes = crate::cli::fleet::each(&fleet.hosts, s.parallel, |host| {
            let (policy, all, base) = (policy.clone(), all.clone(), base.clone());
            Box::pin(async move {
                let mut opts = Options {
                    label: Some(host.to_string()),
                    refuse_changes: (!fleet.named).then(|| {
                        "a batch changes several hosts only when they are listed by name (--hosts a,b), never through a group or --all-hosts".to_string()
                    }),
                    refuse_phrases: several.then(|| {
                        format!("one phrase confirms one host, not the {} of this batch", fleet.hosts.len())
                    }),
                    // Each host's requests are a session of their own.
                    taint: Default::default(),
                    ..base
                };
                let target = match ctx.target_for(host) {
                    Ok(t) => t,
                    Err(e) => {
                        // Every request of this host fails the same way; the others go on.
                        let doc = serde_json::json!({"host": host, "ok": false, "error": e.to_json()});
                        crate::output::write_stdout(&doc.to_string());
                        return e.exit_code();
                    }
                };
                opts.host = Some(target.display());
                opts.account = Some(target.user.clone());
                let connector = Arc::new(ctx.connector(target));
                let lines = batch::lines_from(all);
                let code = batch::run(policy, connector.clone(), lines, opts, &mut |l| {
                    crate::output::write_stdout(l)
                })
                .await;
                connector.close().await;
                code
            })
        })
        .await;
        let failures: Vec<u8> = codes.into_iter().filter(|c| *c != 0).collect();
        crate::base::error::overall_exit_code(&failures)
    };
    rt.block_on(async {
        let code = stopping(fleet_run, &stop_tx).await;
        code.map_err(interrupted)
    })
}

/// Run `work` (batches given the receiving end of `stop`); on SIGINT, SIGTERM or SIGHUP, set
/// `stop` and let `work` end: each batch drops its requests in flight, and each connection's
/// close then waits until their commands were ended on the host.
async fn stopping<F: std::future::Future<Output = u8>>(
    work: F,
    stop: &tokio::sync::watch::Sender<bool>,
) -> std::result::Result<u8, crate::base::signals::Signal> {
    let Ok(mut watch) = crate::base::signals::Watch::new() else {
        return Ok(work.await);
    };
    let mut work = std::pin::pin!(work);
    tokio::select! {
        biased;
        code = &mut work => Ok(code),
        sig = watch.next() => {
            let _ = stop.send(true);
            work.await;
            Err(sig)
        }
    }
}

/// The batch's error after a signal: the requests that were running got `interrupted` audit
/// records (no result lines), and their commands on the host were ended.
fn interrupted(sig: crate::base::signals::Signal) -> Error {
    Error::Connection(format!(
        "interrupted by {}: the requests still running got no result line; pxagent ended their commands on the host (SIGTERM), and their audit records say they were interrupted",
        sig.name()
    ))
}
