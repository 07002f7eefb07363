//! QEMU/KVM virtual machines: reads, lifecycle, snapshots, create and clone. Commands run
//! inside a VM are in exec.rs.
//!
//! Lifecycle actions that leave the VM in a known state say so in `settles`: HA-managed
//! guests only *request* a state, so pxagent polls until the VM reaches it. Those that
//! have nothing to do in some state say so in `already` (a start of a running VM, a stop of
//! a stopped one): pxagent reads the status first and then sends nothing else.

use super::*;

// --- reads --------------------------------------------------------------------------------

/// `pxagent vm list`
pub static VM_LIST: Op = Op {
    id: "vm.list",
    cli: &["vm", "list"],
    about: "List the cluster's VMs",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[],
    args: pvesh!(
        "get",
        "/cluster/resources",
        Arg::Word("--type"),
        Arg::Word("vm")
    ),
    view: View::Resources(Some("qemu")),
    ..ROW
};

/// `pxagent vm status VMID`
pub static VM_STATUS: Op = Op {
    id: "vm.status",
    cli: &["vm", "status"],
    about: "Show a VM's current status",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/qemu/{vmid}/status/current"),
    view: View::GuestStatus,
    ..ROW
};

/// `pxagent vm config VMID`
pub static VM_CONFIG: Op = Op {
    id: "vm.config",
    cli: &["vm", "config"],
    about: "Show a VM's configuration",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/qemu/{vmid}/config"),
    view: View::Config,
    ..ROW
};

/// `pxagent vm snapshots VMID`
pub static VM_SNAPSHOTS: Op = Op {
    id: "vm.snapshots",
    cli: &["vm", "snapshots"],
    about: "List a VM's snapshots",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/qemu/{vmid}/snapshot"),
    view: View::Snapshots,
    ..ROW
};

// --- lifecycle ----------------------------------------------------------------------------

/// `pxagent vm start VMID`
pub static VM_START: Op = Op {
    id: "vm.start",
    cli: &["vm", "start"],
    about: "Start a VM",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/qemu/{vmid}/status/start"),
    view: View::Task,
    settles: Some("running"),
    already: Some(Already {
        read: &VM_STATUS,
        field: "qmpstatus",
        is: "running",
    }),
    ..ROW
};

/// `pxagent vm shutdown VMID`
pub static VM_SHUTDOWN: Op = Op {
    id: "vm.shutdown",
    cli: &["vm", "shutdown"],
    about: "Shut a VM down cleanly (ACPI)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, SHUTDOWN_TIMEOUT, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/status/shutdown",
        Arg::Opt("shutdown_timeout", &["--timeout", "{shutdown_timeout}"])
    ),
    view: View::Task,
    settles: Some("stopped"),
    already: Some(Already {
        read: &VM_STATUS,
        field: "status",
        is: "stopped",
    }),
    ..ROW
};

/// `pxagent vm reboot VMID`
pub static VM_REBOOT: Op = Op {
    id: "vm.reboot",
    cli: &["vm", "reboot"],
    about: "Reboot a VM cleanly (ACPI)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/qemu/{vmid}/status/reboot"),
    view: View::Task,
    ..ROW
};

/// `pxagent vm suspend VMID`
pub static VM_SUSPEND: Op = Op {
    id: "vm.suspend",
    cli: &["vm", "suspend"],
    about: "Pause a running VM",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/qemu/{vmid}/status/suspend"),
    view: View::Task,
    already: Some(Already {
        read: &VM_STATUS,
        field: "qmpstatus",
        is: "paused",
    }),
    ..ROW
};

/// `pxagent vm resume VMID`
pub static VM_RESUME: Op = Op {
    id: "vm.resume",
    cli: &["vm", "resume"],
    about: "Resume a paused VM",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/qemu/{vmid}/status/resume"),
    view: View::Task,
    already: Some(Already {
        read: &VM_STATUS,
        field: "qmpstatus",
        is: "running",
    }),
    ..ROW
};

/// `pxagent vm stop VMID`
pub static VM_STOP: Op = Op {
    id: "vm.stop",
    cli: &["vm", "stop"],
    about: "Power a VM off at once (like pulling the plug)",
    risk: Risk::Confirm,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/qemu/{vmid}/status/stop"),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes stop {vmid}",
        consequence: "this powers VM {vmid} off at once, like pulling the plug; unsaved data in the guest is lost",
        hint: Some(
            "try `pxagent vm shutdown {vmid}` first: it asks the guest to power off cleanly",
        ),
    }),
    settles: Some("stopped"),
    already: Some(Already {
        read: &VM_STATUS,
        field: "status",
        is: "stopped",
    }),
    ..ROW
};

/// `pxagent vm destroy VMID`
pub static VM_DESTROY: Op = Op {
    id: "vm.destroy",
    cli: &["vm", "destroy"],
    about: "Delete a VM and its disks",
    risk: Risk::Confirm,
    area: Area::Vm,
    params: &[VMID, PURGE, GUEST_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/qemu/{vmid}",
        Arg::Opt("purge", &["--purge", "1"])
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes destroy {vmid}",
        consequence: "this deletes the VM and its disks irrecoverably",
        hint: None,
    }),
    ..ROW
};

// --- snapshots ----------------------------------------------------------------------------

/// `pxagent vm snapshot VMID SNAPSHOT`
pub static VM_SNAPSHOT: Op = Op {
    id: "vm.snapshot",
    cli: &["vm", "snapshot"],
    about: "Take a snapshot of a VM (disks only)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, SNAP, DESCRIPTION, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/snapshot",
        Arg::Word("--snapname"),
        Arg::Word("{snapshot}"),
        Arg::Opt("description", &["--description", "{description}"])
    ),
    view: View::Task,
    ..ROW
};

/// `pxagent vm snapshot VMID SNAPSHOT --vmstate`: a variant of [`VM_SNAPSHOT`].
pub static VM_SNAPSHOT_VMSTATE: Op = Op {
    id: "vm.snapshot-vmstate",
    cli: &["vm", "snapshot"],
    about: "Take a snapshot of a VM including its RAM",
    risk: Risk::Confirm,
    area: Area::Vm,
    params: &[VMID, SNAP, DESCRIPTION, VMSTATE, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/snapshot",
        Arg::Word("--snapname"),
        Arg::Word("{snapshot}"),
        Arg::Opt("description", &["--description", "{description}"]),
        Arg::Word("--vmstate"),
        Arg::Word("1")
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes vmstate {vmid} {snapshot}",
        consequence: "this writes VM {vmid}'s whole RAM (secrets in memory included) to storage and pauses the VM while it does",
        hint: Some("leave out --vmstate for a disk-only snapshot"),
    }),
    select: &[Select::Flag("vmstate")],
    variant_of: &[&VM_SNAPSHOT],
    ..ROW
};

/// `pxagent vm rollback VMID SNAPSHOT`
pub static VM_ROLLBACK: Op = Op {
    id: "vm.rollback",
    cli: &["vm", "rollback"],
    about: "Roll a VM back to a snapshot",
    risk: Risk::Confirm,
    area: Area::Vm,
    params: &[VMID, SNAP, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/snapshot/{snapshot}/rollback"
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes rollback {vmid} {snapshot}",
        consequence: "this discards every change made to VM {vmid} since snapshot {snapshot}",
        hint: Some("take a snapshot of the current state first if you may want it back"),
    }),
    ..ROW
};

/// `pxagent vm delsnapshot VMID SNAPSHOT`
pub static VM_DELSNAPSHOT: Op = Op {
    id: "vm.delsnapshot",
    cli: &["vm", "delsnapshot"],
    about: "Delete a VM snapshot",
    risk: Risk::Confirm,
    area: Area::Vm,
    params: &[VMID, SNAP, GUEST_NODE],
    args: pvesh!("delete", "/nodes/{node}/qemu/{vmid}/snapshot/{snapshot}"),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes delsnapshot {vmid} {snapshot}",
        consequence: "this deletes snapshot {snapshot} of VM {vmid} irrecoverably",
        hint: None,
    }),
    ..ROW
};

// --- creating -----------------------------------------------------------------------------

/// `pxagent vm create --name NAME --iso ISO`
pub static VM_CREATE: Op = Op {
    id: "vm.create",
    cli: &["vm", "create"],
    about: "Create a VM that boots an installer ISO",
    risk: Risk::Change,
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
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu",
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
        Arg::Word("{ostype}")
    ),
    view: View::Task,
    prechecks: &[
        Precheck::NewVmid("vmid"),
        Precheck::SpaceGib("disk_size", "disk_storage"),
    ],
    ..ROW
};

/// `pxagent vm clone VMID NEWID`
pub static VM_CLONE: Op = Op {
    id: "vm.clone",
    cli: &["vm", "clone"],
    about: "Clone a VM (linked from a template, or --full)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, NEWID, CLONE_NAME, FULL, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/clone",
        Arg::Word("--newid"),
        Arg::Word("{newid}"),
        Arg::Opt("name", &["--name", "{name}"]),
        Arg::Opt("full", &["--full", "1"])
    ),
    view: View::Task,
    prechecks: &[Precheck::NewVmid("newid")],
    ..ROW
};

const VMSTATE: Param = Param {
    name: "vmstate",
    kind: Kind::Flag,
    how: How::Flag,
    help: "include the VM's RAM (needs confirmation)",
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
const OSTYPE: Param = Param {
    name: "ostype",
    kind: Kind::Choice(&[same("l26"), same("win11"), same("win10"), same("other")]),
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
