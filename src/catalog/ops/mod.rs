//! The rows of the catalog, one file per area, and [`OPS`], the list that orders them.
//!
//! Every row is a `pub static` [`Op`] written the same way: a struct literal that names
//! `id`, `cli`, `about`, `risk`, `area`, `params`, `args` and `view`, then whatever else
//! differs from [`ROW`] (`tool`, `confirm`, `select`, `settles`, `interrupts`, `prechecks`,
//! `needs_one_of`, `step`, `already`, `yields`, `variant_of`, `fence`, `then`), then `..ROW`. The static
//! is the op's handle: code outside the catalog names an op by it (`ops::CLUSTER_RESOURCES`),
//! never by its id string. A handle is the id upper-cased with `.` and `-` as `_`, and lives in
//! the file named by the id's prefix (`vm.status` → `vm.rs`), except `pve.version`
//! (cluster.rs), the commands run inside guests (exec.rs) and the firewalls'
//! ops of every area (firewall.rs).
//!
//! To add an operation: write its row in its area's file and put its handle in [`OPS`].
//!
//! Reads go through `pvesh get … --output-format json` (typed JSON). Actions go
//! through `pvesh create|delete /nodes/{node}/…` as well: pvesh reaches every node of a
//! cluster (it proxies), so a guest on another node works from any node, and every action
//! yields a UPID to follow. `qm`/`pct` act only on the local node's guests. The [`pvesh!`]
//! macro writes a pvesh command with `--output-format json` always last, so that free text
//! can never end a rule.
//!
//! Parameters used by one area live in its file; the shared ones are below.

use super::{
    Already, Area, Arg, Choice, Confirm, How, Kind, NodeFrom, Op, Param, Precheck, Risk, Select,
    Then, Undo, View, Yield,
};
use crate::catalog::pve::Tool;

/// The args of a pvesh command: the verb, the API path, then these args, then
/// `--output-format json`. Write `pvesh!("get", "/cluster/resources", Arg::Opt(…))`.
macro_rules! pvesh {
    ($verb:literal, $path:literal $(, $arg:expr)* $(,)?) => {
        &[
            Arg::Word($verb),
            Arg::Word($path),
            $($arg,)*
            Arg::Word("--output-format"),
            Arg::Word("json"),
        ]
    };
}

/// The line of the cluster's guest list, `/cluster/resources --type vm`: `vm list`'s and
/// `ct list`'s (each keeps its own kind), the guest map's, and so what `vm status --brief`
/// and `ct status --brief` are answered from.
const GUEST_LIST: &[Arg] = pvesh!(
    "get",
    "/cluster/resources",
    Arg::Word("--type"),
    Arg::Word("vm")
);

mod backup;
mod cluster;
mod ct;
mod exec;
mod firewall;
mod ha;
mod image;
mod iso;
mod network;
mod node;
mod storage;
mod task;
mod template;
mod vm;

pub use backup::{
    BACKUP_CREATE, BACKUP_JOB_CREATE, BACKUP_JOB_LIST, BACKUP_JOB_REMOVE, BACKUP_JOB_RUN,
    BACKUP_JOB_SHOW, BACKUP_LIST, BACKUP_PRUNE, BACKUP_REMOVE, BACKUP_RESTORE, BACKUP_RESTORE_CT,
    BACKUP_RESTORE_CT_OVERWRITE, BACKUP_RESTORE_OVERWRITE,
};
pub use cluster::{CLUSTER_NEXTID, CLUSTER_RESOURCES, CLUSTER_STATUS, CLUSTER_TASKS, PVE_VERSION};
pub use ct::{
    CT_CONFIG, CT_CREATE, CT_DELSNAPSHOT, CT_DESTROY, CT_LIST, CT_MIGRATE, CT_REBOOT, CT_RESIZE,
    CT_ROLLBACK, CT_RRD, CT_SET, CT_SHUTDOWN, CT_SNAPSHOT, CT_SNAPSHOTS, CT_START, CT_STATUS,
    CT_STATUS_BRIEF, CT_STOP,
};
pub use exec::{CT_EXEC, VM_EXEC, VM_EXEC_STATUS, VM_FILE_READ, VM_FILE_WRITE};
pub use firewall::{
    CLUSTER_FIREWALL_ADD, CLUSTER_FIREWALL_REMOVE, CLUSTER_FIREWALL_RULES, CT_FIREWALL_ADD,
    CT_FIREWALL_DISABLE, CT_FIREWALL_ENABLE, CT_FIREWALL_IPSET_ADD, CT_FIREWALL_IPSET_CREATE,
    CT_FIREWALL_IPSET_LIST, CT_FIREWALL_IPSET_REMOVE, CT_FIREWALL_REMOVE, CT_FIREWALL_RULES,
    NODE_FIREWALL_ADD, NODE_FIREWALL_REMOVE, NODE_FIREWALL_RULES, VM_FIREWALL_ADD,
    VM_FIREWALL_DISABLE, VM_FIREWALL_ENABLE, VM_FIREWALL_IPSET_ADD, VM_FIREWALL_IPSET_CREATE,
    VM_FIREWALL_IPSET_LIST, VM_FIREWALL_IPSET_REMOVE, VM_FIREWALL_REMOVE, VM_FIREWALL_RULES,
};
pub use ha::{
    HA_ADD, HA_REMOVE, HA_RULE_LIST, HA_RULE_NODE_AFFINITY, HA_RULE_REMOVE,
    HA_RULE_RESOURCE_AFFINITY, HA_STATUS,
};
pub use image::{IMAGE_DOWNLOAD, IMAGE_LIST, IMAGE_REMOVE};
pub use iso::{ISO_DOWNLOAD, ISO_LIST, ISO_REMOVE, ISO_UPLOAD};
pub use network::{
    BRIDGE_CREATE, BRIDGE_REMOVE, NETWORK_APPLY, NETWORK_CONFIRM, NETWORK_PENDING, NETWORK_REVERT,
};
pub use node::{
    AUDIT_HOST_VERIFY, NODE_DISKS, NODE_JOURNAL, NODE_LIST, NODE_NETWORK, NODE_RRD, NODE_SERVICE,
    NODE_SERVICES, NODE_SMART, NODE_STATUS, NODE_UPDATES, NODE_VERSION,
};
pub use storage::{
    STORAGE_ADD_DIR, STORAGE_ADD_LVMTHIN, STORAGE_ADD_NFS, STORAGE_ADD_ZFSPOOL, STORAGE_CONFIG,
    STORAGE_CONTENT, STORAGE_DISABLE, STORAGE_ENABLE, STORAGE_LIST, STORAGE_REMOVE, STORAGE_SET,
    STORAGE_SET_MOUNTPOINT,
};
pub use task::{TASK_LIST, TASK_LOG, TASK_STATUS, TASK_STOP, TASK_WAIT};
pub use template::{TEMPLATE_DOWNLOAD, TEMPLATE_LIST, TEMPLATE_REMOVE};
pub use vm::{
    VM_CLONE, VM_CLOUDINIT, VM_CLOUDINIT_KEYS, VM_CLOUDINIT_REGENERATE, VM_CLOUDINIT_SET,
    VM_CONFIG, VM_CREATE, VM_CREATE_IMAGE, VM_DELSNAPSHOT, VM_DESTROY, VM_IPS, VM_LIST, VM_MIGRATE,
    VM_REBOOT, VM_RESIZE, VM_RESUME, VM_ROLLBACK, VM_RRD, VM_SET, VM_SHUTDOWN, VM_SNAPSHOT,
    VM_SNAPSHOT_VMSTATE, VM_SNAPSHOTS, VM_START, VM_STATUS, VM_STATUS_BRIEF, VM_STOP, VM_SUSPEND,
    VM_TEMPLATE,
};

/// Every operation pxagent knows. Order is the order of `pxagent catalog`, of the sudoers
/// file and of the MCP tool list.
pub static OPS: &[&Op] = &[
    // cluster and nodes: reads
    &PVE_VERSION,
    &CLUSTER_STATUS,
    &CLUSTER_RESOURCES,
    &NODE_LIST,
    &NODE_STATUS,
    &NODE_VERSION,
    &NODE_RRD,
    &NODE_NETWORK,
    &CLUSTER_TASKS,
    &HA_STATUS,
    // VMs: reads
    &VM_LIST,
    &VM_STATUS,
    &VM_STATUS_BRIEF,
    &VM_CONFIG,
    &VM_SNAPSHOTS,
    &VM_IPS,
    &VM_RRD,
    &VM_CLOUDINIT,
    // containers: reads
    &CT_LIST,
    &CT_STATUS,
    &CT_STATUS_BRIEF,
    &CT_CONFIG,
    &CT_SNAPSHOTS,
    &CT_RRD,
    // storage and tasks: reads
    &STORAGE_LIST,
    &TASK_STATUS,
    &TASK_LIST,
    &TASK_LOG,
    &TASK_WAIT,
    // tasks: stop
    &TASK_STOP,
    // VMs: lifecycle and snapshots
    &VM_START,
    &VM_SHUTDOWN,
    &VM_REBOOT,
    &VM_SUSPEND,
    &VM_RESUME,
    &VM_STOP,
    &VM_DESTROY,
    &VM_SNAPSHOT,
    &VM_SNAPSHOT_VMSTATE,
    &VM_ROLLBACK,
    &VM_DELSNAPSHOT,
    // VMs: settings, disks, migration
    &VM_SET,
    &VM_RESIZE,
    &VM_MIGRATE,
    &CT_START,
    &CT_SHUTDOWN,
    &CT_REBOOT,
    &CT_STOP,
    &CT_DESTROY,
    &CT_SNAPSHOT,
    &CT_ROLLBACK,
    &CT_DELSNAPSHOT,
    // containers: settings, volumes, migration
    &CT_SET,
    &CT_RESIZE,
    &CT_MIGRATE,
    // backups
    &BACKUP_CREATE,
    &BACKUP_LIST,
    &BACKUP_RESTORE,
    &BACKUP_RESTORE_CT,
    &BACKUP_RESTORE_OVERWRITE,
    &BACKUP_RESTORE_CT_OVERWRITE,
    &BACKUP_PRUNE,
    &BACKUP_REMOVE,
    // storage, ISOs and templates
    &STORAGE_CONTENT,
    &STORAGE_REMOVE,
    &ISO_DOWNLOAD,
    &ISO_UPLOAD,
    &ISO_LIST,
    &ISO_REMOVE,
    &TEMPLATE_LIST,
    &TEMPLATE_DOWNLOAD,
    &TEMPLATE_REMOVE,
    &IMAGE_LIST,
    &IMAGE_DOWNLOAD,
    &IMAGE_REMOVE,
    &CLUSTER_NEXTID,
    // host observation: disks, journal, services, updates
    &NODE_DISKS,
    &NODE_SMART,
    &NODE_JOURNAL,
    &NODE_SERVICES,
    &NODE_SERVICE,
    &NODE_UPDATES,
    // storage pools: adding and configuring
    &STORAGE_CONFIG,
    &STORAGE_ADD_DIR,
    &STORAGE_ADD_LVMTHIN,
    &STORAGE_ADD_ZFSPOOL,
    &STORAGE_ADD_NFS,
    &STORAGE_SET,
    &STORAGE_SET_MOUNTPOINT,
    &STORAGE_ENABLE,
    &STORAGE_DISABLE,
    // the node's network: bridges, the pending change, apply with the host's revert
    &NETWORK_PENDING,
    // the host audit chain (a step of `audit verify --host`)
    &AUDIT_HOST_VERIFY,
    &BRIDGE_CREATE,
    &BRIDGE_REMOVE,
    &NETWORK_REVERT,
    &NETWORK_APPLY,
    &NETWORK_CONFIRM,
    // firewalls: guests' rules, switches and IP sets; nodes' and the cluster's rules
    &VM_FIREWALL_RULES,
    &VM_FIREWALL_ADD,
    &VM_FIREWALL_REMOVE,
    &VM_FIREWALL_ENABLE,
    &VM_FIREWALL_DISABLE,
    &VM_FIREWALL_IPSET_LIST,
    &VM_FIREWALL_IPSET_CREATE,
    &VM_FIREWALL_IPSET_ADD,
    &VM_FIREWALL_IPSET_REMOVE,
    &CT_FIREWALL_RULES,
    &CT_FIREWALL_ADD,
    &CT_FIREWALL_REMOVE,
    &CT_FIREWALL_ENABLE,
    &CT_FIREWALL_DISABLE,
    &CT_FIREWALL_IPSET_LIST,
    &CT_FIREWALL_IPSET_CREATE,
    &CT_FIREWALL_IPSET_ADD,
    &CT_FIREWALL_IPSET_REMOVE,
    &NODE_FIREWALL_RULES,
    &NODE_FIREWALL_ADD,
    &NODE_FIREWALL_REMOVE,
    &CLUSTER_FIREWALL_RULES,
    &CLUSTER_FIREWALL_ADD,
    &CLUSTER_FIREWALL_REMOVE,
    // HA: guests under the HA manager, HA rules
    &HA_ADD,
    &HA_REMOVE,
    &HA_RULE_LIST,
    &HA_RULE_NODE_AFFINITY,
    &HA_RULE_RESOURCE_AFFINITY,
    &HA_RULE_REMOVE,
    // backup jobs
    &BACKUP_JOB_LIST,
    &BACKUP_JOB_SHOW,
    &BACKUP_JOB_CREATE,
    &BACKUP_JOB_REMOVE,
    &BACKUP_JOB_RUN,
    // creating guests
    &VM_CREATE,
    &VM_CREATE_IMAGE,
    &VM_CLONE,
    &VM_CLOUDINIT_SET,
    &VM_CLOUDINIT_KEYS,
    &VM_CLOUDINIT_REGENERATE,
    &VM_TEMPLATE,
    &CT_CREATE,
    // commands inside guests
    &VM_EXEC,
    &VM_EXEC_STATUS,
    &VM_FILE_WRITE,
    &VM_FILE_READ,
    &CT_EXEC,
];

/// What a row leaves out: a pvesh command, no confirmation, no variant selection, nothing
/// to settle, no prechecks, not a step, never a no-op, no value from its log. The rest of these values are placeholders: every row sets
/// `id`, `cli`, `about`, `risk`, `area`, `params`, `args` and `view` itself.
const ROW: Op = Op {
    id: "",
    cli: &[],
    about: "",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[],
    tool: Tool::Pvesh,
    args: &[],
    confirm: None,
    select: &[],
    settles: None,
    interrupts: false,
    view: View::Object,
    prechecks: &[],
    needs_one_of: &[],
    step: false,
    variant_of: &[],
    counts_as: &[],
    already: None,
    yields: None,
    fence: None,
    then: &[],
    local: &[],
    confirms_with: None,
    fans_out: None,
    undo: crate::catalog::undo::UNKNOWN,
};

// --- parameters shared by several areas ---------------------------------------------------

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
const VMID_FILTER: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Option,
    help: "only this guest's backups",
};
const NEW_VMID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::NextId,
    help: "the new guest's VMID",
};
const GUEST_NODE: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Node(NodeFrom::Guest),
    help: "the node that hosts the guest (default: looked up in /cluster/resources)",
};
/// A node named on the command line (`node status NODE`, `bridge create NODE vmbrN`).
const NODE_POS: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Positional,
    help: "the node",
};
const LOCAL_NODE: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Node(NodeFrom::Local),
    help: "the node to ask (default: the node pxagent is connected to)",
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
const LOCAL_STORAGE: Param = Param {
    name: "storage",
    kind: Kind::StorageId,
    how: How::Defaulted("local"),
    help: "the target storage",
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

/// A free-text comment (a rule's, a bridge's, a job's).
const COMMENT: Param = Param {
    name: "comment",
    kind: Kind::Text,
    how: How::Option,
    help: "a comment",
};

const SET_DESCRIPTION: Param = Param {
    name: "description",
    kind: Kind::Text,
    how: How::Option,
    help: "the guest's description (notes)",
};
/// The config digest a change is pinned to ([`crate::catalog::Precheck::PinDigest`]).
const DIGEST: Param = Param {
    name: "digest",
    kind: Kind::Digest,
    how: How::Option,
    help: "change only if the config is still this one (`digest` of vm/ct config); default: the config read just before",
};
const TAGS: Param = Param {
    name: "tags",
    kind: Kind::Tags,
    how: How::Option,
    help: "the guest's tags, all of them, joined by ';' (web;prod); replaces the current ones",
};
const ONBOOT: Param = Param {
    name: "onboot",
    kind: Kind::Choice(&[
        Choice {
            cli: "yes",
            wire: "1",
            keep_type: None,
        },
        Choice {
            cli: "no",
            wire: "0",
            keep_type: None,
        },
        same("1"),
        same("0"),
    ]),
    how: How::Option,
    help: "start the guest when its node boots",
};
const GROW: Param = Param {
    name: "size",
    kind: Kind::GrowSize,
    how: How::Positional,
    help: "how much to add, e.g. +1G",
};
const TARGET: Param = Param {
    name: "target",
    kind: Kind::Node,
    how: How::Positional,
    help: "the node to move the guest to",
};
const TIMEFRAME: Param = Param {
    name: "timeframe",
    kind: Kind::Choice(&[
        same("hour"),
        same("day"),
        same("week"),
        same("month"),
        same("year"),
    ]),
    how: How::Defaulted("hour"),
    help: "how far back: hour (1-minute steps), day, week, month or year",
};
const RRD_CF: Param = Param {
    name: "cf",
    kind: Kind::Choice(&[same("AVERAGE"), same("MAX")]),
    how: How::Option,
    help: "how a step sums up samples (AVERAGE, Proxmox's default, or MAX)",
};

/// `--checksum ALGO:HEX` of a download (`download-url` verifies it on the host).
const CHECKSUM: Param = Param {
    name: "checksum",
    kind: Kind::Checksum,
    how: How::Option,
    help: "verify the download, e.g. sha256:HEX",
};
/// The checksum's words of a `download-url` line, when one was given.
const DOWNLOAD_CHECKSUM: Arg = Arg::Opt(
    "checksum",
    &[
        "--checksum-algorithm",
        "{checksum:0}",
        "--checksum",
        "{checksum:1}",
    ],
);

/// The choices of a [`Kind::Choice`] whose CLI and wire values are the same.
const fn same(word: &'static str) -> Choice {
    Choice {
        cli: word,
        wire: word,
        keep_type: None,
    }
}
