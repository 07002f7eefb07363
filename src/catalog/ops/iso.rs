//! ISO images: list those on a storage, let the host download one from a URL, remove one.

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
