//! Facts about Proxmox VE itself that more than one module needs: where its tools live.
//!
//! A wrong absolute path in sudoers is not an error sudo reports: the rule simply never
//! matches and the caller sees "a password is required". So the paths are one table,
//! verified against PVE 9, used by the catalog, the renderer, the linter and
//! the preflight alike.

/// A Proxmox VE command-line tool that pxagent may run through sudo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    /// `qm`: QEMU/KVM guests on the local node.
    Qm,
    /// `pct`: LXC containers on the local node.
    Pct,
    /// `pvesh`: the API on the command line; reaches every node of a cluster.
    Pvesh,
    /// `pvesm`: storage manager.
    Pvesm,
    /// `vzdump`: backups.
    Vzdump,
    /// `qmrestore`: restore a VM backup.
    Qmrestore,
    /// `pveam`: appliance (container template) manager.
    Pveam,
    /// `ha-manager`: HA resources.
    HaManager,
    /// `pvecm`: cluster manager.
    Pvecm,
    /// `qemu-img`: disk image tool.
    QemuImg,
    /// `pxagent-helper`: pxagent's own root-side program (the `helper/` crate), installed by
    /// `setup render`; it places an ISO image it receives on stdin (`iso upload`).
    Helper,
}

/// Where `setup render` installs pxagent's root-side helper.
pub const HELPER_PATH: &str = "/usr/local/lib/pxagent/pxagent-helper";

impl Tool {
    /// Every tool, in a stable order.
    pub const ALL: [Tool; 11] = [
        Tool::Qm,
        Tool::Pct,
        Tool::Pvesh,
        Tool::Pvesm,
        Tool::Vzdump,
        Tool::Qmrestore,
        Tool::Pveam,
        Tool::HaManager,
        Tool::Pvecm,
        Tool::QemuImg,
        Tool::Helper,
    ];

    /// The tool's command name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Qm => "qm",
            Tool::Pct => "pct",
            Tool::Pvesh => "pvesh",
            Tool::Pvesm => "pvesm",
            Tool::Vzdump => "vzdump",
            Tool::Qmrestore => "qmrestore",
            Tool::Pveam => "pveam",
            Tool::HaManager => "ha-manager",
            Tool::Pvecm => "pvecm",
            Tool::QemuImg => "qemu-img",
            Tool::Helper => "pxagent-helper",
        }
    }

    /// The absolute path on PVE 9. pvesh, pveam, vzdump, qemu-img and pvecm
    /// live in /usr/bin; the guest tools in /usr/sbin; pxagent's helper where `setup render`
    /// installs it, root-owned.
    pub fn path(self) -> &'static str {
        match self {
            Tool::Qm => "/usr/sbin/qm",
            Tool::Pct => "/usr/sbin/pct",
            Tool::Pvesh => "/usr/bin/pvesh",
            Tool::Pvesm => "/usr/sbin/pvesm",
            Tool::Vzdump => "/usr/bin/vzdump",
            Tool::Qmrestore => "/usr/sbin/qmrestore",
            Tool::Pveam => "/usr/bin/pveam",
            Tool::HaManager => "/usr/sbin/ha-manager",
            Tool::Pvecm => "/usr/bin/pvecm",
            Tool::QemuImg => "/usr/bin/qemu-img",
            Tool::Helper => HELPER_PATH,
        }
    }

    /// The tool whose basename is `name`, if any.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_absolute_and_end_in_the_name() {
        for t in Tool::ALL {
            assert!(t.path().starts_with("/usr/"), "{t:?}");
            assert!(t.path().ends_with(&format!("/{}", t.name())), "{t:?}");
            assert_eq!(Tool::from_name(t.name()), Some(t));
        }
        assert_eq!(Tool::from_name("bash"), None);
    }
}
