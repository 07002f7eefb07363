//! QEMU/KVM virtual machines: reads, lifecycle, snapshots, create and clone, the safe
//! settings, disk growth and migration. Commands run inside a VM are in exec.rs.
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
    args: super::GUEST_LIST,
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

/// `pxagent vm status VMID --brief`
pub static VM_STATUS_BRIEF: Op = Op {
    id: "vm.status-brief",
    cli: &["vm", "status"],
    about: "Show a VM's state, node, CPU, memory and uptime from the cluster's guest list",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, BRIEF],
    args: super::GUEST_LIST,
    view: View::Brief,
    select: &[Select::Flag("brief")],
    variant_of: &[&VM_STATUS],
    local: &["vmid", "brief"],
    ..ROW
};

/// `--brief` of `vm status` and `ct status`.
pub(super) const BRIEF: Param = Param {
    name: "brief",
    kind: Kind::Flag,
    how: How::Flag,
    help: "only what the cluster's guest list says (one read for many guests, at most 10 s old)",
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

/// `pxagent vm ips VMID`
pub static VM_IPS: Op = Op {
    id: "vm.ips",
    cli: &["vm", "ips"],
    about: "Show a running VM's interfaces and addresses (guest agent)",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces"
    ),
    view: View::Interfaces,
    ..ROW
};

/// `pxagent vm rrd VMID`
pub static VM_RRD: Op = Op {
    id: "vm.rrd",
    cli: &["vm", "rrd"],
    about: "Show a VM's metrics history (CPU, memory, disk and network I/O)",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, TIMEFRAME, RRD_CF, GUEST_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/qemu/{vmid}/rrddata",
        Arg::Word("--timeframe"),
        Arg::Word("{timeframe}"),
        Arg::Opt("cf", &["--cf", "{cf}"])
    ),
    view: View::Rrd,
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
    undo: Undo::Op(&VM_SHUTDOWN),
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
    interrupts: true,
    already: Some(Already {
        read: &VM_STATUS,
        field: "status",
        is: "stopped",
    }),
    undo: Undo::Op(&VM_START),
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
    interrupts: true,
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
    interrupts: true,
    already: Some(Already {
        read: &VM_STATUS,
        field: "qmpstatus",
        is: "paused",
    }),
    undo: Undo::Op(&VM_RESUME),
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
    undo: Undo::Op(&VM_SUSPEND),
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
    undo: Undo::Op(&VM_START),
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
    prechecks: &[Precheck::Destroyable],
    undo: Undo::None("the VM and its disks are gone"),
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
    yields: Some(Yield::Snapshot("snapshot")),
    undo: Undo::Delete(&VM_DELSNAPSHOT, "snapshot"),
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
    yields: Some(Yield::Snapshot("snapshot")),
    undo: Undo::Delete(&VM_DELSNAPSHOT, "snapshot"),
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
    prechecks: &[Precheck::SnapshotExists("snapshot")],
    undo: Undo::None("the state the rollback discarded is gone"),
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
    prechecks: &[Precheck::SnapshotExists("snapshot")],
    undo: Undo::None("a deleted snapshot cannot be brought back"),
    ..ROW
};

// --- settings, disks, migration ------------------------------------------------------------

/// `pxagent vm set VMID --cores N …`: only options that cannot reach the host.
///
/// One op, one sudoers rule: each option is an optional group in a fixed order
/// (`( --cores N)?( --memory N)?…`), so any set of options travels as one `pvesh set` (one
/// host command, one config write) and the rule admits exactly the lines the catalog builds.
/// Every value is a closed regex; hookscripts, `args`, passthrough devices, serial/usb/
/// parallel ports, disks, networks and `--delete` are not options here and never match.
/// `PUT …/config` is synchronous: it prints `update VM N: …` and returns null (no task).
pub static VM_SET: Op = Op {
    id: "vm.set",
    cli: &["vm", "set"],
    about: "Change a VM's safe settings: cores, memory, balloon, name, description, tags, onboot",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[
        VMID,
        SET_CORES,
        SET_MEMORY,
        BALLOON,
        SET_VM_NAME,
        SET_DESCRIPTION,
        TAGS,
        ONBOOT,
        DIGEST,
        GUEST_NODE,
    ],
    args: pvesh!(
        "set",
        "/nodes/{node}/qemu/{vmid}/config",
        Arg::Opt("cores", &["--cores", "{cores}"]),
        Arg::Opt("memory", &["--memory", "{memory}"]),
        Arg::Opt("balloon", &["--balloon", "{balloon}"]),
        Arg::Opt("name", &["--name", "{name}"]),
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
        "balloon",
        "name",
        "description",
        "tags",
        "onboot",
    ],
    undo: Undo::SetBack,
    ..ROW
};

/// `pxagent vm resize VMID DISK +SIZE`: grow a disk (never shrink, never an absolute size).
pub static VM_RESIZE: Op = Op {
    id: "vm.resize",
    cli: &["vm", "resize"],
    about: "Grow a VM disk by a size (+1G); disks never shrink",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, VM_DISK, GROW, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/qemu/{vmid}/resize",
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

/// `pxagent vm migrate VMID NODE [--online]`. A live migration also copies local disks
/// (`--with-local-disks 1`: without it Proxmox refuses a running VM whose disks are on
/// local storage, QemuMigrate.pm `prepare`); no other migration option (`force`,
/// `migration_network`, `targetstorage` …) is admitted.
pub static VM_MIGRATE: Op = Op {
    id: "vm.migrate",
    cli: &["vm", "migrate"],
    about: "Move a VM to another cluster node (a running VM needs --online)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, TARGET, ONLINE, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/migrate",
        Arg::Word("--target"),
        Arg::Word("{target}"),
        Arg::Opt("online", &["--online", "1", "--with-local-disks", "1"])
    ),
    view: View::Task,
    undo: Undo::MoveBack,
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
        Precheck::Trusted("iso"),
        Precheck::Trusted("disk_storage"),
    ],
    yields: Some(Yield::Guest("vmid")),
    undo: Undo::Destroy(&VM_DESTROY, "vmid"),
    ..ROW
};

/// `pxagent vm create --image STORAGE:import/NAME`: a VM whose first disk is a cloud image,
/// imported by PVE itself (`import-from`, only ever a volume of a storage's `import`
/// content: never a host path), with a cloud-init drive on the same storage, a serial
/// console (cloud images expect one), the guest agent on, and the cloud-init user, keys and
/// IPv4 given (DNS with `vm cloudinit-set`: sudo refuses a rule over 1024 bytes, and this
/// one is near it). `import-from` keeps the image's size, so the disk is then grown to
/// `--disk-size` by `vm resize` (a step of its own, [`Then::GrowTo`]).
pub static VM_CREATE_IMAGE: Op = Op {
    id: "vm.create-image",
    cli: &["vm", "create"],
    about: "Create a VM from a downloaded cloud image with cloud-init",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[
        NEW_VMID,
        VM_NAME,
        IMAGE,
        memory("2048"),
        cores("2"),
        disk_size("32"),
        DISK_STORAGE,
        BRIDGE,
        OSTYPE,
        CIUSER,
        SSHKEYS,
        IPCONFIG,
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
        Arg::Word("--scsihw"),
        Arg::Word("virtio-scsi-single"),
        Arg::Word("--scsi0"),
        Arg::Word("{disk_storage}:0,import-from={image}"),
        Arg::Word("--ide2"),
        Arg::Word("{disk_storage}:cloudinit"),
        Arg::Word("--boot"),
        Arg::Word("order=scsi0"),
        Arg::Word("--serial0"),
        Arg::Word("socket"),
        Arg::Word("--vga"),
        Arg::Word("serial0"),
        Arg::Word("--agent"),
        Arg::Word("1"),
        Arg::Word("--net0"),
        Arg::Word("virtio,bridge={bridge}"),
        Arg::Word("--ostype"),
        Arg::Word("{ostype}"),
        Arg::Opt("ciuser", &["--ciuser", "{ciuser}"]),
        Arg::Opt("sshkeys", &["--sshkeys", "{sshkeys}"]),
        Arg::Opt("ip", &["--ipconfig0", "{ip}"])
    ),
    view: View::Task,
    select: &[Select::Contains(
        "image",
        ":import/",
        "local:import/debian-13-genericcloud-amd64.qcow2",
    )],
    variant_of: &[&VM_CREATE],
    prechecks: &[
        Precheck::NewVmid("vmid"),
        Precheck::SpaceGib("disk_size", "disk_storage"),
        Precheck::Trusted("image"),
        Precheck::Trusted("disk_storage"),
    ],
    then: &[Then::GrowTo {
        vmid: "vmid",
        disk: "scsi0",
        size: "disk_size",
    }],
    yields: Some(Yield::Guest("vmid")),
    undo: Undo::Destroy(&VM_DESTROY, "vmid"),
    ..ROW
};

/// `pxagent vm cloudinit VMID`: the cloud-init values the VM's drive carries and those
/// pending until it is regenerated (`GET …/cloudinit`).
pub static VM_CLOUDINIT: Op = Op {
    id: "vm.cloudinit",
    cli: &["vm", "cloudinit"],
    about: "Show a VM's cloud-init settings, with pending ones",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/qemu/{vmid}/cloudinit"),
    view: View::Table(&[
        ("key", "KEY"),
        ("value", "VALUE"),
        ("pending", "PENDING"),
        ("delete", "DELETE"),
    ]),
    ..ROW
};

/// `pxagent vm cloudinit-set VMID …`: the IPv4 configuration and DNS cloud-init gives the
/// VM. Who may log in is `vm cloudinit-keys`. Never `cicustom` (its snippets are host files).
pub static VM_CLOUDINIT_SET: Op = Op {
    id: "vm.cloudinit-set",
    cli: &["vm", "cloudinit-set"],
    about: "Set a VM's cloud-init IP configuration and DNS",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, IPCONFIG, NAMESERVER, SEARCHDOMAIN, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/qemu/{vmid}/config",
        Arg::Opt("ip", &["--ipconfig0", "{ip}"]),
        Arg::Opt("nameserver", &["--nameserver", "{nameserver}"]),
        Arg::Opt("searchdomain", &["--searchdomain", "{searchdomain}"])
    ),
    view: View::Done,
    needs_one_of: &["ip", "nameserver", "searchdomain"],
    ..ROW
};

/// `pxagent vm cloudinit-keys VMID [--ciuser USER] [--sshkey FILE]`: who may log in to an
/// existing VM through cloud-init. Whoever holds such a key logs in at the VM's next boot and
/// is root there, as with `vm exec`: so it is in the `full` profile only
/// ([`crate::catalog::Op::grants_guest_login`]). Never a password: `cipassword` is in no rule.
pub static VM_CLOUDINIT_KEYS: Op = Op {
    id: "vm.cloudinit-keys",
    cli: &["vm", "cloudinit-keys"],
    about: "Set who may log in to a VM through cloud-init: its user and SSH keys (root in the VM)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, CIUSER, SSHKEYS, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/qemu/{vmid}/config",
        Arg::Opt("ciuser", &["--ciuser", "{ciuser}"]),
        Arg::Opt("sshkeys", &["--sshkeys", "{sshkeys}"])
    ),
    view: View::Done,
    needs_one_of: &["ciuser", "sshkeys"],
    ..ROW
};

/// `pxagent vm cloudinit-regenerate VMID`: write the pending cloud-init values onto the
/// VM's cloud-init drive (`PUT …/cloudinit`); the guest reads them at its next boot.
pub static VM_CLOUDINIT_REGENERATE: Op = Op {
    id: "vm.cloudinit-regenerate",
    cli: &["vm", "cloudinit-regenerate"],
    about: "Regenerate a VM's cloud-init drive from its settings (read at the next boot)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("set", "/nodes/{node}/qemu/{vmid}/cloudinit"),
    view: View::Done,
    ..ROW
};

/// `pxagent vm template VMID`: turn a stopped VM into a template (its disks become
/// read-only base images for linked clones). There is no way back.
pub static VM_TEMPLATE: Op = Op {
    id: "vm.template",
    cli: &["vm", "template"],
    about: "Turn a stopped VM into a template for clones (irreversible)",
    risk: Risk::Confirm,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("create", "/nodes/{node}/qemu/{vmid}/template"),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes template {vmid}",
        consequence: "this turns VM {vmid} into a template irreversibly: it can no longer be started, only cloned",
        hint: Some(
            "clone it first (`pxagent vm clone {vmid} NEWID --full`) if you still need a VM to run",
        ),
    }),
    ..ROW
};

/// `pxagent vm clone VMID NEWID [--ip …] [--ciuser …] [--sshkey FILE]`: the clone, then (when
/// cloud-init values are given) `vm cloudinit-set NEWID` and `vm cloudinit-keys NEWID`.
pub static VM_CLONE: Op = Op {
    id: "vm.clone",
    cli: &["vm", "clone"],
    about: "Clone a VM (linked from a template, or --full)",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[
        VMID,
        NEWID,
        CLONE_NAME,
        FULL,
        CIUSER,
        SSHKEYS,
        IPCONFIG,
        NAMESERVER,
        SEARCHDOMAIN,
        GUEST_NODE,
    ],
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
    // PVE's clone takes no cloud-init settings: they are set on the clone afterwards, the
    // address and DNS, then (full profile) who may log in.
    then: &[
        Then::CloudInit { vmid: "newid" },
        Then::CloudInitKeys { vmid: "newid" },
    ],
    yields: Some(Yield::Guest("newid")),
    undo: Undo::Destroy(&VM_DESTROY, "newid"),
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
const IMAGE: Param = Param {
    name: "image",
    kind: Kind::ImportVolume,
    how: How::Required,
    help: "the cloud image to import as the first disk (see `pxagent image list`)",
};
const CIUSER: Param = Param {
    name: "ciuser",
    kind: Kind::CiUser,
    how: How::Option,
    help: "cloud-init: the user to create (default: the image's own, e.g. debian or ubuntu)",
};
const SSHKEYS: Param = Param {
    name: "sshkeys",
    kind: Kind::SshKeys,
    how: How::Option,
    help: "cloud-init: public keys for that user (on the command line: --sshkey FILE)",
};
const IPCONFIG: Param = Param {
    name: "ip",
    kind: Kind::IpConfig,
    how: How::Option,
    help: "cloud-init: the first NIC's IPv4 (dhcp, or CIDR; on the command line --gw ADDR adds the gateway)",
};
const NAMESERVER: Param = Param {
    name: "nameserver",
    kind: Kind::Nameservers,
    how: How::Option,
    help: "cloud-init: DNS servers",
};
const SEARCHDOMAIN: Param = Param {
    name: "searchdomain",
    kind: Kind::GuestName,
    how: How::Option,
    help: "cloud-init: the DNS search domain",
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
const SET_CORES: Param = Param {
    name: "cores",
    kind: Kind::Cores,
    how: How::Option,
    help: "CPU cores (per socket)",
};
const SET_MEMORY: Param = Param {
    name: "memory",
    kind: Kind::Mebibytes,
    how: How::Option,
    help: "memory in MiB",
};
const BALLOON: Param = Param {
    name: "balloon",
    kind: Kind::MebibytesOrOff,
    how: How::Option,
    help: "the balloon target in MiB, at most the memory (0 turns ballooning off)",
};
const SET_VM_NAME: Param = Param {
    name: "name",
    kind: Kind::GuestName,
    how: How::Option,
    help: "the VM's name",
};
const VM_DISK: Param = Param {
    name: "disk",
    kind: Kind::VmDisk,
    how: How::Positional,
    help: "the disk to grow (see `pxagent vm config`)",
};
const ONLINE: Param = Param {
    name: "online",
    kind: Kind::Flag,
    how: How::Flag,
    help: "live-migrate a running VM (its local disks are copied too)",
};
