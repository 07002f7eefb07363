//! The rows of the catalog.
//!
//! Reads go through `pvesh get … --output-format json` (typed JSON, design §7). Actions go
//! through `pvesh create|delete /nodes/{node}/…` as well: pvesh reaches every node of a
//! cluster (it proxies), so a guest on another node works from any node, and every action
//! yields a UPID to follow. `qm`/`pct` act only on the local node's guests.
//!
//! `--output-format json` is always last so that free text can never end a rule.

use super::{Area, Arg, Choice, Confirm, How, Kind, NodeFrom, Op, Param, Risk, View};
use crate::pve::Tool;

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
            selected_by: None,
            view: $view,
        }
    };
}

/// An action through `pvesh VERB PATH [options] --output-format json`.
macro_rules! action {
    ($id:literal, [$($cli:literal),+], $area:expr, $risk:expr, $about:literal, [$($p:expr),*], $verb:literal, $path:literal, [$($opt:expr),*], $confirm:expr, $sel:expr) => {
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
            selected_by: $sel,
            view: View::Task,
        }
    };
}

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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
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
        Some("vmstate")
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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
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
        None
    ),
];
