//! Signed grants: a window of write access instead of a signature per call.
//!
//! An approver signs a grant (`pxagent grant --key KEY --ops 'vm.start,vm.snapshot*' --vmids
//! 100-199 --for 2h [--max N]`): a statement with op `host.grant` naming its scope — op ids or
//! globs, VMID ranges, storages — its end, an optional count, and (as every statement) this
//! host's name and machine id and the account. The gate keeps it in the control directory
//! (root's, sticky, shared like the nonces), and then admits each request whose host policy
//! decision is `approve` or `grantable` when a grant covers it: the op matches, every VMID the
//! request names lies in the ranges, every storage it names is listed, the grant has not ended,
//! was not revoked, and has uses left. The host record of such a request names the grant.
//! Confirmation phrases are never waived by a grant.
//!
//! A grant counts only while its signature holds against the approvers file and it names this
//! host and this account: a record planted in the directory, signed by the agent's own key, or
//! made for another account or host admits nothing. An approver revokes one at once with a
//! signed `host.revoke` statement naming it (`pxagent grant revoke ID --key KEY`); root removes
//! its record.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::approval::Subject;
use super::control::{read_record, record_name, signed_record};
use super::{Options, RequestFacts, trusted_file};
use crate::approval::{Approvers, Statement};
use crate::base::gate_protocol::{Envelope, Refusal, RefusalKind};
use crate::catalog::invocation::Invocation;
use crate::catalog::{Kind, OPS};
use crate::host::sudoers::ranges::Ranges;

/// The statement op of a grant, and of its revocation.
pub const GRANT_OP: &str = "host.grant";
/// See [`GRANT_OP`].
pub const REVOKE_OP: &str = "host.revoke";

/// A grant in force.
#[derive(Debug, Clone)]
pub(super) struct Grant {
    /// Its id (the statement's nonce).
    pub id: String,
    /// Op ids or globs.
    pub ops: Vec<String>,
    /// VMID ranges; `None`: any guest.
    pub vmids: Option<Ranges>,
    /// Storages; `None`: any.
    pub storages: Option<Vec<String>>,
    /// When it ends (Unix seconds).
    pub until: u64,
    /// How many requests it admits at most.
    pub max: Option<u64>,
    /// Who signed it.
    pub approver: String,
}

impl Grant {
    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "ops": self.ops,
            "vmids": self.vmids.as_ref().map(Ranges::display),
            "storages": self.storages,
            "until": crate::base::time::format_rfc3339(self.until),
            "max": self.max,
            "approver": self.approver,
        })
    }

    /// Whether this grant's scope holds `inv`.
    fn covers(&self, inv: &Invocation) -> bool {
        let op_ok = self.ops.iter().any(|g| {
            crate::policy::eval::glob_match(g, inv.op.id)
                || inv
                    .op
                    .variant_of
                    .iter()
                    .any(|base| crate::policy::eval::glob_match(g, base.id))
        });
        if !op_ok {
            return false;
        }
        for p in inv.op.params {
            let Some(v) = inv.values.get(p.name) else {
                continue;
            };
            match p.kind {
                Kind::Vmid => {
                    if let Some(r) = &self.vmids
                        && !v.parse::<u64>().is_ok_and(|n| r.contains(n))
                    {
                        return false;
                    }
                }
                Kind::StorageId => {
                    if let Some(s) = &self.storages
                        && !s.iter().any(|x| x == v)
                    {
                        return false;
                    }
                }
                _ => {}
            }
        }
        // A grant for some guests admits no request that names no guest.
        if self.vmids.is_some() && !inv.op.params.iter().any(|p| p.kind == Kind::Vmid) {
            return false;
        }
        true
    }
}

/// The grants of this account on this host in force at `ctx.now`, each verified against the
/// approvers file (an unusable approvers file: none).
pub(super) fn in_force(opts: &Options, ctx: &RequestFacts) -> Vec<Grant> {
    let Ok(entries) = std::fs::read_dir(&opts.control_dir) else {
        return Vec::new();
    };
    if crate::approval::shared_dir(&opts.control_dir, "control directory").is_err()
        || trusted_file(&opts.approvers, ctx.uid).is_err()
    {
        return Vec::new();
    }
    let Ok(approvers) = Approvers::load(&opts.approvers) else {
        return Vec::new();
    };
    let mut grants = Vec::new();
    let mut revoked = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((kind, _)) = record_name(&name) else {
            continue;
        };
        if !matches!(kind, "grant" | "revoke") {
            continue;
        }
        let Some(record) = read_record(&entry.path()) else {
            continue;
        };
        let Some((st, approver)) = verified(&approvers, ctx, &record.statement, &record.signature)
        else {
            continue;
        };
        match (kind, st.op.as_str()) {
            ("grant", GRANT_OP) if st.account == ctx.account => {
                if let Some(g) = grant_of(&st, approver) {
                    grants.push(g);
                }
            }
            ("revoke", REVOKE_OP) => {
                revoked.extend(st.args.get("grant").cloned());
            }
            _ => {}
        }
    }
    grants.retain(|g| g.until > ctx.now && !revoked.contains(&g.id));
    grants.sort_by(|a, b| (a.until, &a.id).cmp(&(b.until, &b.id)));
    grants
}

/// A statement and its approver, when its signature holds and it names this host.
fn verified(
    approvers: &Approvers,
    ctx: &RequestFacts,
    statement: &str,
    signature: &str,
) -> Option<(Statement, String)> {
    let (st, who) = crate::approval::verify(approvers, statement, signature).ok()?;
    let machine_id = ctx.machine_id.as_deref().ok()?;
    (st.host == ctx.host && st.machine_id == machine_id).then(|| {
        (
            st,
            format!("{} {}", who.fingerprint, who.comment)
                .trim()
                .to_string(),
        )
    })
}

/// A grant from its statement's args; `None` when they do not read as one.
fn grant_of(st: &Statement, approver: String) -> Option<Grant> {
    let a = &st.args;
    Some(Grant {
        id: st.nonce.clone(),
        ops: a.get("ops")?.split(',').map(str::to_string).collect(),
        vmids: match a.get("vmids") {
            Some(r) => Some(Ranges::parse("vmids", r).ok()?),
            None => None,
        },
        storages: a
            .get("storages")
            .map(|s| s.split(',').map(str::to_string).collect()),
        until: crate::base::time::parse_rfc3339(a.get("until")?)?,
        max: match a.get("max") {
            Some(m) => Some(m.parse().ok()?),
            None => None,
        },
        approver,
    })
}

/// The grant that admits `inv` now, its use counted (a grant with `max` uses left), if any.
/// `Err`: the use counter cannot be kept (the caller refuses).
pub(super) fn admit(
    opts: &Options,
    ctx: &RequestFacts,
    state: &std::path::Path,
    inv: &Invocation,
) -> Result<Option<Grant>, String> {
    for g in in_force(opts, ctx).into_iter().filter(|g| g.covers(inv)) {
        let Some(max) = g.max else {
            return Ok(Some(g));
        };
        let cap = crate::policy::limits::Cap {
            kind: crate::policy::limits::CapKind::Budget,
            key: format!("grant:{}", g.id),
            max,
            window: g.until.saturating_sub(ctx.now) + 3600,
        };
        match crate::policy::limits::admit_sliding(&state.join("grant-uses.json"), &[cap], ctx.now)?
        {
            Ok(()) => return Ok(Some(g)),
            Err(_) => continue,
        }
    }
    Ok(None)
}

/// Answer a grant `control` envelope: `grant` (sign a new one), `grants` (list), `revoke`.
pub(super) fn control(
    opts: &Options,
    ctx: &RequestFacts,
    env: &Envelope,
    audit: &mut Value,
) -> Result<Value, Box<Refusal>> {
    let c = env.control.clone().unwrap_or_default();
    audit["control"] = json!(c.action);
    let bad = |m: String| Box::new(Refusal::new(RefusalKind::BadRequest, m));
    let unavailable = |m: String| Box::new(Refusal::new(RefusalKind::PolicyUnavailable, m));
    if c.action == "grants" {
        let list: Vec<Value> = in_force(opts, ctx).iter().map(Grant::to_json).collect();
        return Ok(json!({"action": "grants", "grants": list}));
    }
    crate::approval::shared_dir(&opts.control_dir, "control directory").map_err(unavailable)?;
    let (kind, subject) = if c.action == "revoke" {
        let id = c.id.clone().unwrap_or_default();
        if !crate::approval::valid_nonce(&id) {
            return Err(bad(
                "a revocation names the grant's id (32 hex digits, from `pxagent grant list`)"
                    .into(),
            ));
        }
        if !in_force(opts, ctx).iter().any(|g| g.id == id) {
            return Err(Box::new(Refusal::new(
                RefusalKind::PolicyRefused,
                format!(
                    "no grant {id} of this account is in force (ended, revoked, or never made): nothing to revoke"
                ),
            )));
        }
        audit["grant"] = json!(id);
        (
            "revoke",
            Subject {
                op: REVOKE_OP.into(),
                args: BTreeMap::from([("grant".to_string(), id.clone())]),
                display: format!("grant revoke {id}"),
            },
        )
    } else {
        let policy = super::load_policy(opts, ctx).map_err(unavailable)?;
        let args = scope_args(&c, ctx.now, policy.grant_max_for()).map_err(bad)?;
        audit["scope"] = json!(args);
        (
            "grant",
            Subject {
                op: GRANT_OP.into(),
                display: format!(
                    "grant --ops {}",
                    args.get("ops").cloned().unwrap_or_default()
                ),
                args,
            },
        )
    };
    let (approver, id) = signed_record(opts, ctx, env, &subject, kind, audit)?;
    audit["decision"] = json!(if kind == "grant" {
        "granted"
    } else {
        "revoked"
    });
    Ok(json!({
        "action": kind,
        "id": if kind == "grant" { id } else { subject.args["grant"].clone() },
        "approver": approver,
        "grants": in_force(opts, ctx).iter().map(Grant::to_json).collect::<Vec<_>>(),
    }))
}

/// A grant request's scope as statement args, each checked: ops (ids or globs that match a
/// catalog op, never a read-everything `*` alone), VMID ranges, storages, an end within the
/// host's bound, a count.
fn scope_args(
    c: &crate::base::gate_protocol::Control,
    now: u64,
    max_for: u64,
) -> Result<BTreeMap<String, String>, String> {
    let mut args = BTreeMap::new();
    let ops = c.ops.clone().unwrap_or_default();
    if ops.is_empty() {
        return Err("a grant names its ops (--ops vm.start,vm.snapshot*)".into());
    }
    for g in ops.split(',') {
        if g.is_empty()
            || !g
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._*-".contains(&b))
        {
            return Err(format!(
                "--ops: {:?} is not an op id or a glob over them",
                crate::base::text::printable(g)
            ));
        }
        if g.trim_matches('*').is_empty() {
            return Err("--ops: `*` alone would grant every op; name the ops (globs such as vm.snapshot* are fine)".into());
        }
        if !OPS
            .iter()
            .any(|op| crate::policy::eval::glob_match(g, op.id))
        {
            return Err(format!("--ops: {g} matches no op (see `pxagent catalog`)"));
        }
    }
    args.insert("ops".into(), ops);
    if let Some(v) = &c.vmids {
        let r = Ranges::parse("--vmids", v).map_err(|e| e.to_string())?;
        args.insert("vmids".into(), r.display());
    }
    if let Some(s) = &c.storages {
        for id in s.split(',') {
            Kind::StorageId
                .parse("storages", id)
                .map_err(|e| format!("--storages: {e}"))?;
        }
        args.insert("storages".into(), s.clone());
    }
    let until = c.until.ok_or("a grant says when it ends (--for 2h)")?;
    if until <= now {
        return Err("the grant would end before it starts".into());
    }
    if until > now + max_for + crate::approval::CLOCK_SKEW.as_secs() {
        return Err(format!(
            "the grant would last {}, longer than the {} this host's policy allows (grants.max_for)",
            crate::base::time::describe_duration(std::time::Duration::from_secs(until - now)),
            crate::base::time::describe_duration(std::time::Duration::from_secs(max_for))
        ));
    }
    args.insert("until".into(), crate::base::time::format_rfc3339(until));
    if let Some(m) = c.max {
        if m == 0 {
            return Err("--max 0 would admit nothing".into());
        }
        args.insert("max".into(), m.to_string());
    }
    Ok(args)
}
