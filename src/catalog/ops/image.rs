//! Cloud images: let the host download a disk image into a storage's `import` content (PVE
//! 8.4+), list the images there, remove one. `vm create --image` imports one onto a new VM's disk.

use super::*;

/// `pxagent image download URL`: `download-url` with `content=import`. The host fetches the
/// URL itself (the policy refuses addresses inside the host's own network, as for ISOs). A
/// `.img` URL is stored as `.qcow2` (cloud `.img` files are qcow2, and PVE stores import
/// content only as `.qcow2`, `.raw` or `.vmdk`); `--filename NAME.raw` for a raw one.
pub static IMAGE_DOWNLOAD: Op = Op {
    id: "image.download",
    cli: &["image", "download"],
    about: "Let the host download a cloud disk image into a storage's import content",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[URL, LOCAL_STORAGE, IMAGE_NAME, CHECKSUM, LOCAL_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/storage/{storage}/download-url",
        Arg::Word("--content"),
        Arg::Word("import"),
        Arg::Word("--url"),
        Arg::Word("{url}"),
        Arg::Word("--filename"),
        Arg::Word("{filename}"),
        DOWNLOAD_CHECKSUM
    ),
    view: View::Task,
    prechecks: &[Precheck::Trusted("storage")],
    yields: Some(Yield::Volume("import", "filename")),
    ..ROW
};

/// `pxagent image list`
pub static IMAGE_LIST: Op = Op {
    id: "image.list",
    cli: &["image", "list"],
    about: "List the disk images on a storage's import content",
    risk: Risk::Read,
    area: Area::Storage,
    params: &[LOCAL_STORAGE, LOCAL_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/storage/{storage}/content",
        Arg::Word("--content"),
        Arg::Word("import")
    ),
    view: View::Content,
    ..ROW
};

/// `pxagent image remove VOLUME`: `DELETE …/storage/{storage}/content/{volume}` (an `imgdel`
/// task), as for ISOs. VMs imported from the image keep their own copy.
pub static IMAGE_REMOVE: Op = Op {
    id: "image.remove",
    cli: &["image", "remove"],
    about: "Delete a disk image from a storage's import content",
    risk: Risk::Confirm,
    area: Area::Storage,
    params: &[IMPORT_VOLUME, LOCAL_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/storage/{image:0}/content/{image:0}:{image:1}"
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes remove {image}",
        consequence: "this deletes the disk image {image} irrecoverably (VMs made from it keep their own disks)",
        hint: None,
    }),
    ..ROW
};

const IMPORT_VOLUME: Param = Param {
    name: "image",
    kind: Kind::ImportVolume,
    how: How::Positional,
    help: "the image volume (see `pxagent image list`)",
};
const URL: Param = Param {
    name: "url",
    kind: Kind::Url,
    how: How::Positional,
    help: "where the host downloads the image from",
};
const IMAGE_NAME: Param = Param {
    name: "filename",
    kind: Kind::ImageFile,
    how: How::BasenameOf("url"),
    help: "the file name on the storage (default: the URL's last path segment, .img as .qcow2)",
};
