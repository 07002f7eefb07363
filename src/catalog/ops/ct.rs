//! LXC containers: reads, lifecycle, snapshots and create, the safe settings, volume growth
//! and migration. Commands run inside a container are in exec.rs.
//!
//! Lifecycle actions that leave the container in a known state say so in `settles`:
//! HA-managed guests only *request* a state, so pxagent polls until it is reached. Those
//! that have nothing to do in some state say so in `already` (a start of a running
//! container): pxagent reads the status first and then sends nothing else.

use super::*;

// --- reads --------------------------------------------------------------------------------

/// `pxagent ct list`
pub static CT_LIST: Op = Op {
    id: "ct.list",
    cli: &["ct", "list"],
    about: "List the cluster's containers",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[],
    args: super::GUEST_LIST,
    view: View::Resources(Some("lxc")),
    ..ROW
};

/// `pxagent ct status VMID`
pub static CT_STATUS: Op = Op {
    id: "ct.status",
    cli: &["ct", "status"],
    about: "Show a container's current status",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/lxc/{vmid}/status/current"),
    view: View::GuestStatus,
    ..ROW
};

/// `pxagent ct status VMID --brief`
pub static CT_STATUS_BRIEF: Op = Op {
    id: "ct.status-brief",
    cli: &["ct", "status"],
    about: "Show a container's state, node, CPU, memory and uptime from the cluster's guest list",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[CTID, super::vm::BRIEF],
    args: super::GUEST_LIST,
    view: View::Brief,
    select: &[Select::Flag("brief")],
    variant_of: &[&CT_STATUS],
    local: &["vmid", "brief"],
    ..ROW
};

/// `pxagent ct config VMID`
pub static CT_CONFIG: Op = Op {
    id: "ct.config",
    cli: &["ct", "config"],
    about: "Show a container's configuration",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/lxc/{vmid}/config"),
    view: View::Config,
    ..ROW
};

/// `pxagent ct snapshots VMID`
pub static CT_SNAPSHOTS: Op = Op {
    id: "ct.snapshots",
    cli: &["ct", "snapshots"],
    about: "List a container's snapshots",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/lxc/{vmid}/snapshot"),
    view: View::Snapshots,
    ..ROW
};

/// `pxagent ct rrd VMID`
pub static CT_RRD: Op = Op {
    id: "ct.rrd",
    cli: &["ct", "rrd"],
    about: "Show a container's metrics history (CPU, memory, disk and network I/O)",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[CTID, TIMEFRAME, RRD_CF, GUEST_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/lxc/{vmid}/rrddata",
        Arg::Word("--timeframe"),
        Arg::Word("{timeframe}"),
        Arg::Opt("cf", &["--cf", "{cf}"])
    ),
    view: View::Rrd,
    ..ROW
};

// --- lifecycle ----------------------------------------------------------------------------

/// `pxagent ct start VMID`
pub static CT_START: Op = Op {
    id: "ct.start",
    cli: &["ct", "start"],
    about: "Start a container",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/lxc/{vmid}/status/start"),
    view: View::Task,
    settles: Some("running"),
    already: Some(Already {
        read: &CT_STATUS,
        field: "status",
        is: "running",
    }),
    undo: Undo::Op(&CT_SHUTDOWN),
    ..ROW
};

/// `pxagent ct shutdown VMID`
pub static CT_SHUTDOWN: Op = Op {
    id: "ct.shutdown",
    cli: &["ct", "shutdown"],
    about: "Shut a container down cleanly",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, SHUTDOWN_TIMEOUT, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc/{vmid}/status/shutdown",
        Arg::Opt("shutdown_timeout", &["--timeout", "{shutdown_timeout}"])
    ),
    view: View::Task,
    settles: Some("stopped"),
    interrupts: true,
    already: Some(Already {
        read: &CT_STATUS,
        field: "status",
        is: "stopped",
    }),
    undo: Undo::Op(&CT_START),
    ..ROW
};

/// `pxagent ct reboot VMID`
pub static CT_REBOOT: Op = Op {
    id: "ct.reboot",
    cli: &["ct", "reboot"],
    about: "Reboot a container",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/lxc/{vmid}/status/reboot"),
    view: View::Task,
    interrupts: true,
    ..ROW
};

/// `pxagent ct stop VMID`
pub static CT_STOP: Op = Op {
    id: "ct.stop",
    cli: &["ct", "stop"],
    about: "Stop a container at once",
    risk: Risk::Confirm,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/lxc/{vmid}/status/stop"),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes stop {vmid}",
        consequence: "this kills container {vmid}'s processes at once; unsaved data is lost",
        hint: Some("try `pxagent ct shutdown {vmid}` first: it asks the container to stop cleanly"),
    }),
    settles: Some("stopped"),
    already: Some(Already {
        read: &CT_STATUS,
        field: "status",
        is: "stopped",
    }),
    undo: Undo::Op(&CT_START),
    ..ROW
};

/// `pxagent ct destroy VMID`
pub static CT_DESTROY: Op = Op {
    id: "ct.destroy",
    cli: &["ct", "destroy"],
    about: "Delete a container and its volumes",
    risk: Risk::Confirm,
    area: Area::Ct,
    params: &[CTID, PURGE, GUEST_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/lxc/{vmid}",
        Arg::Opt("purge", &["--purge", "1"])
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes destroy {vmid}",
        consequence: "this deletes the container and its volumes irrecoverably",
        hint: None,
    }),
    prechecks: &[Precheck::Destroyable],
    undo: Undo::None("the container and its disks are gone"),
    ..ROW
};

// --- snapshots ----------------------------------------------------------------------------

/// `pxagent ct snapshot VMID SNAPSHOT`
pub static CT_SNAPSHOT: Op = Op {
    id: "ct.snapshot",
    cli: &["ct", "snapshot"],
    about: "Take a snapshot of a container",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, SNAP, DESCRIPTION, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc/{vmid}/snapshot",
        Arg::Word("--snapname"),
        Arg::Word("{snapshot}"),
        Arg::Opt("description", &["--description", "{description}"])
    ),
    view: View::Task,
    yields: Some(Yield::Snapshot("snapshot")),
    undo: Undo::Delete(&CT_DELSNAPSHOT, "snapshot"),
    ..ROW
};

/// `pxagent ct rollback VMID SNAPSHOT`
pub static CT_ROLLBACK: Op = Op {
    id: "ct.rollback",
    cli: &["ct", "rollback"],
    about: "Roll a container back to a snapshot",
    risk: Risk::Confirm,
    area: Area::Ct,
    params: &[CTID, SNAP, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc/{vmid}/snapshot/{snapshot}/rollback"
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes rollback {vmid} {snapshot}",
        consequence: "this discards every change made to container {vmid} since snapshot {snapshot}",
        hint: Some("take a snapshot of the current state first if you may want it back"),
    }),
    prechecks: &[Precheck::SnapshotExists("snapshot")],
    undo: Undo::None("the state the rollback discarded is gone"),
    ..ROW
};

/// `pxagent ct delsnapshot VMID SNAPSHOT`
pub static CT_DELSNAPSHOT: Op = Op {
    id: "ct.delsnapshot",
    cli: &["ct", "delsnapshot"],
    about: "Delete a container snapshot",
    risk: Risk::Confirm,
    area: Area::Ct,
    params: &[CTID, SNAP, GUEST_NODE],
    args: pvesh!("delete", "/nodes/{node}/lxc/{vmid}/snapshot/{snapshot}"),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes delsnapshot {vmid} {snapshot}",
        consequence: "this deletes snapshot {snapshot} of container {vmid} irrecoverably",
        hint: None,
    }),
    prechecks: &[Precheck::SnapshotExists("snapshot")],
    undo: Undo::None("a deleted snapshot cannot be brought back"),
    ..ROW
};

// --- settings, volumes, migration ---------------------------------------------------------

/// `pxagent ct set VMID --cores N …`: only options that cannot reach the host — never
/// `lxc.*` keys, mount points, devices, features, networks or `--delete` (see `vm.set` for
/// how the options share one rule). `PUT …/config` is synchronous and returns null.
pub static CT_SET: Op = Op {
    id: "ct.set",
    cli: &["ct", "set"],
    about: "Change a container's safe settings: cores, memory, swap, hostname, description, tags, onboot",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[
        CTID,
        CT_SET_CORES,
        CT_SET_MEMORY,
        SWAP,
        SET_HOSTNAME,
        SET_DESCRIPTION,
        TAGS,
        ONBOOT,
        DIGEST,
        GUEST_NODE,
    ],
    args: pvesh!(
        "set",
        "/nodes/{node}/lxc/{vmid}/config",
        Arg::Opt("cores", &["--cores", "{cores}"]),
        Arg::Opt("memory", &["--memory", "{memory}"]),
        Arg::Opt("swap", &["--swap", "{swap}"]),
        Arg::Opt("hostname", &["--hostname", "{hostname}"]),
        Arg::Opt("description", &["--description", "{description}"]),
        Arg::Opt("tags", &["--tags", "{tags}"]),
        Arg::Opt("onboot", &["--onboot", "{onboot}"]),
        Arg::Opt("digest", &["--digest", "{digest}"])
    ),
    view: View::Done,
    prechecks: &[Precheck::PinDigest("digest")],
    needs_one_of: &[
        "cores",
        "memory",
        "swap",
        "hostname",
        "description",
        "tags",
        "onboot",
    ],
    undo: Undo::SetBack,
    ..ROW
};

/// `pxagent ct resize VMID DISK +SIZE`: grow a container volume.
pub static CT_RESIZE: Op = Op {
    id: "ct.resize",
    cli: &["ct", "resize"],
    about: "Grow a container volume by a size (+1G); volumes never shrink",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, CT_DISK, GROW, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/lxc/{vmid}/resize",
        Arg::Word("--disk"),
        Arg::Word("{disk}"),
        Arg::Word("--size"),
        Arg::Word("{size}")
    ),
    view: View::Task,
    undo: Undo::None(
        "a disk never shrinks: take a snapshot first (policy snapshot_before) to have a way back",
    ),
    ..ROW
};

/// `pxagent ct migrate VMID NODE [--restart]`: a running container moves only by restart
/// (LXC has no live migration).
pub static CT_MIGRATE: Op = Op {
    id: "ct.migrate",
    cli: &["ct", "migrate"],
    about: "Move a container to another cluster node (a running one needs --restart)",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, TARGET, RESTART, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc/{vmid}/migrate",
        Arg::Word("--target"),
        Arg::Word("{target}"),
        Arg::Opt("restart", &["--restart", "1"])
    ),
    view: View::Task,
    undo: Undo::MoveBack,
    ..ROW
};

// --- creating -----------------------------------------------------------------------------

/// `pxagent ct create --hostname NAME --template VOLUME`
pub static CT_CREATE: Op = Op {
    id: "ct.create",
    cli: &["ct", "create"],
    about: "Create an unprivileged container from a template",
    risk: Risk::Change,
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
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc",
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
        Arg::Word("1")
    ),
    view: View::Task,
    prechecks: &[
        Precheck::NewVmid("vmid"),
        Precheck::SpaceGib("disk_size", "disk_storage"),
        Precheck::Trusted("template"),
        Precheck::Trusted("disk_storage"),
    ],
    yields: Some(Yield::Guest("vmid")),
    undo: Undo::Destroy(&CT_DESTROY, "vmid"),
    ..ROW
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
const CT_SET_CORES: Param = Param {
    name: "cores",
    kind: Kind::Cores,
    how: How::Option,
    help: "CPU cores the container may use",
};
const CT_SET_MEMORY: Param = Param {
    name: "memory",
    kind: Kind::Mebibytes,
    how: How::Option,
    help: "memory in MiB",
};
const SWAP: Param = Param {
    name: "swap",
    kind: Kind::MebibytesOrOff,
    how: How::Option,
    help: "swap in MiB (0: none)",
};
const SET_HOSTNAME: Param = Param {
    name: "hostname",
    kind: Kind::GuestName,
    how: How::Option,
    help: "the container's host name",
};
const CT_DISK: Param = Param {
    name: "disk",
    kind: Kind::CtDisk,
    how: How::Positional,
    help: "the volume to grow: rootfs or a mount point (see `pxagent ct config`)",
};
const RESTART: Param = Param {
    name: "restart",
    kind: Kind::Flag,
    how: How::Flag,
    help: "shut a running container down, move it and start it there",
};
