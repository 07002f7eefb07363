//! An op's follow-up steps ([`crate::catalog::Then`]): planned and judged by the policy before
//! the op is sent (a step the policy refuses refuses the whole, exit 3, nothing sent), run after
//! it succeeded, each through [`Engine::execute`] with a trail and an audit record of its own.
//! A step that fails after the op ran is exit 1 (exit 7 when its result was lost), and the
//! message says what did happen.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Connector, Engine, Trail};
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::ops;
use crate::catalog::then::{self, Then};

/// The steps these values ask for, each judged by the local policy now (`inv` is the prepared
/// invocation: its node and a new guest's VMID are known).
pub fn planned(engine_policy: &crate::policy::Policy, inv: &Invocation) -> Result<Vec<Then>> {
    let mut steps = Vec::new();
    for t in inv.op.then.iter().filter(|t| t.wanted(inv)) {
        let step = t.planned(inv, inv.values.get("node").map(String::as_str))?;
        engine_policy.check(&step, None).map_err(|e| match e {
            Error::Policy(m) => Error::Policy(format!(
                "{m} (a step of `{}`, checked before anything is sent)",
                inv.op.cli.join(" ")
            )),
            e => e,
        })?;
        steps.push(*t);
    }
    Ok(steps)
}

/// A valid VMID a dry run plans a new guest's steps with (they need one to be built); it is
/// taken out again, so the line shows `<vmid>`.
const VMID_STAND_IN: &str = "987654321";

/// What a dry run shows of the steps: their remote command lines as planned (a new guest's
/// VMID is known only at run time, and a disk's growth once the guest exists).
pub fn dry_run(inv: &Invocation) -> Value {
    let steps: Vec<Value> = inv
        .op
        .then
        .iter()
        .filter(|t| t.wanted(inv))
        .map(|t| {
            let what = match t {
                Then::GrowTo { disk, size, .. } => format!(
                    "vm resize: {disk} grown to {} GiB (the growth is computed from its size once the VM exists)",
                    inv.values.get(size).map(String::as_str).unwrap_or("?")
                ),
                Then::CloudInit { .. } => "vm cloudinit-set: the address and DNS given".into(),
                Then::CloudInitKeys { .. } => "vm cloudinit-keys: the user and keys given".into(),
            };
            // Planned as far as it is known: a new guest's VMID shows as `<vmid>` (as in the
            // op's own line) and a growth, known once the VM exists, as `+<growth>G` — never
            // the stand-ins the step is planned with.
            let guest = match t {
                Then::GrowTo { vmid, .. }
                | Then::CloudInit { vmid }
                | Then::CloudInitKeys { vmid } => *vmid,
            };
            let mut known = inv.clone();
            let unknown = !known.values.contains_key(guest);
            if unknown {
                known.values.insert(guest, VMID_STAND_IN.to_string());
            }
            // The catalog shows a value a line lacks as `<name>`.
            let argv = t
                .planned(&known, inv.values.get("node").map(String::as_str))
                .map(|mut s| {
                    if unknown {
                        s.values.remove("vmid");
                    }
                    if let Then::GrowTo { .. } = t {
                        s.values.insert("size", "+<growth>G".to_string());
                    }
                    json!(s.remote_argv())
                })
                .unwrap_or(Value::Null);
            json!({"then": what, "argv": argv})
        })
        .collect();
    Value::Array(steps)
}

impl<C: Connector> Engine<'_, C> {
    /// Run `step`, an op of its own within the invocation of `trail` (a follow-up step, one
    /// node's line of a backup job run), through [`Engine::execute`] with a trail and an audit
    /// record of its own.
    pub(super) async fn run_step(
        &self,
        step: &Invocation,
        given: Option<&str>,
        trail: &Trail,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<super::Done> {
        let mut sub = Trail {
            audited: trail.audited,
            host: trail.host.clone(),
            account: trail.account.clone(),
            via: trail.via,
            log: trail.log.clone(),
            ..Trail::default()
        };
        let at = Instant::now();
        let r = Box::pin(self.execute(step, given, &mut sub, progress)).await;
        let code = r.as_ref().err().map_or(0, Error::exit_code);
        sub.record(step.op.id, trail.via, r.as_ref().err(), code, at.elapsed());
        r
    }

    /// Run `steps` after `inv` succeeded on `node`; returns what each did.
    pub(super) async fn follow_up(
        &self,
        inv: &Invocation,
        node: &str,
        steps: &[Then],
        trail: &Trail,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Vec<Value>> {
        let mut done = Vec::new();
        for t in steps {
            let step = match t {
                Then::CloudInit { .. } | Then::CloudInitKeys { .. } => {
                    t.planned(inv, Some(node))?
                }
                Then::GrowTo { vmid, disk, size } => {
                    let id = inv.values.get(vmid).map(String::as_str).unwrap_or_default();
                    let cfg = self
                        .connector
                        .remote()
                        .await?
                        .read_op(&ops::VM_CONFIG, &[("vmid", id), ("node", node)])
                        .await?;
                    let now = cfg[*disk]
                        .as_str()
                        .and_then(then::disk_bytes)
                        .ok_or_else(|| {
                            Error::Remote(format!(
                                "`{}` created VM {id}, but its {disk} has no size to grow from: {}",
                                inv.op.cli.join(" "),
                                crate::base::text::printable(&cfg[*disk].to_string())
                            ))
                        })?;
                    let target: u64 = inv.values[size].parse().unwrap_or(0);
                    match then::growth(now, target) {
                        Some(by) => then::grow(id, disk, &by, Some(node))?,
                        None => {
                            done.push(json!({
                                "op": ops::VM_RESIZE.id,
                                "changed": false,
                                "message": format!("{disk} is already {} GiB, at least the {target} GiB asked", now >> 30),
                            }));
                            continue;
                        }
                    }
                }
            };
            let r = self.run_step(&step, None, trail, progress).await;
            match r {
                Ok(d) => done.push(json!({
                    "op": step.op.id,
                    "command": step.display(),
                    "argv": step.remote_argv(),
                    "changed": true,
                    "result": d.data,
                })),
                Err(e) => {
                    let msg = format!(
                        "`{}` succeeded, but its step `{}` failed ({}): {e}",
                        inv.display(),
                        step.display(),
                        e.kind()
                    );
                    return Err(match e {
                        Error::Connection(_) => Error::Connection(msg),
                        _ => Error::Remote(msg),
                    });
                }
            }
        }
        Ok(done)
    }
}
