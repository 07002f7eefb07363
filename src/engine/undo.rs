//! The engine's part of undo: a change's inverse noted for its audit record
//! ([`crate::catalog::undo`]), and the snapshot a policy's `snapshot_before` asks for before a
//! change, taken as an op of its own (its own audit record, policy and rate limit).

use std::collections::BTreeMap;

use super::{Connector, Engine, Trail};
use crate::audit::UndoStep;
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;

/// The inverse of the change `prepared` describes (node and new VMIDs known; for a `set` the
/// config read before it), as the audit record keeps it; `None` when it has none.
pub fn undo_step(prepared: &Invocation) -> Option<UndoStep> {
    let inv = crate::catalog::undo::inverse(
        prepared.op,
        &prepared.values,
        prepared.attach.read_config.as_ref(),
    )
    .ok()?;
    Some(UndoStep {
        op: inv.op.id.to_string(),
        values: inv
            .values
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        left: inv.left,
    })
}

impl<C: Connector> Engine<'_, C> {
    /// When the policy says `snapshot_before` for `inv`'s op: take a snapshot of its guest
    /// named after the audit record it gets (`pxagent-undo-N`), and return its name. The
    /// snapshot is judged by the policy like any op (a refusal refuses the change, nothing
    /// sent); when it fails, the change is not sent.
    pub(super) async fn snapshot_before(
        &self,
        inv: &Invocation,
        trail: &Trail,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Option<String>> {
        if !self.policy.snapshot_before(inv.op) {
            return Ok(None);
        }
        let (Some((snapshot_op, _)), Some(vmid)) = (inv.op.snapshots(), inv.vmid()) else {
            return Ok(None);
        };
        let n = match trail.log_path().filter(|_| trail.audited) {
            Some(path) => crate::audit::next_seq(&path)?,
            None => crate::base::time::now_secs(),
        };
        let name = format!("pxagent-undo-{n}");
        let mut values = BTreeMap::from([
            ("vmid", vmid.to_string()),
            ("snapshot", name.clone()),
            (
                "description",
                // Fixed words: a value of the change could be no valid description.
                format!(
                    "taken by pxagent before {} of {vmid} (policy snapshot_before)",
                    inv.op.id
                ),
            ),
        ]);
        if let Some(node) = inv.values.get("node") {
            values.insert("node", node.clone());
        }
        let step = Invocation::new(snapshot_op, values)?;
        self.policy.check(&step, None).map_err(|e| match e {
            Error::Policy(m) => Error::Policy(format!(
                "{m} (the snapshot the policy's snapshot_before asks for before `{}`; nothing was sent)",
                inv.display()
            )),
            e => e,
        })?;
        self.run_step(&step, None, trail, progress)
            .await
            .map_err(|e| {
                let msg = format!(
                    "`{}` was not sent: the snapshot {name} the policy's snapshot_before takes first failed ({}): {e}",
                    inv.display(),
                    e.kind()
                );
                match e {
                    Error::Connection(_) => Error::Connection(msg),
                    _ => Error::Remote(msg),
                }
            })?;
        Ok(Some(name))
    }
}
