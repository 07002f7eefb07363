//! An op's inverse ([`Undo`]): what takes a change back, as another op of the catalog with its
//! values, so `pxagent undo` runs it through the same policy, phrase and approval as any op.
//!
//! The row says which inverse it has; [`inverse`] builds the values from the line that ran
//! (its node and VMID as prepared) and, for a `set`, from the config read before it (the read
//! that pins the digest). An op without one says why, in its row.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Op;

/// How an op is taken back.
#[derive(Debug, Clone, Copy)]
pub enum Undo {
    /// None; why (`a disk never shrinks`).
    None(&'static str),
    /// This op on the same guest and node (start → shutdown).
    Op(&'static Op),
    /// This op with the same guest, node and the named value (snapshot → delete it).
    Delete(&'static Op, &'static str),
    /// The op itself with the values the config held before (`vm set` → `vm set` back).
    SetBack,
    /// The op itself from its target back to its node (migrate → migrate back).
    MoveBack,
    /// This op on the guest the op made, whose VMID is the named value (create → destroy).
    Destroy(&'static Op, &'static str),
}

/// What the row of an op that sets no inverse says.
pub const UNKNOWN: Undo = Undo::None("pxagent knows no inverse of this operation");

/// An inverse with its values, ready to be made an invocation (which checks them again).
#[derive(Debug, Clone, PartialEq)]
pub struct Inverse {
    /// The op that takes the change back.
    pub op: &'static Op,
    /// Its values.
    pub values: BTreeMap<&'static str, String>,
    /// Settings the change made that the inverse cannot take back (a `set` of a key the
    /// config did not hold before: `vm set` deletes nothing), each with why.
    pub left: Vec<String>,
}

/// The inverse of `op` run with `values` (as prepared: node and new VMIDs known); `before`
/// is the guest's config read before a [`Undo::SetBack`] change. `Err` says why there is none.
pub fn inverse(
    op: &'static Op,
    values: &BTreeMap<&'static str, String>,
    before: Option<&Value>,
) -> std::result::Result<Inverse, String> {
    let keep = |names: &[&'static str]| -> BTreeMap<&'static str, String> {
        names
            .iter()
            .filter_map(|n| values.get(n).map(|v| (*n, v.clone())))
            .collect()
    };
    let (inv_op, values, left) = match op.undo {
        Undo::None(why) => return Err(why.to_string()),
        Undo::Op(o) => (o, keep(&["vmid", "node"]), Vec::new()),
        Undo::Delete(o, name) => (o, keep(&["vmid", "node", name]), Vec::new()),
        Undo::MoveBack => {
            let mut back = values.clone();
            let (Some(from), Some(to)) = (values.get("node"), values.get("target")) else {
                return Err("the line names no node to move the guest back to".into());
            };
            back.insert("node", to.clone());
            back.insert("target", from.clone());
            (op, back, Vec::new())
        }
        Undo::Destroy(o, id) => {
            let Some(vmid) = values.get(id) else {
                return Err("the new guest's VMID is not known".into());
            };
            let mut v = BTreeMap::from([("vmid", vmid.clone())]);
            // A guest made on another node (`--target`) lives there.
            if let Some(node) = values.get("target").or(values.get("node")) {
                v.insert("node", node.clone());
            }
            (o, v, Vec::new())
        }
        Undo::SetBack => {
            let Some(before) = before else {
                return Err("the config before the change was not read".into());
            };
            let mut back = keep(&["vmid", "node"]);
            let mut left = Vec::new();
            for key in op.needs_one_of.iter().filter(|k| values.contains_key(*k)) {
                match config_value(before, key) {
                    Some(old) => {
                        back.insert(key, old);
                    }
                    None => left.push(format!(
                        "{key} (not set before; `{}` deletes no setting)",
                        op.cli.join(" ")
                    )),
                }
            }
            if back.len() == 2 {
                return Err(format!(
                    "none of the settings it changed was set before: {}",
                    left.join(", ")
                ));
            }
            (op, back, left)
        }
    };
    Ok(Inverse {
        op: inv_op,
        values,
        left,
    })
}

/// A config value as the line takes it (`cores: 4` → `4`); `None` when it is not set.
pub fn config_value(config: &Value, key: &str) -> Option<String> {
    match config.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ops;
    use serde_json::json;

    fn vals(pairs: &[(&'static str, &str)]) -> BTreeMap<&'static str, String> {
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    #[test]
    fn each_kind_of_inverse_takes_its_values_from_the_line_that_ran() {
        let start = inverse(
            &ops::VM_START,
            &vals(&[("vmid", "100"), ("node", "pve1")]),
            None,
        )
        .unwrap();
        assert_eq!(start.op.id, "vm.shutdown");
        assert_eq!(start.values, vals(&[("vmid", "100"), ("node", "pve1")]));
        let snap = inverse(
            &ops::CT_SNAPSHOT,
            &vals(&[
                ("vmid", "200"),
                ("node", "pve1"),
                ("snapshot", "s1"),
                ("description", "x"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(snap.op.id, "ct.delsnapshot");
        assert_eq!(
            snap.values,
            vals(&[("vmid", "200"), ("node", "pve1"), ("snapshot", "s1")])
        );
        let back = inverse(
            &ops::VM_MIGRATE,
            &vals(&[
                ("vmid", "101"),
                ("node", "pve2"),
                ("target", "pve3"),
                ("online", "1"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(
            back.values,
            vals(&[
                ("vmid", "101"),
                ("node", "pve3"),
                ("target", "pve2"),
                ("online", "1")
            ])
        );
        let clone = inverse(
            &ops::VM_CLONE,
            &vals(&[("vmid", "9000"), ("newid", "150"), ("node", "pve1")]),
            None,
        )
        .unwrap();
        assert_eq!(clone.op.id, "vm.destroy");
        assert_eq!(clone.values, vals(&[("vmid", "150"), ("node", "pve1")]));
        let e = inverse(
            &ops::VM_RESIZE,
            &vals(&[("vmid", "100"), ("disk", "scsi0"), ("size", "+1G")]),
            None,
        )
        .unwrap_err();
        assert!(e.contains("shrink"), "{e}");
        assert!(inverse(&ops::VM_DESTROY, &vals(&[("vmid", "100")]), None).is_err());
    }

    #[test]
    fn a_set_is_taken_back_to_what_the_config_held_and_says_what_it_cannot() {
        let before = json!({"cores": 2, "memory": "2048", "name": "web", "digest": "ab"});
        let set = vals(&[
            ("vmid", "100"),
            ("node", "pve1"),
            ("cores", "4"),
            ("description", "new"),
            ("digest", "ab"),
        ]);
        let back = inverse(&ops::VM_SET, &set, Some(&before)).unwrap();
        assert_eq!(
            back.values,
            vals(&[("vmid", "100"), ("node", "pve1"), ("cores", "2")])
        );
        assert_eq!(back.left.len(), 1);
        assert!(back.left[0].starts_with("description"), "{:?}", back.left);
        let only_new = vals(&[("vmid", "100"), ("node", "pve1"), ("description", "x")]);
        assert!(inverse(&ops::VM_SET, &only_new, Some(&before)).is_err());
        assert!(inverse(&ops::VM_SET, &set, None).is_err());
    }

    #[test]
    fn every_change_row_has_an_inverse_whose_values_its_op_takes() {
        for op in crate::catalog::OPS
            .iter()
            .filter(|o| o.risk != crate::catalog::Risk::Read)
        {
            let names: Vec<&str> = match op.undo {
                Undo::Op(o) | Undo::Delete(o, _) | Undo::Destroy(o, _) => {
                    o.params.iter().map(|p| p.name).collect()
                }
                Undo::SetBack | Undo::MoveBack | Undo::None(_) => continue,
            };
            for needed in ["vmid", "node"] {
                assert!(names.contains(&needed), "{}: inverse lacks {needed}", op.id);
            }
            if let Undo::Delete(o, name) | Undo::Destroy(o, name) = op.undo {
                assert!(
                    op.params.iter().any(|p| p.name == name),
                    "{}: no value {name}",
                    op.id
                );
                let _ = o;
            }
        }
    }
}
