//! `--hosts` / `--all-hosts`: a catalog op or `status` on several hosts, each over
//! its own connection, labelled with its host (see [`crate::cli::fleet`] for the rules: reads side
//! by side, changes only on hosts listed by name, one after another, each confirmed on its own).
//! Every host's run is audited on its own.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::audit::Via;
use crate::base::error::{Error, Result};
use crate::base::runtime::runtime;
use crate::catalog::Risk;
use crate::catalog::invocation::Invocation;
use crate::cli::fleet::{Fleet, HostResult};
use crate::cli::settings::Settings;
use crate::config::context::Context;
use crate::engine::{Engine, Trail};
use crate::output::{Format, Output};
use crate::views::Filter;

/// Refuse what a fleet cannot do before anything is sent.
pub fn check(s: &Settings, f: &Fleet, inv: Option<&Invocation>) -> Result<()> {
    if s.no_wait {
        return Err(Error::usage(
            "--no-wait follows one task: run it with -H HOST, once per host",
        ));
    }
    let several = f.hosts.len() > 1;
    if several && s.approval.is_some() {
        return Err(Error::usage(
            "an approval is signed for one host: run it with -H HOST, once per host",
        ));
    }
    let Some(inv) = inv else {
        return Ok(());
    };
    if inv.op.risk != Risk::Read && !f.named {
        return Err(Error::Policy(format!(
            "`{}` changes something: it runs on several hosts only when they are listed by name (--hosts a,b), never through a group or --all-hosts",
            inv.display()
        )));
    }
    if several && s.confirm.is_some() {
        return Err(Error::ConfirmationRequired {
            message: format!(
                "one phrase confirms `{}` on one host, not on {} hosts",
                inv.display(),
                f.hosts.len()
            ),
            phrase: inv.phrase().unwrap_or_default(),
            hint: Some("at a terminal pxagent asks for the phrase host by host; otherwise run it once per host with -H HOST, each with the phrase the user typed for that host".into()),
            scope: None,
        });
    }
    Ok(())
}

/// A catalog op on every host of the fleet.
pub fn run_op(
    s: &Settings,
    ctx: &Context,
    f: &Fleet,
    inv: &Invocation,
    filter: &Filter,
    out: &Output,
) -> Result<u8> {
    if let Err(e) = check(s, f, Some(inv)) {
        // Refused for all hosts at once: one record naming them.
        let trail = Trail {
            audited: true,
            host: Some(f.hosts.join(",")),
            argv: inv.remote_argv(),
            ..Trail::default()
        };
        trail.record(inv.op.id, Via::Cli, Some(&e), e.exit_code(), Duration::ZERO);
        return Err(e);
    }
    // Changes go host by host (a terminal may ask each one's phrase); reads side by side.
    let parallel = if inv.op.risk == Risk::Read {
        s.parallel
    } else {
        1
    };
    let several = f.hosts.len() > 1;
    let results = runtime()?.block_on(crate::cli::fleet::each(&f.hosts, parallel, |host| {
        Box::pin(async move {
            let started = Instant::now();
            let mut trail = Trail {
                audited: true,
                ..Trail::default()
            };
            let target = ctx.target_for(host);
            let target_name = target.as_ref().ok().map(|t| t.display());
            let result = match target {
                Err(e) => Err(e),
                Ok(t) if s.dry_run => {
                    trail.host = Some(t.display());
                    crate::engine::dry_run(&ctx.policy, inv, &mut trail).map(|d| (d, vec![]))
                }
                Ok(t) => {
                    trail.host = Some(t.display());
                    trail.account = Some(t.user.clone());
                    if several && inv.op.risk != Risk::Read {
                        crate::output::note(format_args!("{host}: {}", inv.display()));
                    }
                    let connector = ctx.connector(t);
                    let engine = Engine {
                        policy: &ctx.policy,
                        connector: &connector,
                        interactive: !s.no_input,
                        taint: None,
                    };
                    let r = engine
                        .execute(inv, s.confirm.as_deref(), &mut trail, &mut |_| {})
                        .await;
                    connector.close().await;
                    r.map(|d| (filter.apply(d.data), d.warnings))
                }
            };
            let code = result.as_ref().map_or_else(|e| e.exit_code(), |_| 0);
            if trail.host.is_none() {
                trail.host = Some(host.to_string());
            }
            trail.record(
                inv.op.id,
                Via::Cli,
                result.as_ref().err(),
                code,
                started.elapsed(),
            );
            HostResult {
                host: host.to_string(),
                target: target_name,
                result,
            }
        })
    }));
    print(out, inv.op.id, &results, |d| crate::engine::human(inv, d));
    Ok(crate::cli::fleet::exit_code(&results))
}

/// `status` on every host of the fleet.
pub fn status(s: &Settings, ctx: &Context, f: &Fleet, out: &Output) -> Result<u8> {
    check(s, f, None)?;
    let results = runtime()?.block_on(crate::cli::fleet::each(&f.hosts, s.parallel, |host| {
        Box::pin(async move {
            let started = Instant::now();
            let mut trail = Trail {
                audited: true,
                host: Some(host.to_string()),
                ..Trail::default()
            };
            let target = ctx.target_for(host);
            let target_name = target.as_ref().ok().map(|t| t.display());
            let result = match target {
                Err(e) => Err(e),
                Ok(t) => {
                    trail.host = Some(t.display());
                    trail.account = Some(t.user.clone());
                    match super::open(ctx, &t).await {
                        Err(e) => Err(e),
                        Ok(remote) => {
                            let r = super::status::summary(&remote).await;
                            remote.session.close().await;
                            r.map(|d| (d, vec![]))
                        }
                    }
                }
            };
            let code = result.as_ref().map_or_else(|e| e.exit_code(), |_| 0);
            trail.record(
                "status",
                Via::Cli,
                result.as_ref().err(),
                code,
                started.elapsed(),
            );
            HostResult {
                host: host.to_string(),
                target: target_name,
                result,
            }
        })
    }));
    print(out, "status", &results, super::status::human);
    Ok(crate::cli::fleet::exit_code(&results))
}

fn print(out: &Output, op: &str, results: &[HostResult], render: impl Fn(&Value) -> String) {
    match out.format {
        Format::Json => {
            crate::output::write_stdout(&crate::cli::fleet::document(op, results).to_string())
        }
        Format::Table => crate::output::write_stdout(&crate::cli::fleet::human(results, render)),
    }
}
