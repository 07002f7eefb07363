//! The commands' bodies, one file per command: each takes typed settings, does its work
//! through a [`Context`] (and, for anything that reaches a host, the engine), and prints
//! through [`Output`].

mod approve;
mod audit;
mod batch;
mod catalog;
mod control;
mod docs;
mod exec;
mod fleet;
mod health;
mod nodes;
mod op;
mod persist;
mod preflight;
mod reconcile;
mod setup;
mod status;
mod sudoers;
mod undo;
mod version;

use crate::base::error::Result;
use crate::cli::settings::{Cmd, Settings};
use crate::config::context::Context;
use crate::engine::Trail;
use crate::output::Output;
use crate::remote::Remote;
use crate::ssh::Target;

pub use super::Failure;

/// Run one typed command. `out` gets the host once it is known; `trail` collects what the
/// audit record needs.
pub fn execute(
    s: &Settings,
    cmd: &Cmd,
    out: &mut Output,
    trail: &mut Trail,
) -> std::result::Result<u8, Failure> {
    let plain = |r: Result<u8>| r.map_err(|e| (e, None));
    match cmd {
        Cmd::Catalog => plain(catalog::catalog(out)),
        Cmd::Skill {
            profile,
            from_host: false,
        } => plain({
            crate::output::write_raw(&crate::catalog::skill::render(*profile));
            Ok(0)
        }),
        Cmd::Skill {
            profile,
            from_host: true,
        } => {
            let ctx = context(s).map_err(|e| (e, None))?;
            no_fleet(s, &ctx, "skill --from-host").map_err(|e| (e, None))?;
            plain(preflight::skill_from_host(&ctx, *profile, out, trail))
        }
        Cmd::Gate(opts) => Ok(crate::host::gate::run(opts)),
        Cmd::SudoersRender(opts) => plain(sudoers::sudoers_render(opts, out)),
        Cmd::SudoersLint { file, user, groups } => sudoers::sudoers_lint(file, user, groups, out),
        Cmd::Approve {
            key,
            ttl,
            statement,
        } => plain(approve::approve(key, *ttl, statement, out)),
        Cmd::Reconcile(seq) => plain(context(s).and_then(|ctx| {
            no_fleet(s, &ctx, "reconcile")?;
            reconcile::reconcile(&ctx, *seq, out, trail)
        })),
        Cmd::Undo { list: true, .. } => plain(undo::list(trail, out)),
        Cmd::Undo {
            record, rollback, ..
        } => plain(context(s).and_then(|ctx| {
            no_fleet(s, &ctx, "undo")?;
            undo::undo(s, &ctx, *record, *rollback, out, trail)
        })),
        Cmd::Control {
            action,
            reason,
            key,
            approval,
            grant,
        } => plain(context(s).and_then(|ctx| {
            no_fleet(s, &ctx, action)?;
            control::control(
                &ctx,
                control::Request {
                    action,
                    reason: reason.as_deref(),
                    key: key.as_deref(),
                    approval: approval.as_deref(),
                    grant: grant.as_ref(),
                },
                out,
                trail,
            )
        })),
        Cmd::SetupRender(opts) => plain(setup::setup_render(opts, out)),
        Cmd::SetupRevoke(opts) => plain(setup::setup_revoke(opts, out)),
        Cmd::AuditShow(filter) => plain(audit::audit_show(filter, out)),
        Cmd::Completions(shell) => plain(docs::completions(*shell)),
        Cmd::Man(path) => plain(docs::man(path)),
        Cmd::Version {
            client_only: true, ..
        } => plain(version::client_only(out)),
        Cmd::Version { inv, .. } => {
            let ctx = context(s).map_err(|e| (e, None))?;
            version::both(s, &ctx, inv, out, trail)
        }
        Cmd::AuditVerify { host: false } => audit::audit_verify(out),
        Cmd::AuditVerify { host: true } => {
            let ctx = context(s).map_err(|e| (e, None))?;
            no_fleet(s, &ctx, "audit verify --host").map_err(|e| (e, None))?;
            audit::host_verify(&ctx, out, trail)
        }
        Cmd::AuditNewChain => plain(audit::audit_new_chain(out)),
        Cmd::Mcp {
            profile,
            list_tools,
            tools,
            full,
        } => plain(context(s).and_then(|ctx| {
            no_fleet(s, &ctx, "the MCP server")?;
            crate::mcp::serve(
                ctx,
                crate::mcp::Options {
                    profile: *profile,
                    list_tools: *list_tools,
                    tools: tools.clone(),
                    full: *full,
                    host_rules: Some(crate::host::preflight::rules_json),
                },
            )
        })),
        Cmd::Preflight(profile) => {
            let ctx = context(s).map_err(|e| (e, None))?;
            no_fleet(s, &ctx, "preflight").map_err(|e| (e, None))?;
            preflight::preflight(&ctx, *profile, out, trail)
        }
        Cmd::Status => plain(context(s).and_then(|ctx| match fleet(s, &ctx)? {
            Some(f) => {
                trail.audited = false;
                fleet::status(s, &ctx, &f, out)
            }
            None => status::status(&ctx, out, trail),
        })),
        Cmd::Health(opts) => {
            let ctx = context(s).map_err(|e| (e, None))?;
            no_fleet(s, &ctx, "health").map_err(|e| (e, None))?;
            health::health(&ctx, opts, out, trail)
        }
        Cmd::Op(inv, filter) => plain(context(s).and_then(|ctx| match fleet(s, &ctx)? {
            Some(f) => {
                // Each host's run is audited on its own.
                trail.audited = false;
                fleet::run_op(s, &ctx, &f, inv, filter, out)
            }
            None => op::run_op(s, &ctx, inv, filter, out, trail),
        })),
        Cmd::AllNodes(a) => plain(context(s).and_then(|ctx| {
            no_fleet(s, &ctx, "--all-nodes")?;
            nodes::all_nodes(s, &ctx, a, out, trail)
        })),
        Cmd::Named(named, filter) => plain(context(s).and_then(|ctx| {
            no_fleet(
                s,
                &ctx,
                "an op on a guest given by name (names differ between hosts; give its VMID)",
            )?;
            op::run_named(s, &ctx, named, filter, out, trail)
        })),
        Cmd::Exec { req, exit_code } => plain(context(s).and_then(|ctx| {
            no_fleet(s, &ctx, "a command inside a guest")?;
            exec::exec(s, &ctx, req, *exit_code, out, trail)
        })),
        Cmd::Batch { stop_on_error } => plain(context(s).and_then(|ctx| {
            let f = fleet(s, &ctx)?;
            batch::run(s, &ctx, f.as_ref(), *stop_on_error)
        })),
        Cmd::PersistStatus => plain(persist::status(out)),
        Cmd::PersistStop => plain(context(s).and_then(|ctx| persist::stop(s, &ctx, out))),
        Cmd::PersistServe => plain(crate::persist::serve()),
    }
}

/// The context of a command that reaches a host: config, effective policy, connection.
fn context(s: &Settings) -> Result<Context> {
    let mut ctx = Context::load(s.config.as_deref(), s.policy.as_deref(), s.connect.clone())?;
    // `--hosts @inventory.yml[:GROUP]`: an Ansible inventory's hosts and groups, as config.
    if let Some(list) = s.hosts.as_deref() {
        crate::config::inventory::load_into(list, &mut ctx.config)?;
    }
    Ok(ctx)
}

/// The hosts of `--hosts` / `--all-hosts`, if given.
fn fleet(s: &Settings, ctx: &Context) -> Result<Option<crate::cli::fleet::Fleet>> {
    crate::cli::fleet::select(s.hosts.as_deref(), s.all_hosts, &ctx.config)
}

/// Refuse `--hosts` for a command that runs on one host only.
fn no_fleet(s: &Settings, ctx: &Context, what: &str) -> Result<()> {
    match fleet(s, ctx)? {
        None => Ok(()),
        Some(_) => Err(crate::base::error::Error::usage(format!(
            "--hosts/--all-hosts are for reads, status, batch and changes of the catalog; run {what} with -H HOST, once per host"
        ))),
    }
}

/// Resolve the SSH target, name it in the output and the audit trail.
fn resolve(ctx: &Context, out: &mut Output, trail: &mut Trail) -> Result<Target> {
    let target = ctx.target()?;
    out.host = Some(target.display());
    trail.host = Some(target.display());
    trail.account = Some(target.user.clone());
    Ok(target)
}

/// Open one connection to `target` (for the commands that talk to the host outside an
/// engine: preflight and status), through a persistent connection when asked to.
async fn open(ctx: &Context, target: &Target) -> Result<Remote> {
    crate::persist::connect(target, ctx.persist()).await
}
