//! ISO images: list those on a storage, let the host download one from a URL.

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
        Arg::Opt(
            "checksum",
            &[
                "--checksum-algorithm",
                "{checksum:0}",
                "--checksum",
                "{checksum:1}",
            ],
        )
    ),
    view: View::Task,
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
const CHECKSUM: Param = Param {
    name: "checksum",
    kind: Kind::Checksum,
    how: How::Option,
    help: "verify the download, e.g. sha256:HEX",
};
