//! Follow-up steps of an op ([`super::Op::then`]): what one command line cannot do, done
//! after it by other catalog ops, each admitted, audited and ruled like any other. A cloud
//! image's disk keeps the image's size until it is grown (PVE's `import-from` takes no size);
//! PVE's clone takes no cloud-init settings, so a clone's are set on the new VM afterwards.
//!
//! Layer: catalog. Imports the catalog's own table and invocations.

use std::collections::BTreeMap;

use crate::base::error::{Error, Result};

use super::invocation::Invocation;
use super::ops;

/// One follow-up step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Grow disk `disk` of the guest in parameter `vmid` to the GiB in parameter `size` when it
    /// is smaller: its config is read, then `vm resize` adds the difference (disks only grow).
    GrowTo {
        /// The parameter naming the guest.
        vmid: &'static str,
        /// The disk (`scsi0`).
        disk: &'static str,
        /// The parameter with the size in GiB.
        size: &'static str,
    },
    /// Set the cloud-init address and DNS given ([`CLOUD_INIT`]) on the guest in parameter
    /// `vmid` with `vm cloudinit-set`.
    CloudInit {
        /// The parameter naming the guest.
        vmid: &'static str,
    },
    /// Set the cloud-init user and keys given ([`CLOUD_INIT_KEYS`]) on the guest in parameter
    /// `vmid` with `vm cloudinit-keys` (`full` profile: root in the guest).
    CloudInitKeys {
        /// The parameter naming the guest.
        vmid: &'static str,
    },
}

/// The parameters a [`Then::CloudInit`] carries over to `vm cloudinit-set`.
pub const CLOUD_INIT: [&str; 3] = ["ip", "nameserver", "searchdomain"];
/// The parameters a [`Then::CloudInitKeys`] carries over to `vm cloudinit-keys`.
pub const CLOUD_INIT_KEYS: [&str; 2] = ["ciuser", "sshkeys"];

impl Then {
    /// The parameters of its op that this step uses (so the catalog's "every parameter is
    /// used" holds for parameters that travel only in a follow-up).
    pub fn params(&self) -> Vec<&'static str> {
        match self {
            Then::GrowTo { vmid, size, .. } => vec![vmid, size],
            Then::CloudInit { vmid } => std::iter::once(*vmid).chain(CLOUD_INIT).collect(),
            Then::CloudInitKeys { vmid } => std::iter::once(*vmid).chain(CLOUD_INIT_KEYS).collect(),
        }
    }

    /// Whether these values ask for this step at all.
    pub fn wanted(&self, inv: &Invocation) -> bool {
        match self {
            Then::GrowTo { size, .. } => inv.values.contains_key(size),
            Then::CloudInit { .. } => CLOUD_INIT.iter().any(|k| inv.values.contains_key(k)),
            Then::CloudInitKeys { .. } => {
                CLOUD_INIT_KEYS.iter().any(|k| inv.values.contains_key(k))
            }
        }
    }

    /// The step's invocation as far as it is known before the op ran, for the policy's check
    /// and the dry run (a disk's growth shows as `+1G` until the disk's size is read).
    pub fn planned(&self, inv: &Invocation, node: Option<&str>) -> Result<Invocation> {
        let guest = |p: &str| {
            inv.values.get(p).cloned().ok_or_else(|| {
                Error::Internal(format!("the step after {} needs its {p}", inv.op.id))
            })
        };
        match self {
            Then::GrowTo { vmid, disk, .. } => grow(&guest(vmid)?, disk, "+1G", node),
            Then::CloudInit { vmid } | Then::CloudInitKeys { vmid } => {
                let (keys, op): (&[&str], _) = match self {
                    Then::CloudInit { .. } => (&CLOUD_INIT, &ops::VM_CLOUDINIT_SET),
                    _ => (&CLOUD_INIT_KEYS, &ops::VM_CLOUDINIT_KEYS),
                };
                let mut raw: BTreeMap<&'static str, String> = keys
                    .iter()
                    .filter_map(|k| inv.values.get(k).map(|v| (*k, v.clone())))
                    .collect();
                raw.insert("vmid", guest(vmid)?);
                if let Some(n) = node {
                    raw.insert("node", n.to_string());
                }
                Invocation::new(op, raw)
            }
        }
    }
}

/// `vm resize VMID DISK SIZE` on `node` (resolved when `None`).
pub fn grow(vmid: &str, disk: &str, size: &str, node: Option<&str>) -> Result<Invocation> {
    let mut raw: BTreeMap<&'static str, String> = BTreeMap::new();
    raw.insert("vmid", vmid.to_string());
    raw.insert("disk", disk.to_string());
    raw.insert("size", size.to_string());
    if let Some(n) = node {
        raw.insert("node", n.to_string());
    }
    Invocation::new(&ops::VM_RESIZE, raw)
}

/// The size a disk's config entry states (`local-lvm:vm-100-disk-0,size=32G`), in bytes.
pub fn disk_bytes(entry: &str) -> Option<u64> {
    let size = entry.split(',').find_map(|kv| kv.strip_prefix("size="))?;
    let (num, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit() && c != '.')?);
    let n: f64 = num.parse().ok()?;
    let mult = match unit {
        "K" => 1u64 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    Some((n * mult as f64) as u64)
}

/// The `+N` growth that takes a disk of `now` bytes to `target` GiB, in whole MiB (rounded
/// up), or whole GiB beyond what the size kind's six digits hold; `None` when it is already
/// that large.
pub fn growth(now: u64, target_gib: u64) -> Option<String> {
    let target = target_gib << 30;
    if now >= target {
        return None;
    }
    let mib = (target - now).div_ceil(1 << 20);
    Some(if mib <= 999_999 {
        format!("+{mib}M")
    } else {
        format!("+{}G", mib.div_ceil(1024))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_and_grown_to() {
        assert_eq!(disk_bytes("local-lvm:vm-1-disk-0,size=32G"), Some(32 << 30));
        assert_eq!(
            disk_bytes("local-lvm:vm-1-disk-0,iothread=1,size=133M"),
            Some(133 << 20)
        );
        assert_eq!(disk_bytes("local-lvm:vm-1-disk-0,size=2.5G"), Some(5 << 29));
        assert_eq!(disk_bytes("local-lvm:vm-1-disk-0"), None);
        assert_eq!(growth(133 << 20, 32).as_deref(), Some("+32635M"));
        assert_eq!(growth(32 << 30, 32), None);
        assert_eq!(growth(40 << 30, 32), None);
        assert_eq!(growth(0, 2000).as_deref(), Some("+2000G"));
    }
}
