//! Storage: a node's storages, what one holds, and removing one from the cluster
//! configuration; adding directory, LVM-thin, ZFS and NFS storages, and enabling, disabling or
//! marking one as a mount point. ISOs and container templates, which are downloaded into a
//! storage, are in iso.rs and template.rs.
//!
//! Storages that carry secrets (PBS, CIFS: a password, an encryption key) are not agent
//! operations: the admin adds them with `pvesm add` (docs/usage.md). No row here takes a
//! password, a key, mount options or the `snippets` content type (hook scripts live there).

use super::*;

/// `pxagent storage list`
pub static STORAGE_LIST: Op = Op {
    id: "storage.list",
    cli: &["storage", "list"],
    about: "List a node's storages with usage and free space",
    risk: Risk::Read,
    area: Area::Storage,
    params: &[LOCAL_NODE],
    args: pvesh!("get", "/nodes/{node}/storage"),
    view: View::Storages,
    ..ROW
};

/// `pxagent storage content STORAGE`
pub static STORAGE_CONTENT: Op = Op {
    id: "storage.content",
    cli: &["storage", "content"],
    about: "List what a storage holds",
    risk: Risk::Read,
    area: Area::Storage,
    params: &[STORAGE, CONTENT, LOCAL_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/storage/{storage}/content",
        Arg::Opt("content", &["--content", "{content}"])
    ),
    view: View::Content,
    ..ROW
};

/// `pxagent storage remove STORAGE`
pub static STORAGE_REMOVE: Op = Op {
    id: "storage.remove",
    cli: &["storage", "remove"],
    about: "Remove a storage from the cluster configuration (its data stays)",
    risk: Risk::Confirm,
    area: Area::Storage,
    params: &[STORAGE],
    args: pvesh!("delete", "/storage/{storage}"),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes remove {storage}",
        consequence: "this removes storage {storage} from every node's configuration; guests with disks there stop working",
        hint: None,
    }),
    ..ROW
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
        same("iso"),
        same("backup"),
        same("vztmpl"),
        same("images"),
        same("rootdir"),
    ]),
    how: How::Option,
    help: "only this kind of content",
};

// --- adding and configuring storages -------------------------------------------

/// `pxagent storage add-dir STORAGE --path /mnt/NAME --content iso,backup`: `POST /storage
/// --type dir` (pve-storage `PVE/API2/Storage/Config.pm` `create`, `DirPlugin`). PVE creates
/// the directory and its content subdirectories. The host's sudoers admits only paths below its
/// storage roots (`sudoers render --storage-roots`, by default /mnt and /srv).
pub static STORAGE_ADD_DIR: Op = Op {
    id: "storage.add-dir",
    cli: &["storage", "add-dir"],
    about: "Add a directory storage below the host's storage roots (/mnt, /srv by default)",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[NEW_STORAGE, DIR_PATH, CONTENT_REQUIRED, IS_MOUNTPOINT],
    args: pvesh!(
        "create",
        "/storage",
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Word("--type"),
        Arg::Word("dir"),
        Arg::Word("--path"),
        Arg::Word("{path}"),
        Arg::Word("--content"),
        Arg::Word("{content}"),
        Arg::Opt("is_mountpoint", &["--is_mountpoint", "{is_mountpoint}"])
    ),
    view: View::Done,
    prechecks: &[Precheck::PathApart("path")],
    ..ROW
};

/// A step of `storage add-dir`: the cluster's storage configuration (`GET /storage`,
/// pve-storage `PVE/API2/Storage/Config.pm` `index`: each storage's `storage.cfg` entry with
/// its `storage`, `type`, `content`, `digest` and options such as `path`), read before a
/// directory storage is added so that its path lies neither inside nor above another
/// storage's. The client reads it, and the gate reads it again on the host.
pub static STORAGE_CONFIG: Op = Op {
    id: "storage.config",
    cli: &["storage", "config"],
    about: "The cluster's storage configuration (a step of `storage add-dir`)",
    risk: Risk::Read,
    area: Area::Storage,
    params: &[],
    args: pvesh!("get", "/storage"),
    view: View::Table(&[
        ("storage", "STORAGE"),
        ("type", "TYPE"),
        ("path", "PATH"),
        ("content", "CONTENT"),
    ]),
    step: true,
    ..ROW
};

/// `pxagent storage add-lvmthin STORAGE --vgname VG --thinpool POOL`: `POST /storage --type
/// lvmthin` (pve-storage `LvmThinPlugin`): an existing thin pool; nothing is created on disk.
pub static STORAGE_ADD_LVMTHIN: Op = Op {
    id: "storage.add-lvmthin",
    cli: &["storage", "add-lvmthin"],
    about: "Add an existing LVM thin pool as a storage",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[NEW_STORAGE, VGNAME, THINPOOL, CONTENT_OPTION],
    args: pvesh!(
        "create",
        "/storage",
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Word("--type"),
        Arg::Word("lvmthin"),
        Arg::Word("--vgname"),
        Arg::Word("{vgname}"),
        Arg::Word("--thinpool"),
        Arg::Word("{thinpool}"),
        Arg::Opt("content", &["--content", "{content}"])
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent storage add-zfspool STORAGE --pool POOL`: `POST /storage --type zfspool`
/// (pve-storage `ZFSPoolPlugin`): an existing pool or dataset; nothing is created on disk.
pub static STORAGE_ADD_ZFSPOOL: Op = Op {
    id: "storage.add-zfspool",
    cli: &["storage", "add-zfspool"],
    about: "Add an existing ZFS pool or dataset as a storage",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[NEW_STORAGE, ZFS_POOL, CONTENT_OPTION],
    args: pvesh!(
        "create",
        "/storage",
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Word("--type"),
        Arg::Word("zfspool"),
        Arg::Word("--pool"),
        Arg::Word("{pool}"),
        Arg::Opt("content", &["--content", "{content}"])
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent storage add-nfs STORAGE --server ADDR --export /PATH`: `POST /storage --type nfs`
/// (pve-storage `NFSPlugin`): PVE mounts the export below `/mnt/pve/STORAGE`. No mount options
/// of the agent's (`--options` could carry anything `mount` takes). Only on the servers the
/// admin named ([`Op::names_a_server`]): a share's files are written by its server and read
/// by root-run Proxmox code (restores, imports, boots), so the agent never picks the server.
pub static STORAGE_ADD_NFS: Op = Op {
    id: "storage.add-nfs",
    cli: &["storage", "add-nfs"],
    about: "Add an NFS export of a server the host's admin named (mounted noexec, nosuid)",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[NEW_STORAGE, SERVER, EXPORT, CONTENT_OPTION],
    args: pvesh!(
        "create",
        "/storage",
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Word("--type"),
        Arg::Word("nfs"),
        Arg::Word("--server"),
        Arg::Word("{server}"),
        Arg::Word("--export"),
        Arg::Word("{export}"),
        // Always: nothing on the share may run or act as a device on the host (a setuid-root
        // file on an export would be a root shell), and root never follows a symlink on it
        // (an "ISO" or a download path that leads to /dev/sda or /etc).
        Arg::Word("--options"),
        Arg::Word("nosuid,nodev,noexec,nosymfollow"),
        Arg::Opt("content", &["--content", "{content}"])
    ),
    view: View::Done,
    ..ROW
};

/// The command line of both `storage set` rows: one template, two values (the rows' rules
/// differ by the value alone, see [`Op::variant_values`]).
const SET_MOUNTPOINT: &[Arg] = pvesh!(
    "set",
    "/storage/{storage}",
    Arg::Word("--is_mountpoint"),
    Arg::Word("{is_mountpoint}")
);

/// `pxagent storage set STORAGE --is-mountpoint no`: `PUT /storage/{storage}` (pve-storage
/// `Config.pm` `update`): the storage's path is no longer taken for an external mount point.
/// `yes` is [`STORAGE_SET_MOUNTPOINT`], which can take a storage offline.
pub static STORAGE_SET: Op = Op {
    id: "storage.set",
    cli: &["storage", "set"],
    about: "Mark a directory storage as an external mount point or not (yes needs a disable's phrase)",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[STORAGE, IS_MOUNTPOINT_REQUIRED],
    args: SET_MOUNTPOINT,
    view: View::Done,
    ..ROW
};

/// `pxagent storage set STORAGE --is-mountpoint yes`: a variant of [`STORAGE_SET`]. PVE then
/// takes the storage as offline while nothing is mounted at its path, so on a storage whose
/// path is a plain directory (`local`) this is a disable: it needs `yes disable STORAGE`, is in
/// the profile of `storage.disable`, and counts as `storage.disable` for policy.
pub static STORAGE_SET_MOUNTPOINT: Op = Op {
    id: "storage.set-mountpoint",
    cli: &["storage", "set"],
    about: "Mark a directory storage as an external mount point (offline while nothing is mounted)",
    risk: Risk::Confirm,
    area: Area::Storage,
    params: &[STORAGE, IS_MOUNTPOINT_REQUIRED],
    args: SET_MOUNTPOINT,
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes disable {storage}",
        consequence: "this marks storage {storage} as an external mount point: while nothing is mounted at its path it is offline on that node, so guests with disks there no longer start and backups to it fail",
        hint: Some("`pxagent storage set {storage} --is-mountpoint no` turns it back"),
    }),
    select: &[Select::Contains("is_mountpoint", "yes", "yes")],
    variant_of: &[&STORAGE_SET],
    counts_as: &[&STORAGE_DISABLE],
    ..ROW
};

/// `pxagent storage enable STORAGE`: `PUT /storage/{storage} --disable 0`.
pub static STORAGE_ENABLE: Op = Op {
    id: "storage.enable",
    cli: &["storage", "enable"],
    about: "Enable a storage on every node",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[STORAGE],
    args: pvesh!(
        "set",
        "/storage/{storage}",
        Arg::Word("--disable"),
        Arg::Word("0")
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent storage disable STORAGE`: `PUT /storage/{storage} --disable 1`. Guests with disks
/// there no longer start, and backups to it fail: a confirm op.
pub static STORAGE_DISABLE: Op = Op {
    id: "storage.disable",
    cli: &["storage", "disable"],
    about: "Disable a storage on every node (its data stays; guests using it stop)",
    risk: Risk::Confirm,
    area: Area::Storage,
    params: &[STORAGE],
    args: pvesh!(
        "set",
        "/storage/{storage}",
        Arg::Word("--disable"),
        Arg::Word("1")
    ),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes disable {storage}",
        consequence: "this disables storage {storage} on every node; guests with disks there no longer start and backups to it fail",
        hint: Some("`pxagent storage enable {storage}` turns it back on"),
    }),
    ..ROW
};

const NEW_STORAGE: Param = Param {
    name: "storage",
    kind: Kind::StorageId,
    how: How::Positional,
    help: "the new storage's id",
};
const DIR_PATH: Param = Param {
    name: "path",
    kind: Kind::StoragePath,
    how: How::Required,
    help: "the directory, below the host's storage roots (/mnt or /srv by default)",
};
const CONTENT_REQUIRED: Param = Param {
    name: "content",
    kind: Kind::ContentList,
    how: How::Required,
    help: "what it may hold, joined by ',': iso, vztmpl, backup, images, rootdir, import",
};
const CONTENT_OPTION: Param = Param {
    name: "content",
    kind: Kind::ContentList,
    how: How::Option,
    help: "what it may hold, joined by ',' (default: images,rootdir)",
};
const YES_NO: Kind = Kind::Choice(&[same("yes"), same("no")]);
const IS_MOUNTPOINT: Param = Param {
    name: "is_mountpoint",
    kind: YES_NO,
    how: How::Option,
    help: "yes: the path is an external mount point (offline while nothing is mounted there)",
};
const IS_MOUNTPOINT_REQUIRED: Param = Param {
    name: "is_mountpoint",
    kind: YES_NO,
    how: How::Required,
    help: "yes: the path is an external mount point (offline while nothing is mounted there; needs `yes disable STORAGE`); no: it is not",
};
const VGNAME: Param = Param {
    name: "vgname",
    kind: Kind::VgName,
    how: How::Required,
    help: "the LVM volume group",
};
const THINPOOL: Param = Param {
    name: "thinpool",
    kind: Kind::VgName,
    how: How::Required,
    help: "the thin pool in that volume group",
};
const ZFS_POOL: Param = Param {
    name: "pool",
    kind: Kind::ZfsPool,
    how: How::Required,
    help: "the ZFS pool or dataset, e.g. rpool/data",
};
const SERVER: Param = Param {
    name: "server",
    kind: Kind::Server,
    how: How::Required,
    help: "the NFS server: an IPv4 address or a DNS name",
};
const EXPORT: Param = Param {
    name: "export",
    kind: Kind::ExportPath,
    how: How::Required,
    help: "the export's path on the server, e.g. /export/pve",
};
