//! The rows of the catalog.
//!
//! Reads go through `pvesh get … --output-format json` (typed JSON, design §7). Actions go
//! through `pvesh create|delete /nodes/{node}/…` as well: pvesh reaches every node of a
//! cluster (it proxies), so a guest on another node works from any node, and every action
//! yields a UPID to follow. `qm`/`pct` act only on the local node's guests.
//!
//! `--output-format json` is always last so that free text can never end a rule.

use super::{
    Area, Arg, Choice, Confirm, How, Kind, NodeFrom, Op, Param, Precheck, Risk, Select, View,
};
use crate::catalog::pve::Tool;

const VMID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Positional,
    help: "the VM's id",
};
const CTID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Positional,
    help: "the container's id",
};
const GUEST_NODE: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Node(NodeFrom::Guest),
    help: "the node that hosts the guest (default: looked up in /cluster/resources)",
};
const LOCAL_NODE: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Node(NodeFrom::Local),
    help: "the node to ask (default: the node pxagent is connected to)",
};
const UPID_NODE: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Node(NodeFrom::Upid),
    help: "the node that ran the task (default: the node named in the UPID)",
};
const NODE_POS: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Positional,
    help: "the node's name",
};
const SNAP: Param = Param {
    name: "snapshot",
    kind: Kind::SnapName,
    how: How::Positional,
    help: "the snapshot's name",
};
const DESCRIPTION: Param = Param {
    name: "description",
    kind: Kind::Text,
    how: How::Option,
    help: "a description for the snapshot",
};
const VMSTATE: Param = Param {
    name: "vmstate",
    kind: Kind::Flag,
    how: How::Flag,
    help: "include the VM's RAM (needs confirmation)",
};
const SHUTDOWN_TIMEOUT: Param = Param {
    name: "shutdown_timeout",
    kind: Kind::Seconds,
    how: How::Option,
    help: "seconds to wait for the guest to power off (Proxmox default: 60)",
};
const PURGE: Param = Param {
    name: "purge",
    kind: Kind::Flag,
    how: How::Flag,
    help: "also remove the guest from backup jobs, replication and HA",
};
const UPID: Param = Param {
    name: "upid",
    kind: Kind::Upid,
    how: How::Positional,
    help: "the task's UPID",
};
const LIMIT: Param = Param {
    name: "limit",
    kind: Kind::Count,
    how: How::Option,
    help: "how many log lines to fetch (Proxmox default: 50)",
};
const RESOURCE_TYPE: Param = Param {
    name: "type",
    // `ct` is not a /cluster/resources type: it asks for `vm` and the output keeps lxc entries.
    kind: Kind::Choice(&[
        Choice {
            cli: "vm",
            wire: "vm",
            keep_type: Some("qemu"),
        },
        Choice {
            cli: "ct",
            wire: "vm",
            keep_type: Some("lxc"),
        },
        Choice {
            cli: "node",
            wire: "node",
            keep_type: None,
        },
        Choice {
            cli: "storage",
            wire: "storage",
            keep_type: None,
        },
    ]),
    how: How::Option,
    help: "only resources of this type",
};

const JSON: [Arg; 2] = [Arg::Word("--output-format"), Arg::Word("json")];

/// A read through `pvesh get PATH --output-format json`.
macro_rules! read {
    ($id:literal, [$($cli:literal),+], $area:expr, $view:expr, $about:literal, [$($p:expr),*], $path:literal $(, $opt:expr)*) => {
        Op {
            id: $id,
            cli: &[$($cli),+],
            about: $about,
            risk: Risk::Read,
            area: $area,
            params: &[$($p),*],
            tool: Tool::Pvesh,
            args: &[Arg::Word("get"), Arg::Word($path), $($opt,)* JSON[0], JSON[1]],
            confirm: None,
            select: &[],
            settles: None,
            view: $view,
            prechecks: &[],
        }
    };
}

/// An action through `pvesh VERB PATH [options] --output-format json`.
macro_rules! action {
    ($id:literal, [$($cli:literal),+], $area:expr, $risk:expr, $about:literal, [$($p:expr),*], $verb:literal, $path:literal, [$($opt:expr),*], $confirm:expr, $sel:expr) => {
        action!($id, [$($cli),+], $area, $risk, $about, [$($p),*], $verb, $path, [$($opt),*], $confirm, $sel, None)
    };
    ($id:literal, [$($cli:literal),+], $area:expr, $risk:expr, $about:literal, [$($p:expr),*], $verb:literal, $path:literal, [$($opt:expr),*], $confirm:expr, $sel:expr, $settles:expr) => {
        Op {
            id: $id,
            cli: &[$($cli),+],
            about: $about,
            risk: $risk,
            area: $area,
            params: &[$($p),*],
            tool: Tool::Pvesh,
            args: &[Arg::Word($verb), Arg::Word($path), $($opt,)* JSON[0], JSON[1]],
            confirm: $confirm,
            select: $sel,
            settles: $settles,
            view: View::Task,
            prechecks: &[],
        }
    };
}

// --- parameters of the backup, storage, ISO, template and create ops ----------------------

const BACKUP_STORAGE: Param = Param {
    name: "storage",
    kind: Kind::StorageId,
    how: How::Defaulted("local"),
    help: "the storage that holds the backups",
};
const BACKUP_MODE: Param = Param {
    name: "mode",
    kind: Kind::Choice(&[
        Choice {
            cli: "snapshot",
            wire: "snapshot",
            keep_type: None,
        },
        Choice {
            cli: "suspend",
            wire: "suspend",
            keep_type: None,
        },
        Choice {
            cli: "stop",
            wire: "stop",
            keep_type: None,
        },
    ]),
    how: How::Option,
    help: "how to get a consistent backup (Proxmox default: snapshot)",
};
const COMPRESS: Param = Param {
    name: "compress",
    kind: Kind::Choice(&[
        Choice {
            cli: "zstd",
            wire: "zstd",
            keep_type: None,
        },
        Choice {
            cli: "gzip",
            wire: "gzip",
            keep_type: None,
        },
        Choice {
            cli: "lzo",
            wire: "lzo",
            keep_type: None,
        },
        Choice {
            cli: "none",
            wire: "0",
            keep_type: None,
        },
    ]),
    how: How::Option,
    help: "archive compression",
};
const VMID_FILTER: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Option,
    help: "only this guest's backups",
};
const ARCHIVE: Param = Param {
    name: "archive",
    kind: Kind::Archive,
    how: How::Positional,
    help: "the backup to restore (see `pxagent backup list`)",
};
const RESTORE_VMID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Required,
    help: "the VMID of the restored guest",
};
const RESTORE_STORAGE: Param = Param {
    name: "storage",
    kind: Kind::StorageId,
    how: How::Option,
    help: "put the restored disks on this storage (default: where they were)",
};
const FORCE: Param = Param {
    name: "force",
    kind: Kind::Flag,
    how: How::Flag,
    help: "overwrite an existing guest with that VMID (needs confirmation)",
};
const GUEST_VMID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Positional,
    help: "the guest's id",
};
const KEEP_LAST: Param = Param {
    name: "keep_last",
    kind: Kind::Count,
    how: How::Required,
    help: "how many of the newest backups to keep",
};
const STORAGE: Param = Param {
    name: "storage",
    kind: Kind::StorageId,
    how: How::Positional,
    help: "the storage id",
};
const CONTENT: Param = Param {
    name: "content",
    kind: Kind::Choice(&[
        Choice {
            cli: "iso",
            wire: "iso",
            keep_type: None,
        },
        Choice {
            cli: "backup",
            wire: "backup",
            keep_type: None,
        },
        Choice {
            cli: "vztmpl",
            wire: "vztmpl",
            keep_type: None,
        },
        Choice {
            cli: "images",
            wire: "images",
            keep_type: None,
        },
        Choice {
            cli: "rootdir",
            wire: "rootdir",
            keep_type: None,
        },
    ]),
    how: How::Option,
    help: "only this kind of content",
};
const URL: Param = Param {
    name: "url",
    kind: Kind::Url,
    how: How::Positional,
    help: "where the host downloads the ISO from",
};
const LOCAL_STORAGE: Param = Param {
    name: "storage",
    kind: Kind::StorageId,
    how: How::Defaulted("local"),
    help: "the target storage",
};
const FILENAME: Param = Param {
    name: "filename",
    kind: Kind::FileName,
    how: How::BasenameOf("url"),
    help: "the file name on the storage (default: the URL's last path segment)",
};
const CHECKSUM: Param = Param {
    name: "checksum",
    kind: Kind::Checksum,
    how: How::Option,
    help: "verify the download, e.g. sha256:HEX",
};
const TEMPLATE_NAME: Param = Param {
    name: "template",
    kind: Kind::TemplateName,
    how: How::Positional,
    help: "the template (see `pxagent template list`)",
};
const NEW_VMID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::NextId,
    help: "the new guest's VMID",
};
const VM_NAME: Param = Param {
    name: "name",
    kind: Kind::GuestName,
    how: How::Required,
    help: "the VM's name",
};
const ISO: Param = Param {
    name: "iso",
    kind: Kind::IsoVolume,
    how: How::Required,
    help: "the installer ISO (see `pxagent iso list`)",
};
const fn memory(default: &'static str) -> Param {
    Param {
        name: "memory",
        kind: Kind::Mebibytes,
        how: How::Defaulted(default),
        help: "memory in MiB",
    }
}
const fn cores(default: &'static str) -> Param {
    Param {
        name: "cores",
        kind: Kind::Cores,
        how: How::Defaulted(default),
        help: "CPU cores",
    }
}
const fn disk_size(default: &'static str) -> Param {
    Param {
        name: "disk_size",
        kind: Kind::Gibibytes,
        how: How::Defaulted(default),
        help: "disk size in GiB",
    }
}
const DISK_STORAGE: Param = Param {
    name: "disk_storage",
    kind: Kind::StorageId,
    how: How::Defaulted("local-lvm"),
    help: "the storage for the disk",
};
const BRIDGE: Param = Param {
    name: "bridge",
    kind: Kind::Bridge,
    how: How::Defaulted("vmbr0"),
    help: "the network bridge",
};
const OSTYPE: Param = Param {
    name: "ostype",
    kind: Kind::Choice(&[
        Choice {
            cli: "l26",
            wire: "l26",
            keep_type: None,
        },
        Choice {
            cli: "win11",
            wire: "win11",
            keep_type: None,
        },
        Choice {
            cli: "win10",
            wire: "win10",
            keep_type: None,
        },
        Choice {
            cli: "other",
            wire: "other",
            keep_type: None,
        },
    ]),
    how: How::Defaulted("l26"),
    help: "the guest OS type (l26 = Linux)",
};
const NEWID: Param = Param {
    name: "newid",
    kind: Kind::Vmid,
    how: How::Positional,
    help: "the clone's VMID",
};
const CLONE_NAME: Param = Param {
    name: "name",
    kind: Kind::GuestName,
    how: How::Option,
    help: "the clone's name",
};
const FULL: Param = Param {
    name: "full",
    kind: Kind::Flag,
    how: How::Flag,
    help: "a full copy instead of a linked clone (linked clones need a template)",
};
const CT_HOSTNAME: Param = Param {
    name: "hostname",
    kind: Kind::GuestName,
    how: How::Required,
    help: "the container's host name",
};
const CT_TEMPLATE: Param = Param {
    name: "template",
    kind: Kind::TemplateVolume,
    how: How::Required,
    help: "the OS template (see `pxagent storage content local --content vztmpl`)",
};

const QEMU_ARCHIVE: &str = "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst";
const LXC_ARCHIVE: &str = "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst";

/// Defaults for the rows written with struct-update syntax: a pvesh action that runs a task.
const TASK: Op = Op {
    id: "",
    cli: &[],
    about: "",
    risk: Risk::Change,
    area: Area::Backup,
    params: &[],
    tool: Tool::Pvesh,
    args: &[],
    confirm: None,
    select: &[],
    settles: None,
    view: View::Task,
    prechecks: &[],
};

/// Every operation pxagent knows. Order is the order of `pxagent catalog`.
pub static OPS: &[Op] = &[
    // --- cluster and nodes: reads -------------------------------------------------------
    read!(
        "pve.version",
        ["version"],
        Area::Cluster,
        View::Object,
        "Show the Proxmox VE version of the host",
        [],
        "/version"
    ),
    read!(
        "cluster.status",
        ["cluster", "status"],
        Area::Cluster,
        View::ClusterStatus,
        "Show cluster membership and quorum",
        [],
        "/cluster/status"
    ),
    read!(
        "cluster.resources",
        ["cluster", "resources"],
        Area::Cluster,
        View::Resources(None),
        "List every guest, node and storage of the cluster",
        [RESOURCE_TYPE],
        "/cluster/resources",
        Arg::Opt("type", &["--type", "{type}"])
    ),
    read!(
        "node.list",
        ["node", "list"],
        Area::Node,
        View::Nodes,
        "List the cluster's nodes with CPU, memory and uptime",
        [],
        "/nodes"
    ),
    read!(
        "node.status",
        ["node", "status"],
        Area::Node,
        View::Object,
        "Show one node's status (CPU, memory, load, kernel, version)",
        [NODE_POS],
        "/nodes/{node}/status"
    ),
    // --- VMs: reads ---------------------------------------------------------------------
    read!(
        "vm.list",
        ["vm", "list"],
        Area::Vm,
        View::Resources(Some("qemu")),
        "List the cluster's VMs",
        [],
        "/cluster/resources",
        Arg::Word("--type"),
        Arg::Word("vm")
    ),
    read!(
        "vm.status",
        ["vm", "status"],
        Area::Vm,
        View::Object,
        "Show a VM's current status",
        [VMID, GUEST_NODE],
        "/nodes/{node}/qemu/{vmid}/status/current"
    ),
    read!(
        "vm.config",
        ["vm", "config"],
        Area::Vm,
        View::Object,
        "Show a VM's configuration",
        [VMID, GUEST_NODE],
        "/nodes/{node}/qemu/{vmid}/config"
    ),
    read!(
        "vm.snapshots",
        ["vm", "snapshots"],
        Area::Vm,
        View::Snapshots,
        "List a VM's snapshots",
        [VMID, GUEST_NODE],
        "/nodes/{node}/qemu/{vmid}/snapshot"
    ),
    // --- containers: reads --------------------------------------------------------------
    read!(
        "ct.list",
        ["ct", "list"],
        Area::Ct,
        View::Resources(Some("lxc")),
        "List the cluster's containers",
        [],
        "/cluster/resources",
        Arg::Word("--type"),
        Arg::Word("vm")
    ),
    read!(
        "ct.status",
        ["ct", "status"],
        Area::Ct,
        View::Object,
        "Show a container's current status",
        [CTID, GUEST_NODE],
        "/nodes/{node}/lxc/{vmid}/status/current"
    ),
    read!(
        "ct.config",
        ["ct", "config"],
        Area::Ct,
        View::Object,
        "Show a container's configuration",
        [CTID, GUEST_NODE],
        "/nodes/{node}/lxc/{vmid}/config"
    ),
    read!(
        "ct.snapshots",
        ["ct", "snapshots"],
        Area::Ct,
        View::Snapshots,
        "List a container's snapshots",
        [CTID, GUEST_NODE],
        "/nodes/{node}/lxc/{vmid}/snapshot"
    ),
    // --- storage and tasks: reads -------------------------------------------------------
    read!(
        "storage.list",
        ["storage", "list"],
        Area::Storage,
        View::Storages,
        "List a node's storages with usage",
        [LOCAL_NODE],
        "/nodes/{node}/storage"
    ),
    read!(
        "task.status",
        ["task", "status"],
        Area::Task,
        View::Object,
        "Show whether a task is running and how it ended",
        [UPID, UPID_NODE],
        "/nodes/{node}/tasks/{upid}/status"
    ),
    read!(
        "task.list",
        ["task", "list"],
        Area::Task,
        View::Table(&[
            ("upid", "UPID"),
            ("type", "TYPE"),
            ("id", "ID"),
            ("status", "STATUS"),
            ("starttime", "STARTED")
        ]),
        "List a node's recent and running tasks, newest first",
        [LOCAL_NODE, VMID_FILTER],
        "/nodes/{node}/tasks",
        Arg::Word("--source"),
        Arg::Word("all"),
        Arg::Opt("vmid", &["--vmid", "{vmid}"])
    ),
    read!(
        "task.log",
        ["task", "log"],
        Area::Task,
        View::Log,
        "Show a task's log",
        [UPID, UPID_NODE, LIMIT],
        "/nodes/{node}/tasks/{upid}/log",
        Arg::Opt("limit", &["--limit", "{limit}"])
    ),
    // --- VMs: lifecycle -----------------------------------------------------------------
    action!(
        "vm.start",
        ["vm", "start"],
        Area::Vm,
        Risk::Change,
        "Start a VM",
        [VMID, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/status/start",
        [],
        None,
        &[],
        Some("running")
    ),
    action!(
        "vm.shutdown",
        ["vm", "shutdown"],
        Area::Vm,
        Risk::Change,
        "Shut a VM down cleanly (ACPI)",
        [VMID, SHUTDOWN_TIMEOUT, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/status/shutdown",
        [Arg::Opt(
            "shutdown_timeout",
            &["--timeout", "{shutdown_timeout}"]
        )],
        None,
        &[],
        Some("stopped")
    ),
    action!(
        "vm.reboot",
        ["vm", "reboot"],
        Area::Vm,
        Risk::Change,
        "Reboot a VM cleanly (ACPI)",
        [VMID, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/status/reboot",
        [],
        None,
        &[]
    ),
    action!(
        "vm.suspend",
        ["vm", "suspend"],
        Area::Vm,
        Risk::Change,
        "Pause a running VM",
        [VMID, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/status/suspend",
        [],
        None,
        &[]
    ),
    action!(
        "vm.resume",
        ["vm", "resume"],
        Area::Vm,
        Risk::Change,
        "Resume a paused VM",
        [VMID, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/status/resume",
        [],
        None,
        &[]
    ),
    action!(
        "vm.stop",
        ["vm", "stop"],
        Area::Vm,
        Risk::Confirm,
        "Power a VM off at once (like pulling the plug)",
        [VMID, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/status/stop",
        [],
        Some(Confirm {
            phrase: "yes stop {vmid}",
            consequence: "this powers VM {vmid} off at once, like pulling the plug; unsaved data in the guest is lost",
            hint: Some(
                "try `pxagent vm shutdown {vmid}` first: it asks the guest to power off cleanly"
            ),
        }),
        &[],
        Some("stopped")
    ),
    action!(
        "vm.destroy",
        ["vm", "destroy"],
        Area::Vm,
        Risk::Confirm,
        "Delete a VM and its disks",
        [VMID, PURGE, GUEST_NODE],
        "delete",
        "/nodes/{node}/qemu/{vmid}",
        [Arg::Opt("purge", &["--purge", "1"])],
        Some(Confirm {
            phrase: "yes destroy {vmid}",
            consequence: "this deletes the VM and its disks irrecoverably",
            hint: None,
        }),
        &[]
    ),
    // --- VMs: snapshots -----------------------------------------------------------------
    action!(
        "vm.snapshot",
        ["vm", "snapshot"],
        Area::Vm,
        Risk::Change,
        "Take a snapshot of a VM (disks only)",
        [VMID, SNAP, DESCRIPTION, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/snapshot",
        [
            Arg::Word("--snapname"),
            Arg::Word("{snapshot}"),
            Arg::Opt("description", &["--description", "{description}"])
        ],
        None,
        &[]
    ),
    action!(
        "vm.snapshot-vmstate",
        ["vm", "snapshot"],
        Area::Vm,
        Risk::Confirm,
        "Take a snapshot of a VM including its RAM",
        [VMID, SNAP, DESCRIPTION, VMSTATE, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/snapshot",
        [
            Arg::Word("--snapname"),
            Arg::Word("{snapshot}"),
            Arg::Opt("description", &["--description", "{description}"]),
            Arg::Word("--vmstate"),
            Arg::Word("1")
        ],
        Some(Confirm {
            phrase: "yes vmstate {vmid} {snapshot}",
            consequence: "this writes VM {vmid}'s whole RAM (secrets in memory included) to storage and pauses the VM while it does",
            hint: Some("leave out --vmstate for a disk-only snapshot"),
        }),
        &[Select::Flag("vmstate")]
    ),
    action!(
        "vm.rollback",
        ["vm", "rollback"],
        Area::Vm,
        Risk::Confirm,
        "Roll a VM back to a snapshot",
        [VMID, SNAP, GUEST_NODE],
        "create",
        "/nodes/{node}/qemu/{vmid}/snapshot/{snapshot}/rollback",
        [],
        Some(Confirm {
            phrase: "yes rollback {vmid} {snapshot}",
            consequence: "this discards every change made to VM {vmid} since snapshot {snapshot}",
            hint: Some("take a snapshot of the current state first if you may want it back"),
        }),
        &[]
    ),
    action!(
        "vm.delsnapshot",
        ["vm", "delsnapshot"],
        Area::Vm,
        Risk::Confirm,
        "Delete a VM snapshot",
        [VMID, SNAP, GUEST_NODE],
        "delete",
        "/nodes/{node}/qemu/{vmid}/snapshot/{snapshot}",
        [],
        Some(Confirm {
            phrase: "yes delsnapshot {vmid} {snapshot}",
            consequence: "this deletes snapshot {snapshot} of VM {vmid} irrecoverably",
            hint: None,
        }),
        &[]
    ),
    // --- containers: lifecycle ----------------------------------------------------------
    action!(
        "ct.start",
        ["ct", "start"],
        Area::Ct,
        Risk::Change,
        "Start a container",
        [CTID, GUEST_NODE],
        "create",
        "/nodes/{node}/lxc/{vmid}/status/start",
        [],
        None,
        &[],
        Some("running")
    ),
    action!(
        "ct.shutdown",
        ["ct", "shutdown"],
        Area::Ct,
        Risk::Change,
        "Shut a container down cleanly",
        [CTID, SHUTDOWN_TIMEOUT, GUEST_NODE],
        "create",
        "/nodes/{node}/lxc/{vmid}/status/shutdown",
        [Arg::Opt(
            "shutdown_timeout",
            &["--timeout", "{shutdown_timeout}"]
        )],
        None,
        &[],
        Some("stopped")
    ),
    action!(
        "ct.reboot",
        ["ct", "reboot"],
        Area::Ct,
        Risk::Change,
        "Reboot a container",
        [CTID, GUEST_NODE],
        "create",
        "/nodes/{node}/lxc/{vmid}/status/reboot",
        [],
        None,
        &[]
    ),
    action!(
        "ct.stop",
        ["ct", "stop"],
        Area::Ct,
        Risk::Confirm,
        "Stop a container at once",
        [CTID, GUEST_NODE],
        "create",
        "/nodes/{node}/lxc/{vmid}/status/stop",
        [],
        Some(Confirm {
            phrase: "yes stop {vmid}",
            consequence: "this kills container {vmid}'s processes at once; unsaved data is lost",
            hint: Some(
                "try `pxagent ct shutdown {vmid}` first: it asks the container to stop cleanly"
            ),
        }),
        &[],
        Some("stopped")
    ),
    action!(
        "ct.destroy",
        ["ct", "destroy"],
        Area::Ct,
        Risk::Confirm,
        "Delete a container and its volumes",
        [CTID, PURGE, GUEST_NODE],
        "delete",
        "/nodes/{node}/lxc/{vmid}",
        [Arg::Opt("purge", &["--purge", "1"])],
        Some(Confirm {
            phrase: "yes destroy {vmid}",
            consequence: "this deletes the container and its volumes irrecoverably",
            hint: None,
        }),
        &[]
    ),
    // --- containers: snapshots ----------------------------------------------------------
    action!(
        "ct.snapshot",
        ["ct", "snapshot"],
        Area::Ct,
        Risk::Change,
        "Take a snapshot of a container",
        [CTID, SNAP, DESCRIPTION, GUEST_NODE],
        "create",
        "/nodes/{node}/lxc/{vmid}/snapshot",
        [
            Arg::Word("--snapname"),
            Arg::Word("{snapshot}"),
            Arg::Opt("description", &["--description", "{description}"])
        ],
        None,
        &[]
    ),
    action!(
        "ct.rollback",
        ["ct", "rollback"],
        Area::Ct,
        Risk::Confirm,
        "Roll a container back to a snapshot",
        [CTID, SNAP, GUEST_NODE],
        "create",
        "/nodes/{node}/lxc/{vmid}/snapshot/{snapshot}/rollback",
        [],
        Some(Confirm {
            phrase: "yes rollback {vmid} {snapshot}",
            consequence: "this discards every change made to container {vmid} since snapshot {snapshot}",
            hint: Some("take a snapshot of the current state first if you may want it back"),
        }),
        &[]
    ),
    action!(
        "ct.delsnapshot",
        ["ct", "delsnapshot"],
        Area::Ct,
        Risk::Confirm,
        "Delete a container snapshot",
        [CTID, SNAP, GUEST_NODE],
        "delete",
        "/nodes/{node}/lxc/{vmid}/snapshot/{snapshot}",
        [],
        Some(Confirm {
            phrase: "yes delsnapshot {vmid} {snapshot}",
            consequence: "this deletes snapshot {snapshot} of container {vmid} irrecoverably",
            hint: None,
        }),
        &[]
    ),
    // --- backups ------------------------------------------------------------------------
    Op {
        id: "backup.create",
        cli: &["backup", "create"],
        about: "Back a guest up with vzdump (never --script, --dumpdir, --stdout or --tmpdir)",
        params: &[
            GUEST_VMID,
            BACKUP_STORAGE,
            BACKUP_MODE,
            COMPRESS,
            GUEST_NODE,
        ],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/vzdump"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--storage"),
            Arg::Word("{storage}"),
            Arg::Opt("mode", &["--mode", "{mode}"]),
            Arg::Opt("compress", &["--compress", "{compress}"]),
            JSON[0],
            JSON[1],
        ],
        ..TASK
    },
    read!(
        "backup.list",
        ["backup", "list"],
        Area::Backup,
        View::Content,
        "List the backups on a storage",
        [BACKUP_STORAGE, VMID_FILTER, LOCAL_NODE],
        "/nodes/{node}/storage/{storage}/content",
        Arg::Word("--content"),
        Arg::Word("backup"),
        Arg::Opt("vmid", &["--vmid", "{vmid}"])
    ),
    Op {
        id: "backup.restore",
        cli: &["backup", "restore"],
        about: "Restore a VM backup to a new VMID",
        params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, LOCAL_NODE],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/qemu"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--archive"),
            Arg::Word("{archive}"),
            Arg::Opt("storage", &["--storage", "{storage}"]),
            JSON[0],
            JSON[1],
        ],
        select: &[Select::Contains(
            "archive",
            ":backup/vzdump-qemu-",
            QEMU_ARCHIVE,
        )],
        prechecks: &[
            Precheck::NewVmid("vmid"),
            Precheck::SpaceForArchive("archive", "storage"),
        ],
        ..TASK
    },
    Op {
        id: "backup.restore-ct",
        cli: &["backup", "restore"],
        about: "Restore a container backup to a new VMID",
        params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, LOCAL_NODE],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/lxc"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--ostemplate"),
            Arg::Word("{archive}"),
            Arg::Word("--restore"),
            Arg::Word("1"),
            Arg::Opt("storage", &["--storage", "{storage}"]),
            JSON[0],
            JSON[1],
        ],
        select: &[Select::Contains(
            "archive",
            ":backup/vzdump-lxc-",
            LXC_ARCHIVE,
        )],
        prechecks: &[
            Precheck::NewVmid("vmid"),
            Precheck::SpaceForArchive("archive", "storage"),
        ],
        ..TASK
    },
    Op {
        id: "backup.restore-overwrite",
        cli: &["backup", "restore"],
        about: "Restore a VM backup over an existing VM",
        risk: Risk::Confirm,
        params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, FORCE, LOCAL_NODE],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/qemu"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--archive"),
            Arg::Word("{archive}"),
            Arg::Word("--force"),
            Arg::Word("1"),
            Arg::Opt("storage", &["--storage", "{storage}"]),
            JSON[0],
            JSON[1],
        ],
        confirm: Some(Confirm {
            phrase: "yes overwrite {vmid}",
            consequence: "this replaces VM {vmid} and its disks with the backup's content; what is there now is lost",
            hint: Some("restore to a new VMID instead (leave out --force) and compare first"),
        }),
        select: &[
            Select::Contains("archive", ":backup/vzdump-qemu-", QEMU_ARCHIVE),
            Select::Flag("force"),
        ],
        prechecks: &[Precheck::SpaceForArchive("archive", "storage")],
        ..TASK
    },
    Op {
        id: "backup.restore-ct-overwrite",
        cli: &["backup", "restore"],
        about: "Restore a container backup over an existing container",
        risk: Risk::Confirm,
        params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, FORCE, LOCAL_NODE],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/lxc"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--ostemplate"),
            Arg::Word("{archive}"),
            Arg::Word("--restore"),
            Arg::Word("1"),
            Arg::Word("--force"),
            Arg::Word("1"),
            Arg::Opt("storage", &["--storage", "{storage}"]),
            JSON[0],
            JSON[1],
        ],
        confirm: Some(Confirm {
            phrase: "yes overwrite {vmid}",
            consequence: "this replaces container {vmid} and its volumes with the backup's content; what is there now is lost",
            hint: Some("restore to a new VMID instead (leave out --force) and compare first"),
        }),
        select: &[
            Select::Contains("archive", ":backup/vzdump-lxc-", LXC_ARCHIVE),
            Select::Flag("force"),
        ],
        prechecks: &[Precheck::SpaceForArchive("archive", "storage")],
        ..TASK
    },
    Op {
        id: "backup.prune",
        cli: &["backup", "prune"],
        about: "Delete all but the newest backups of a guest",
        risk: Risk::Confirm,
        params: &[GUEST_VMID, KEEP_LAST, BACKUP_STORAGE, LOCAL_NODE],
        args: &[
            Arg::Word("delete"),
            Arg::Word("/nodes/{node}/storage/{storage}/prunebackups"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--prune-backups"),
            Arg::Word("keep-last={keep_last}"),
            JSON[0],
            JSON[1],
        ],
        confirm: Some(Confirm {
            phrase: "yes prune {vmid}",
            consequence: "this deletes every backup of guest {vmid} on {storage} but the newest {keep_last}, irrecoverably",
            hint: None,
        }),
        ..TASK
    },
    Op {
        id: "backup.remove",
        cli: &["backup", "remove"],
        about: "Delete one backup archive",
        risk: Risk::Confirm,
        params: &[ARCHIVE],
        tool: Tool::Pvesm,
        args: &[Arg::Word("free"), Arg::Word("{archive}")],
        confirm: Some(Confirm {
            phrase: "yes remove {archive}",
            consequence: "this deletes the backup {archive} irrecoverably",
            hint: None,
        }),
        view: View::Done,
        ..TASK
    },
    // --- storage, ISOs and templates ----------------------------------------------------
    read!(
        "storage.content",
        ["storage", "content"],
        Area::Storage,
        View::Content,
        "List what a storage holds",
        [STORAGE, CONTENT, LOCAL_NODE],
        "/nodes/{node}/storage/{storage}/content",
        Arg::Opt("content", &["--content", "{content}"])
    ),
    Op {
        id: "storage.remove",
        cli: &["storage", "remove"],
        about: "Remove a storage from the cluster configuration (its data stays where it is)",
        risk: Risk::Confirm,
        area: Area::Storage,
        params: &[STORAGE],
        args: &[
            Arg::Word("delete"),
            Arg::Word("/storage/{storage}"),
            JSON[0],
            JSON[1],
        ],
        confirm: Some(Confirm {
            phrase: "yes remove {storage}",
            consequence: "this removes storage {storage} from every node's configuration; guests with disks there stop working",
            hint: None,
        }),
        view: View::Done,
        ..TASK
    },
    Op {
        id: "iso.download",
        cli: &["iso", "download"],
        about: "Let the host download an ISO image into a storage",
        area: Area::Storage,
        params: &[URL, LOCAL_STORAGE, FILENAME, CHECKSUM, LOCAL_NODE],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/storage/{storage}/download-url"),
            Arg::Word("--content"),
            Arg::Word("iso"),
            Arg::Word("--url"),
            Arg::Word("{url}"),
            Arg::Word("--filename"),
            Arg::Word("{filename}"),
            Arg::Opt(
                "checksum",
                &[
                    "--checksum-algorithm",
                    "{checksum:0}",
                    "--checksum",
                    "{checksum:1}",
                ],
            ),
            JSON[0],
            JSON[1],
        ],
        ..TASK
    },
    read!(
        "iso.list",
        ["iso", "list"],
        Area::Storage,
        View::Content,
        "List the ISO images on a storage",
        [LOCAL_STORAGE, LOCAL_NODE],
        "/nodes/{node}/storage/{storage}/content",
        Arg::Word("--content"),
        Arg::Word("iso")
    ),
    read!(
        "template.list",
        ["template", "list"],
        Area::Storage,
        View::Table(&[
            ("template", "TEMPLATE"),
            ("section", "SECTION"),
            ("headline", "DESCRIPTION")
        ]),
        "List the container templates Proxmox offers",
        [LOCAL_NODE],
        "/nodes/{node}/aplinfo"
    ),
    Op {
        id: "template.download",
        cli: &["template", "download"],
        about: "Download a container template into a storage",
        area: Area::Storage,
        params: &[TEMPLATE_NAME, LOCAL_STORAGE, LOCAL_NODE],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/aplinfo"),
            Arg::Word("--storage"),
            Arg::Word("{storage}"),
            Arg::Word("--template"),
            Arg::Word("{template}"),
            JSON[0],
            JSON[1],
        ],
        ..TASK
    },
    read!(
        "cluster.nextid",
        ["cluster", "nextid"],
        Area::Cluster,
        View::Object,
        "Show the next free VMID",
        [],
        "/cluster/nextid"
    ),
    // --- creating guests ----------------------------------------------------------------
    Op {
        id: "vm.create",
        cli: &["vm", "create"],
        about: "Create a VM that boots an installer ISO",
        area: Area::Vm,
        params: &[
            NEW_VMID,
            VM_NAME,
            ISO,
            memory("2048"),
            cores("2"),
            disk_size("32"),
            DISK_STORAGE,
            BRIDGE,
            OSTYPE,
            LOCAL_NODE,
        ],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/qemu"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--name"),
            Arg::Word("{name}"),
            Arg::Word("--memory"),
            Arg::Word("{memory}"),
            Arg::Word("--cores"),
            Arg::Word("{cores}"),
            Arg::Word("--scsi0"),
            Arg::Word("{disk_storage}:{disk_size}"),
            Arg::Word("--cdrom"),
            Arg::Word("{iso}"),
            Arg::Word("--net0"),
            Arg::Word("virtio,bridge={bridge}"),
            Arg::Word("--ostype"),
            Arg::Word("{ostype}"),
            JSON[0],
            JSON[1],
        ],
        prechecks: &[
            Precheck::NewVmid("vmid"),
            Precheck::SpaceGib("disk_size", "disk_storage"),
        ],
        ..TASK
    },
    Op {
        id: "vm.clone",
        cli: &["vm", "clone"],
        about: "Clone a VM (linked from a template, or --full)",
        area: Area::Vm,
        params: &[VMID, NEWID, CLONE_NAME, FULL, GUEST_NODE],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/qemu/{vmid}/clone"),
            Arg::Word("--newid"),
            Arg::Word("{newid}"),
            Arg::Opt("name", &["--name", "{name}"]),
            Arg::Opt("full", &["--full", "1"]),
            JSON[0],
            JSON[1],
        ],
        prechecks: &[Precheck::NewVmid("newid")],
        ..TASK
    },
    Op {
        id: "ct.create",
        cli: &["ct", "create"],
        about: "Create an unprivileged container from a template",
        area: Area::Ct,
        params: &[
            NEW_VMID,
            CT_HOSTNAME,
            CT_TEMPLATE,
            memory("512"),
            cores("1"),
            disk_size("8"),
            DISK_STORAGE,
            BRIDGE,
            LOCAL_NODE,
        ],
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/lxc"),
            Arg::Word("--vmid"),
            Arg::Word("{vmid}"),
            Arg::Word("--hostname"),
            Arg::Word("{hostname}"),
            Arg::Word("--ostemplate"),
            Arg::Word("{template}"),
            Arg::Word("--memory"),
            Arg::Word("{memory}"),
            Arg::Word("--cores"),
            Arg::Word("{cores}"),
            Arg::Word("--rootfs"),
            Arg::Word("{disk_storage}:{disk_size}"),
            Arg::Word("--net0"),
            Arg::Word("name=eth0,bridge={bridge},ip=dhcp"),
            // Always unprivileged: a privileged container's root is close to the host's root.
            Arg::Word("--unprivileged"),
            Arg::Word("1"),
            JSON[0],
            JSON[1],
        ],
        prechecks: &[
            Precheck::NewVmid("vmid"),
            Precheck::SpaceGib("disk_size", "disk_storage"),
        ],
        ..TASK
    },
    // --- commands inside guests (issue 6) ----------------------------------------------
    // Guest-agent exec reaches a VM on any node (pvesh proxies). The agent's exec returns a
    // PID at once; `vm exec` then polls exec-status until the process exited. Guest words
    // travel as `--command WORD` each: PVE's get_options declares array parameters as
    // Getopt::Long `command=s@`, and a mandatory string value is taken as is even when it
    // starts with `-` (`--command -la`), so no guest word can become a pvesh option.
    Op {
        id: "vm.exec",
        cli: &["vm", "exec"],
        about: "Run a command inside a VM through the QEMU guest agent and return its exit code and output",
        risk: Risk::Exec,
        area: Area::Vm,
        params: &[VMID, GUEST_COMMAND, INPUT_DATA, GUEST_NODE],
        tool: Tool::Pvesh,
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/qemu/{vmid}/agent/exec"),
            Arg::List("command", Some("--command")),
            Arg::Opt("input_data", &["--input-data", "{input_data}"]),
            JSON[0],
            JSON[1],
        ],
        confirm: None,
        select: &[],
        settles: None,
        view: View::Object,
        prechecks: &[],
    },
    Op {
        id: "vm.exec-status",
        cli: &["vm", "exec-status"],
        about: "Show the state and output of a process the guest agent started (e.g. one left running after a timeout)",
        risk: Risk::Exec,
        area: Area::Vm,
        params: &[VMID, GUEST_PID, GUEST_NODE],
        tool: Tool::Pvesh,
        args: &[
            Arg::Word("get"),
            Arg::Word("/nodes/{node}/qemu/{vmid}/agent/exec-status"),
            Arg::Word("--pid"),
            Arg::Word("{pid}"),
            JSON[0],
            JSON[1],
        ],
        confirm: None,
        select: &[],
        settles: None,
        view: View::Object,
        prechecks: &[],
    },
    // file-write opens with mode `wb` (truncates): there is no append, so a file travels in
    // one call, at most 60 KiB of base64 (`--encode 0`: pxagent encodes, binary-safe).
    Op {
        id: "vm.file-write",
        cli: &["vm", "file-write"],
        about: "Write a file inside a VM through the guest agent (a step of `vm exec --push`)",
        risk: Risk::Exec,
        area: Area::Vm,
        params: &[VMID, GUEST_FILE, GUEST_CONTENT, GUEST_NODE],
        tool: Tool::Pvesh,
        args: &[
            Arg::Word("create"),
            Arg::Word("/nodes/{node}/qemu/{vmid}/agent/file-write"),
            Arg::Word("--file"),
            Arg::Word("{file}"),
            Arg::Word("--content"),
            Arg::Word("{content}"),
            Arg::Word("--encode"),
            Arg::Word("0"),
            JSON[0],
            JSON[1],
        ],
        confirm: None,
        select: &[],
        settles: None,
        view: View::Object,
        prechecks: &[],
    },
    Op {
        id: "vm.file-read",
        cli: &["vm", "file-read"],
        about: "Read a file inside a VM through the guest agent (a step of `vm exec --pull`)",
        risk: Risk::Exec,
        area: Area::Vm,
        params: &[VMID, GUEST_FILE, GUEST_NODE],
        tool: Tool::Pvesh,
        args: &[
            Arg::Word("get"),
            Arg::Word("/nodes/{node}/qemu/{vmid}/agent/file-read"),
            Arg::Word("--file"),
            Arg::Word("{file}"),
            JSON[0],
            JSON[1],
        ],
        confirm: None,
        select: &[],
        settles: None,
        view: View::Object,
        prechecks: &[],
    },
    // `pct exec` runs only on the container's own node (pct is local), blocks until the
    // command ends and passes stdin, stdout and the exit status through. `--` ends pct's
    // options, so guest words are never read as pct options. File sync runs `tee`/`cat`
    // through this same rule: never `pct push`/`pct pull`, which write host paths as root.
    Op {
        id: "ct.exec",
        cli: &["ct", "exec"],
        about: "Run a command inside a container through `pct exec` (needs `sudoers render --ct-exec`)",
        risk: Risk::Exec,
        area: Area::Ct,
        params: &[CTID, GUEST_COMMAND],
        tool: Tool::Pct,
        args: &[
            Arg::Word("exec"),
            Arg::Word("{vmid}"),
            Arg::Word("--"),
            Arg::List("command", None),
        ],
        confirm: None,
        select: &[],
        settles: None,
        view: View::Object,
        prechecks: &[],
    },
];

const GUEST_COMMAND: Param = Param {
    name: "command",
    kind: Kind::GuestArgv,
    how: How::Positional,
    help: "the program to run in the guest, then its arguments (after `--`)",
};
const INPUT_DATA: Param = Param {
    name: "input_data",
    kind: Kind::GuestData,
    how: How::Option,
    help: "data the guest command reads on stdin",
};
const GUEST_PID: Param = Param {
    name: "pid",
    kind: Kind::Pid,
    how: How::Positional,
    help: "the PID `vm exec` reported",
};
const GUEST_FILE: Param = Param {
    name: "file",
    kind: Kind::GuestPath,
    how: How::Required,
    help: "the absolute path inside the guest",
};
const GUEST_CONTENT: Param = Param {
    name: "content",
    kind: Kind::GuestData,
    how: How::Required,
    help: "the file's content, base64-encoded",
};
