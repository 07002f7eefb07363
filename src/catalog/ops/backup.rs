//! Backups of VMs and containers: create (vzdump), list, restore (to a new VMID, or over an
//! existing guest with confirmation), prune and remove.
//!
//! `backup create` takes either kind of guest (its area is [`Area::Backup`]) and its result
//! names the archive it wrote ([`Yield::Archive`]).
//!
//! `backup restore` is one CLI path with four rows: the archive's name picks the VM or the
//! container restore, `--force` picks the overwriting variant (see `select`). Each is a
//! variant of `backup.restore` (`variant_of`), so a policy entry for it covers all four.
//!
//! Fences: a VMID fence covers the archive's own VMID (`vzdump-qemu-<VMID>-…`) as
//! well as the target's, so a fenced agent can neither restore another guest's backup nor
//! remove or prune it. A VM restore is fenced by the VM fence, a container restore by the
//! container fence (`fence`); remove and prune take either kind of guest. A container is
//! always restored unprivileged (`--unprivileged 1`, which the rule requires, as for
//! `ct create`): Proxmox maps a privileged backup's files into the new container's user
//! namespace, so its root is never the host's.

use super::*;

/// `pxagent backup create VMID`
pub static BACKUP_CREATE: Op = Op {
    id: "backup.create",
    cli: &["backup", "create"],
    about: "Back a guest up with vzdump (never --script, --dumpdir, --stdout or --tmpdir)",
    risk: Risk::Change,
    area: Area::Backup,
    params: &[
        GUEST_VMID,
        BACKUP_STORAGE,
        BACKUP_MODE,
        COMPRESS,
        GUEST_NODE,
    ],
    args: pvesh!(
        "create",
        "/nodes/{node}/vzdump",
        Arg::Word("--vmid"),
        Arg::Word("{vmid}"),
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Opt("mode", &["--mode", "{mode}"]),
        Arg::Opt("compress", &["--compress", "{compress}"])
    ),
    view: View::Task,
    yields: Some(Yield::Archive("storage")),
    prechecks: &[Precheck::Trusted("storage")],
    ..ROW
};

/// `pxagent backup list`
pub static BACKUP_LIST: Op = Op {
    id: "backup.list",
    cli: &["backup", "list"],
    about: "List the backups on a storage",
    risk: Risk::Read,
    area: Area::Backup,
    params: &[BACKUP_STORAGE, VMID_FILTER, LOCAL_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/storage/{storage}/content",
        Arg::Word("--content"),
        Arg::Word("backup"),
        Arg::Opt("vmid", &["--vmid", "{vmid}"])
    ),
    view: View::Content,
    ..ROW
};

/// `pxagent backup restore ARCHIVE --vmid VMID` with a VM's archive.
pub static BACKUP_RESTORE: Op = Op {
    id: "backup.restore",
    cli: &["backup", "restore"],
    about: "Restore a VM backup to a new VMID",
    risk: Risk::Change,
    area: Area::Backup,
    params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, LOCAL_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu",
        Arg::Word("--vmid"),
        Arg::Word("{vmid}"),
        Arg::Word("--archive"),
        Arg::Word("{archive}"),
        Arg::Opt("storage", &["--storage", "{storage}"])
    ),
    view: View::Task,
    select: &[Select::Contains(
        "archive",
        ":backup/vzdump-qemu-",
        QEMU_ARCHIVE,
    )],
    prechecks: &[
        Precheck::NewVmid("vmid"),
        Precheck::SpaceForArchive("archive", "storage"),
        Precheck::Trusted("archive"),
        Precheck::Trusted("storage"),
    ],
    fence: Some(Area::Vm),
    yields: Some(Yield::Guest("vmid")),
    ..ROW
};

/// `pxagent backup restore ARCHIVE --vmid VMID` with a container's archive.
pub static BACKUP_RESTORE_CT: Op = Op {
    id: "backup.restore-ct",
    cli: &["backup", "restore"],
    about: "Restore a container backup to a new VMID (always unprivileged)",
    risk: Risk::Change,
    area: Area::Backup,
    params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, LOCAL_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc",
        Arg::Word("--vmid"),
        Arg::Word("{vmid}"),
        Arg::Word("--ostemplate"),
        Arg::Word("{archive}"),
        Arg::Word("--restore"),
        Arg::Word("1"),
        Arg::Word("--unprivileged"),
        Arg::Word("1"),
        Arg::Opt("storage", &["--storage", "{storage}"])
    ),
    view: View::Task,
    select: &[Select::Contains(
        "archive",
        ":backup/vzdump-lxc-",
        LXC_ARCHIVE,
    )],
    prechecks: &[
        Precheck::NewVmid("vmid"),
        Precheck::SpaceForArchive("archive", "storage"),
        Precheck::Trusted("archive"),
        Precheck::Trusted("storage"),
    ],
    variant_of: &[&BACKUP_RESTORE],
    fence: Some(Area::Ct),
    yields: Some(Yield::Guest("vmid")),
    ..ROW
};

/// `pxagent backup restore ARCHIVE --vmid VMID --force` with a VM's archive.
pub static BACKUP_RESTORE_OVERWRITE: Op = Op {
    id: "backup.restore-overwrite",
    cli: &["backup", "restore"],
    about: "Restore a VM backup over an existing VM",
    risk: Risk::Confirm,
    area: Area::Backup,
    params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, FORCE, LOCAL_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu",
        Arg::Word("--vmid"),
        Arg::Word("{vmid}"),
        Arg::Word("--archive"),
        Arg::Word("{archive}"),
        Arg::Word("--force"),
        Arg::Word("1"),
        Arg::Opt("storage", &["--storage", "{storage}"])
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes overwrite {vmid}",
        consequence: "this replaces VM {vmid} and its disks with the backup's content; what is there now is lost",
        hint: Some("restore to a new VMID instead (leave out --force) and compare first"),
    }),
    select: &[
        Select::Contains("archive", ":backup/vzdump-qemu-", QEMU_ARCHIVE),
        Select::Flag("force"),
    ],
    prechecks: &[
        Precheck::SpaceForArchive("archive", "storage"),
        Precheck::Trusted("archive"),
        Precheck::Trusted("storage"),
    ],
    variant_of: &[&BACKUP_RESTORE],
    fence: Some(Area::Vm),
    yields: Some(Yield::Guest("vmid")),
    ..ROW
};

/// `pxagent backup restore ARCHIVE --vmid VMID --force` with a container's archive.
pub static BACKUP_RESTORE_CT_OVERWRITE: Op = Op {
    id: "backup.restore-ct-overwrite",
    cli: &["backup", "restore"],
    about: "Restore a container backup over an existing one (always unprivileged)",
    risk: Risk::Confirm,
    area: Area::Backup,
    params: &[ARCHIVE, RESTORE_VMID, RESTORE_STORAGE, FORCE, LOCAL_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc",
        Arg::Word("--vmid"),
        Arg::Word("{vmid}"),
        Arg::Word("--ostemplate"),
        Arg::Word("{archive}"),
        Arg::Word("--restore"),
        Arg::Word("1"),
        Arg::Word("--unprivileged"),
        Arg::Word("1"),
        Arg::Word("--force"),
        Arg::Word("1"),
        Arg::Opt("storage", &["--storage", "{storage}"])
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes overwrite {vmid}",
        consequence: "this replaces container {vmid} and its volumes with the backup's content; what is there now is lost",
        hint: Some("restore to a new VMID instead (leave out --force) and compare first"),
    }),
    select: &[
        Select::Contains("archive", ":backup/vzdump-lxc-", LXC_ARCHIVE),
        Select::Flag("force"),
    ],
    prechecks: &[
        Precheck::SpaceForArchive("archive", "storage"),
        Precheck::Trusted("archive"),
        Precheck::Trusted("storage"),
    ],
    variant_of: &[&BACKUP_RESTORE_CT, &BACKUP_RESTORE_OVERWRITE],
    fence: Some(Area::Ct),
    yields: Some(Yield::Guest("vmid")),
    ..ROW
};

/// `pxagent backup prune VMID --keep-last N`
pub static BACKUP_PRUNE: Op = Op {
    id: "backup.prune",
    cli: &["backup", "prune"],
    about: "Delete all but the newest backups of a guest",
    risk: Risk::Confirm,
    area: Area::Backup,
    params: &[GUEST_VMID, KEEP_LAST, BACKUP_STORAGE, LOCAL_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/storage/{storage}/prunebackups",
        Arg::Word("--vmid"),
        Arg::Word("{vmid}"),
        Arg::Word("--prune-backups"),
        Arg::Word("keep-last={keep_last}")
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes prune {vmid}",
        consequence: "this deletes every backup of guest {vmid} on {storage} but the newest {keep_last}, irrecoverably",
        hint: None,
    }),
    ..ROW
};

/// `pxagent backup remove ARCHIVE`
pub static BACKUP_REMOVE: Op = Op {
    id: "backup.remove",
    cli: &["backup", "remove"],
    about: "Delete one backup archive",
    risk: Risk::Confirm,
    area: Area::Backup,
    params: &[ARCHIVE],
    tool: Tool::Pvesm,
    args: &[Arg::Word("free"), Arg::Word("{archive}")],
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes remove {archive}",
        consequence: "this deletes the backup {archive} irrecoverably",
        hint: None,
    }),
    ..ROW
};

const QEMU_ARCHIVE: &str = "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst";
const LXC_ARCHIVE: &str = "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst";

const GUEST_VMID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Positional,
    help: "the guest's id",
};
const BACKUP_STORAGE: Param = Param {
    name: "storage",
    kind: Kind::StorageId,
    how: How::Defaulted("local"),
    help: "the backups' storage",
};
const BACKUP_MODE: Param = Param {
    name: "mode",
    kind: Kind::Choice(&[same("snapshot"), same("suspend"), same("stop")]),
    how: How::Option,
    help: "how to get a consistent backup (Proxmox default: snapshot)",
};
const COMPRESS: Param = Param {
    name: "compress",
    kind: Kind::Choice(&[
        same("zstd"),
        same("gzip"),
        same("lzo"),
        Choice {
            cli: "none",
            wire: "0",
            keep_type: None,
        },
    ]),
    // zstd unless told otherwise, as the Proxmox GUI's backup dialog does (vzdump itself
    // would not compress: its `compress` defaults to 0).
    how: How::Defaulted("zstd"),
    help: "archive compression (none: uncompressed)",
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
    help: "the new guest's VMID",
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
const KEEP_LAST: Param = Param {
    name: "keep_last",
    kind: Kind::Count,
    how: How::Required,
    help: "how many of the newest backups to keep",
};
