//! `pxagent undo [RECORD]` and `undo --list`: take a change back by the inverse its audit
//! record names, once, through the same policy, phrase and approval as any op.
//!
//! A change's completion record holds its inverse (`undo`: start → shutdown, snapshot → delete
//! it, `set` → `set` back to the values read before, migrate → migrate back, create → destroy)
//! and, when the policy's `snapshot_before` took one, the snapshot (`snapshot`), whose rollback
//! is offered (`--rollback`, or when the op has no inverse). The undo runs as the inverse op
//! with its own audit records, which name the record they undo (`undoes`), so a record is
//! undone once. A `set` back is refused as a `conflict` when the guest no longer holds what the
//! change set (someone changed it since), and is pinned to the config it was checked against.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::audit::{self, Record};
use crate::base::error::{Error, Result};
use crate::base::runtime::runtime;
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, Undo};
use crate::cli::settings::Settings;
use crate::config::context::Context;
use crate::engine::Trail;
use crate::output::Output;
use crate::views::Filter;

/// How many changes `undo --list` shows.
const LISTED: usize = 20;

/// One change of the audit log as undo sees it.
struct Change<'a> {
    /// The `started` record.
    sent: &'a Record,
    /// Its completion.
    done: &'a Record,
    /// The record of the undo that took it back, if any.
    undone_by: Option<u64>,
}

impl Change<'_> {
    /// Why it has no inverse (from its row), when it has none.
    fn why_not(&self) -> Option<String> {
        if self.done.undo.is_some() {
            return None;
        }
        let op = catalog::find(&self.sent.op);
        Some(match op.map(|o| o.undo) {
            Some(Undo::None(why)) => why.to_string(),
            Some(_) => {
                "its inverse could not be built when it ran (see `pxagent audit show`)".into()
            }
            None => "it is no op of this pxagent's catalog".into(),
        })
    }

    fn json(&self) -> Value {
        // As typed: without the digest the change was pinned to.
        let command = sent_values(self.sent)
            .ok()
            .and_then(|v| catalog::find(&self.sent.op).map(|op| (op, v)))
            .and_then(|(op, mut v)| {
                if let Some(pin) = op.pinned_digest() {
                    v.remove(pin);
                }
                Invocation::new(op, v).ok()
            })
            .map(|i| i.display());
        let undo_command = self
            .done
            .undo
            .as_ref()
            .and_then(|_| inverse(self, false).ok())
            .map(|i| i.display());
        json!({
            "record": self.sent.seq,
            "time": self.sent.time,
            "host": self.sent.host,
            "op": self.sent.op,
            "command": command,
            "undo": self.done.undo,
            "undo_command": undo_command,
            "rollback": self.done.snapshot,
            "no_inverse": self.why_not(),
            "undone_by": self.undone_by,
            "undoes": self.sent.undoes,
        })
    }
}

/// The changes of the log that completed (exit 0), oldest first.
fn changes(records: &[Record]) -> Vec<Change<'_>> {
    let by_seq: BTreeMap<u64, &Record> = records.iter().map(|r| (r.seq, r)).collect();
    let mut undone: BTreeMap<u64, u64> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.started.is_some() && r.exit_code == 0)
    {
        if let (Some(of), Some(started)) = (r.undoes, r.started) {
            undone.entry(of).or_insert(started);
        }
    }
    records
        .iter()
        .filter(|r| r.phase == Some(audit::Phase::Done) && r.exit_code == 0)
        .filter_map(|done| {
            let sent = by_seq.get(&done.started?)?;
            Some(Change {
                sent,
                done,
                undone_by: undone.get(&sent.seq).copied(),
            })
        })
        .collect()
}

/// `undo --list`: the last changes, each with its inverse or why it has none.
pub fn list(trail: &mut Trail, out: &mut Output) -> Result<u8> {
    trail.audited = false;
    let records = audit::read(&log_path(trail)?, None)?;
    let all = changes(&records);
    let shown: Vec<Value> = all
        .iter()
        .rev()
        .take(LISTED)
        .rev()
        .map(Change::json)
        .collect();
    out.success("undo.list", Value::Array(shown), |d| {
        let mut s = String::new();
        for c in d.as_array().into_iter().flatten() {
            let how = if let Some(by) = c["undone_by"].as_u64() {
                format!("undone by record {by}")
            } else if let Some(u) = c["undo_command"].as_str() {
                let mut h = format!("undo: {u}");
                if let Some(snap) = c["rollback"].as_str() {
                    h.push_str(&format!(" (or --rollback to {snap})"));
                }
                h
            } else if let Some(snap) = c["rollback"].as_str() {
                format!("undo: rollback to {snap}")
            } else {
                format!("no inverse: {}", c["no_inverse"].as_str().unwrap_or("?"))
            };
            s.push_str(&format!(
                "{:>6}  {}  {}  {}\n",
                c["record"],
                c["time"].as_str().unwrap_or(""),
                c["command"].as_str().unwrap_or(""),
                how
            ));
        }
        if s.is_empty() {
            s.push_str("no completed change in the audit log\n");
        }
        s
    });
    Ok(0)
}

/// `undo [RECORD] [--rollback]`: run the inverse of record `seq` (default: this host's last
/// change that can be undone and is no undo itself).
pub fn undo(
    s: &Settings,
    ctx: &Context,
    seq: Option<u64>,
    rollback: bool,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<u8> {
    let records = audit::read(&log_path(trail)?, None)?;
    let all = changes(&records);
    let target = super::resolve(ctx, out, trail)?;
    let host = target.display();
    let change = match seq {
        Some(n) => all
            .iter()
            .find(|c| c.sent.seq == n || c.done.seq == n)
            .ok_or_else(|| {
                Error::usage(format!(
                    "record {n} is not a change that completed (exit 0) in the audit log: `pxagent undo --list` shows what can be undone"
                ))
            })?,
        // The last change, not an older one that happens to have an inverse: when the last
        // has none, undo says so rather than reaching past it.
        None => all
            .iter()
            .rev()
            .filter(|c| c.sent.host.as_deref() == Some(host.as_str()))
            .find(|c| c.undone_by.is_none() && c.sent.undoes.is_none())
            .ok_or_else(|| {
                Error::usage(format!(
                    "no change on {host} left to undo: `pxagent undo --list` shows the log's changes"
                ))
            })?,
    };
    let n = change.sent.seq;
    if let Some(by) = change.undone_by {
        return Err(Error::usage(format!(
            "record {n} ({}) was undone already, by record {by}",
            change.sent.op
        )));
    }
    if change.sent.host.as_deref() != Some(host.as_str()) {
        return Err(Error::usage(format!(
            "record {n} ran on {}, not {host}: undo it against that host (-H)",
            change.sent.host.as_deref().unwrap_or("an unknown host")
        )));
    }
    let inv = inverse(change, rollback)?;
    trail.undoes = Some(n);
    if s.dry_run {
        return super::op::run_op(s, ctx, &inv, &Filter::default(), out, trail);
    }
    let connector = ctx.connector(target);
    let rt = runtime()?;
    let inv = match inv.op.pinned_digest() {
        Some(param) => rt.block_on(async {
            let r = still_as_set(&connector, change, &inv, param).await;
            if r.is_err() {
                connector.close().await;
            }
            r
        })?,
        None => inv,
    };
    super::op::run_connected(
        &rt,
        s,
        ctx,
        &inv,
        &Filter::default(),
        &connector,
        out,
        trail,
    )
}

/// The invocation that takes `change` back: its inverse, or with `rollback` (or when it has
/// none) the rollback to the snapshot taken before it.
fn inverse(change: &Change, rollback: bool) -> Result<Invocation> {
    let n = change.sent.seq;
    let step = change.done.undo.as_ref().filter(|_| !rollback);
    if let Some(step) = step {
        let op = catalog::find(&step.op).ok_or_else(|| {
            Error::usage(format!(
                "record {n}'s inverse {} is no op of this pxagent",
                step.op
            ))
        })?;
        let values = op
            .params
            .iter()
            .filter_map(|p| step.values.get(p.name).map(|v| (p.name, v.clone())))
            .collect();
        return Invocation::new(op, values);
    }
    let Some(snapshot) = &change.done.snapshot else {
        return Err(Error::usage(match (rollback, change.why_not()) {
            (true, _) => format!(
                "record {n} ({}) took no snapshot first (the policy's snapshot_before did not name it): there is nothing to roll back to",
                change.sent.op
            ),
            (false, Some(why)) => format!("record {n} ({}) has no inverse: {why}", change.sent.op),
            (false, None) => format!("record {n} ({}) has no inverse", change.sent.op),
        }));
    };
    let op = catalog::find(&change.sent.op)
        .and_then(catalog::Op::snapshots)
        .map(|(_, rollback_op)| rollback_op)
        .ok_or_else(|| {
            Error::usage(format!(
                "record {n} ({}) is no change of a guest pxagent can roll back",
                change.sent.op
            ))
        })?;
    let vmid = sent_values(change.sent)?
        .get("vmid")
        .cloned()
        .ok_or_else(|| Error::usage(format!("record {n} names no guest")))?;
    Invocation::new(
        op,
        BTreeMap::from([("vmid", vmid), ("snapshot", snapshot.clone())]),
    )
}

/// The values record `sent`'s command line carried.
fn sent_values(sent: &Record) -> Result<BTreeMap<&'static str, String>> {
    sent.read_back().map(|(_, values)| values).ok_or_else(|| {
        Error::usage(format!(
            "record {} holds no catalog command line pxagent can read back",
            sent.seq
        ))
    })
}

/// For a `set` back: the guest must still hold what the change set (else someone changed it
/// since, and setting it back would clobber that: `conflict`); the set back is then pinned to
/// the config just read.
async fn still_as_set(
    connector: &crate::engine::OnceConnector,
    change: &Change<'_>,
    inv: &Invocation,
    param: &'static str,
) -> Result<Invocation> {
    use crate::engine::Connector;
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
    let now = connector.remote().await?.guest_config(inv).await?;
    let set = sent_values(change.sent)?;
    let changed: Vec<String> = inv
        .op
        .needs_one_of
        .iter()
        .filter_map(|k| set.get(k).map(|v| (k, v)))
        .filter_map(|(k, v)| {
            let held = catalog::undo::config_value(&now, k);
            (held.as_deref() != Some(v.as_str())).then(|| {
                format!(
                    "{k} is now {}, not {v}",
                    held.map(|h| crate::base::text::printable(&h))
                        .unwrap_or_else(|| "unset".into())
                )
            })
        })
        .collect();
    if !changed.is_empty() {
        return Err(Error::Conflict(format!(
            "guest {vmid} changed since record {} set it ({}): setting it back would overwrite that; nothing was sent",
            change.sent.seq,
            changed.join(", ")
        )));
    }
    let digest = now["digest"].as_str().ok_or_else(|| {
        Error::Remote("the guest's config has no digest to pin the set back to".into())
    })?;
    let mut values = inv.values.clone();
    values.insert(param, digest.to_string());
    let mut pinned = Invocation::new(inv.op, values)?;
    // What the set back is made against: its own record's inverse (the redo) comes from it.
    pinned.attach.read_config = Some(now);
    Ok(pinned)
}

/// The audit log.
fn log_path(trail: &Trail) -> Result<std::path::PathBuf> {
    trail
        .log
        .clone()
        .or_else(audit::default_path)
        .ok_or_else(|| Error::usage("there is no HOME or XDG_STATE_HOME, so no audit log"))
}
