//! ISO images: list those on a storage, let the host download one from a URL, send one from
//! this machine, remove one.

use super::*;

/// `pxagent iso download URL`
pub static ISO_DOWNLOAD: Op = Op {
    id: "iso.download",
    cli: &["iso", "download"],
    about: "Let the host download an ISO image into a storage",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[URL, LOCAL_STORAGE, FILENAME, CHECKSUM, LOCAL_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/storage/{storage}/download-url",
        Arg::Word("--content"),
        Arg::Word("iso"),
        Arg::Word("--url"),
        Arg::Word("{url}"),
        Arg::Word("--filename"),
        Arg::Word("{filename}"),
        DOWNLOAD_CHECKSUM
    ),
    view: View::Task,
    prechecks: &[Precheck::Trusted("storage")],
    yields: Some(Yield::Volume("iso", "filename")),
    ..ROW
};

/// `pxagent iso upload FILE`: the file's bytes go to the command's stdin over the SSH channel,
/// and pxagent's root-side helper (`helper/`, [`Tool::Helper`]) writes them into the storage's
/// `template/iso`: it finds the directory itself from the storage's config, follows no
/// symlink, refuses an existing name or a file system that would end fuller than
/// `--max-used` percent, and publishes the image only when exactly `size` bytes with this
/// `sha256` arrived. PVE's own upload endpoint takes an HTTP multipart temp file, which no
/// `pvesh` line can give it. The helper runs on the node pxagent is connected to, so the op
/// has no `--node`: the storage must be one that node has (`local` is).
pub static ISO_UPLOAD: Op = Op {
    id: "iso.upload",
    cli: &["iso", "upload"],
    about: "Send an ISO image file to a directory storage",
    risk: Risk::Change,
    area: Area::Storage,
    tool: Tool::Helper,
    params: &[
        LOCAL_FILE,
        LOCAL_STORAGE,
        ISO_NAME,
        UPLOAD_CHECKSUM,
        MAX_USED,
        SIZE,
        SHA256,
    ],
    args: &[
        Arg::Word("iso-receive"),
        Arg::Word("--max-used"),
        Arg::Word("{max_used}"),
        Arg::Word("{storage}"),
        Arg::Word("{name}"),
        Arg::Word("{size}"),
        Arg::Word("{sha256}"),
    ],
    view: View::Upload,
    prechecks: &[Precheck::Trusted("storage")],
    local: &["file", "checksum"],
    ..ROW
};

/// `pxagent iso list`
pub static ISO_LIST: Op = Op {
    id: "iso.list",
    cli: &["iso", "list"],
    about: "List the ISO images on a storage",
    risk: Risk::Read,
    area: Area::Storage,
    params: &[LOCAL_STORAGE, LOCAL_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/storage/{storage}/content",
        Arg::Word("--content"),
        Arg::Word("iso")
    ),
    view: View::Content,
    ..ROW
};

/// `pxagent iso remove VOLUME`: `DELETE …/storage/{storage}/content/{volume}` (an `imgdel`
/// task; the volume id carries its own storage, which the path names as well).
pub static ISO_REMOVE: Op = Op {
    id: "iso.remove",
    cli: &["iso", "remove"],
    about: "Delete an ISO image from a storage",
    risk: Risk::Confirm,
    area: Area::Storage,
    params: &[ISO_VOLUME, LOCAL_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/storage/{iso:0}/content/{iso:0}:{iso:1}"
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes remove {iso}",
        consequence: "this deletes the ISO image {iso} irrecoverably; VMs that still boot from it lose their CD",
        hint: None,
    }),
    ..ROW
};

const ISO_VOLUME: Param = Param {
    name: "iso",
    kind: Kind::IsoVolume,
    how: How::Positional,
    help: "the ISO volume (see `pxagent iso list`)",
};
const URL: Param = Param {
    name: "url",
    kind: Kind::Url,
    how: How::Positional,
    help: "where the host downloads the ISO from",
};
const FILENAME: Param = Param {
    name: "filename",
    kind: Kind::FileName,
    how: How::BasenameOf("url"),
    help: "the file name on the storage (default: the URL's last path segment)",
};
const LOCAL_FILE: Param = Param {
    name: "file",
    kind: Kind::LocalFile,
    how: How::Positional,
    help: "the file to send (on the machine pxagent runs on)",
};
const ISO_NAME: Param = Param {
    name: "name",
    kind: Kind::IsoName,
    how: How::BasenameOf("file"),
    help: "the image's name on the storage (default: the file's name)",
};
const UPLOAD_CHECKSUM: Param = Param {
    name: "checksum",
    kind: Kind::Checksum,
    how: How::Option,
    help: "the file's sha256:HEX (checked here before a byte is sent)",
};
const MAX_USED: Param = Param {
    name: "max_used",
    kind: Kind::FillPercent,
    how: How::Defaulted("90"),
    help: "the most % full the storage may be after it (the host's sudoers may cap it lower)",
};
const SIZE: Param = Param {
    name: "size",
    kind: Kind::ByteSize,
    how: How::Staged,
    help: "the file's size in bytes",
};
const SHA256: Param = Param {
    name: "sha256",
    kind: Kind::Sha256,
    how: How::Staged,
    help: "the file's SHA-256",
};
