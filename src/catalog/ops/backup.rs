//! Backups of VMs and containers: create (vzdump), list, restore (to a new VMID, or over an
//! existing guest with confirmation), prune and remove; and the cluster's backup jobs
//! (`/cluster/backup`): list, show, create, remove (phrase) and run now.
//!
//! A job names its guests by a VMID list or a pool, so no VMID fence can hold it: fenced
//! renders leave job changes out. Never offered for a job: `--script`, `--dumpdir`,
//! `--tmpdir`, `--remove 0`, `--all`, `--exclude` and every other vzdump option but storage,
//! mode, compression, retention (`--prune-backups`) and the notes template.
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
    undo: Undo::None("restoring over a guest discards what it held"),
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
    undo: Undo::None("restoring over a container discards what it held"),
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

/// `pxagent backup job list`: the cluster's backup jobs, each with its next run.
pub static BACKUP_JOB_LIST: Op = Op {
    id: "backup.job.list",
    cli: &["backup", "job", "list"],
    about: "List the cluster's backup jobs",
    risk: Risk::Read,
    area: Area::Backup,
    params: &[],
    args: pvesh!("get", "/cluster/backup"),
    view: View::Table(&[
        ("id", "ID"),
        ("schedule", "SCHEDULE"),
        ("vmid", "VMIDS"),
        ("pool", "POOL"),
        ("storage", "STORAGE"),
        ("mode", "MODE"),
        ("enabled", "ON"),
        ("comment", "COMMENT"),
    ]),
    ..ROW
};

/// `pxagent backup job show ID`: every setting of one job.
pub static BACKUP_JOB_SHOW: Op = Op {
    id: "backup.job.show",
    cli: &["backup", "job", "show"],
    about: "Show a backup job's settings",
    risk: Risk::Read,
    area: Area::Backup,
    params: &[JOB],
    args: pvesh!("get", "/cluster/backup/{job}"),
    view: View::Object,
    ..ROW
};

/// `pxagent backup job create ID --schedule CAL (--vmids LIST | --pool POOL) [--storage S]
/// …`: a job PVE's scheduler runs on each guest's node.
pub static BACKUP_JOB_CREATE: Op = Op {
    id: "backup.job.create",
    cli: &["backup", "job", "create"],
    about: "Create a backup job that runs on a schedule",
    risk: Risk::Change,
    area: Area::Backup,
    params: &[
        JOB,
        SCHEDULE,
        JOB_VMIDS,
        JOB_POOL,
        BACKUP_STORAGE,
        BACKUP_MODE,
        COMPRESS,
        RETENTION,
        NOTES,
        COMMENT,
        DISABLED,
    ],
    args: pvesh!(
        "create",
        "/cluster/backup",
        Arg::Word("--id"),
        Arg::Word("{job}"),
        Arg::Word("--schedule"),
        Arg::Word("{schedule}"),
        Arg::Opt("vmids", &["--vmid", "{vmids}"]),
        Arg::Opt("pool", &["--pool", "{pool}"]),
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Opt("mode", &["--mode", "{mode}"]),
        Arg::Opt("compress", &["--compress", "{compress}"]),
        Arg::Opt("prune_backups", &["--prune-backups", "{prune_backups}"]),
        Arg::Opt("notes_template", &["--notes-template", "{notes_template}"]),
        Arg::Opt("comment", &["--comment", "{comment}"]),
        Arg::Opt("disabled", &["--enabled", "0"])
    ),
    view: View::Done,
    needs_one_of: &["vmids", "pool"],
    prechecks: &[Precheck::Trusted("storage")],
    ..ROW
};

/// `pxagent backup job remove ID` (phrase).
pub static BACKUP_JOB_REMOVE: Op = Op {
    id: "backup.job.remove",
    cli: &["backup", "job", "remove"],
    about: "Remove a backup job",
    risk: Risk::Confirm,
    area: Area::Backup,
    params: &[JOB],
    args: pvesh!("delete", "/cluster/backup/{job}"),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes remove job {job}",
        consequence: "the guests of backup job {job} are no longer backed up on its schedule (their backups stay)",
        hint: Some("see the job first: `pxagent backup job show {job}`"),
    }),
    ..ROW
};

/// `pxagent backup job run ID`: the job's backups now, as PVE's "Run now" starts them
/// (pve-manager `www/manager6/dc/Backup.js` `run_backup_now`: the job's settings POSTed to
/// `/nodes/NODE/vzdump`). pxagent reads the job ([`Op::fans_out`]) and the cluster's guests,
/// then sends one line per node that holds some of them, naming exactly those guests: the
/// job's own VMIDs, or its pool's members. `--job-id` tags the backups' notification with the
/// job, as PVE's scheduler does (only root@pam may set it; sudo runs pvesh as root). Every
/// value but the job's id is [`How::Staged`]: read from the job, checked by its kind, never
/// given. A job with a setting this line cannot carry (`--script`, `--dumpdir`, `--all`,
/// `--exclude`, `--bwlimit` …) is refused before anything runs.
pub static BACKUP_JOB_RUN: Op = Op {
    id: "backup.job.run",
    cli: &["backup", "job", "run"],
    about: "Run a backup job now, on each node that holds its guests",
    risk: Risk::Change,
    area: Area::Backup,
    params: &[
        JOB,
        RUN_NODE,
        RUN_VMIDS,
        RUN_STORAGE,
        RUN_MODE,
        RUN_COMPRESS,
        RUN_RETENTION,
        RUN_NOTES,
    ],
    args: pvesh!(
        "create",
        "/nodes/{node}/vzdump",
        Arg::Word("--job-id"),
        Arg::Word("{job}"),
        Arg::Word("--vmid"),
        Arg::Word("{vmids}"),
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Opt("mode", &["--mode", "{mode}"]),
        Arg::Opt("compress", &["--compress", "{compress}"]),
        Arg::Opt("prune_backups", &["--prune-backups", "{prune_backups}"]),
        Arg::Opt("notes_template", &["--notes-template", "{notes_template}"])
    ),
    view: View::JobRun,
    prechecks: &[Precheck::Trusted("storage")],
    fans_out: Some(&BACKUP_JOB_SHOW),
    ..ROW
};

/// The values of one node's run of a job ([`BACKUP_JOB_RUN`]), all read from the job.
const RUN_NODE: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Staged,
    help: "a node that holds some of the job's guests",
};
const RUN_VMIDS: Param = Param {
    name: "vmids",
    kind: Kind::VmidList,
    how: How::Staged,
    help: "the job's guests on that node",
};
const RUN_STORAGE: Param = Param {
    how: How::Staged,
    ..BACKUP_STORAGE
};
const RUN_MODE: Param = Param {
    how: How::Staged,
    ..BACKUP_MODE
};
const RUN_COMPRESS: Param = Param {
    how: How::Staged,
    ..COMPRESS
};
const RUN_RETENTION: Param = Param {
    how: How::Staged,
    ..RETENTION
};
const RUN_NOTES: Param = Param {
    how: How::Staged,
    ..NOTES
};

const JOB: Param = Param {
    name: "job",
    kind: Kind::ConfigId,
    how: How::Positional,
    help: "the job's id",
};
const SCHEDULE: Param = Param {
    name: "schedule",
    kind: Kind::Calendar,
    how: How::Required,
    help: "when it runs, a PVE calendar event (daily, sat 02:00, mon..fri 21:30, 0/30)",
};
const JOB_VMIDS: Param = Param {
    name: "vmids",
    kind: Kind::VmidList,
    how: How::Option,
    help: "the guests, VMIDs joined by ',' (or --pool)",
};
const JOB_POOL: Param = Param {
    name: "pool",
    kind: Kind::PoolId,
    how: How::Option,
    help: "every guest of this pool (or --vmids)",
};
const RETENTION: Param = Param {
    name: "prune_backups",
    kind: Kind::Retention,
    how: How::Option,
    help: "the backups to keep, e.g. keep-last=3,keep-daily=7 (default: the storage's)",
};
const NOTES: Param = Param {
    name: "notes_template",
    kind: Kind::Text,
    how: How::Option,
    help: "each backup's notes, e.g. {{guestname}} on {{node}}",
};
const DISABLED: Param = Param {
    name: "disabled",
    kind: Kind::Flag,
    how: How::Flag,
    help: "create it switched off",
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
