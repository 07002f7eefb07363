//! Container templates: the ones Proxmox offers (aplinfo), and downloading one into a
//! storage.

use super::*;

/// `pxagent template list`
pub static TEMPLATE_LIST: Op = Op {
    id: "template.list",
    cli: &["template", "list"],
    about: "List the container templates Proxmox offers",
    risk: Risk::Read,
    area: Area::Storage,
    params: &[LOCAL_NODE],
    args: pvesh!("get", "/nodes/{node}/aplinfo"),
    view: View::Table(&[
        ("template", "TEMPLATE"),
        ("section", "SECTION"),
        ("headline", "DESCRIPTION"),
    ]),
    ..ROW
};

/// `pxagent template download TEMPLATE`
pub static TEMPLATE_DOWNLOAD: Op = Op {
    id: "template.download",
    cli: &["template", "download"],
    about: "Download a container template into a storage",
    risk: Risk::Change,
    area: Area::Storage,
    params: &[TEMPLATE_NAME, LOCAL_STORAGE, LOCAL_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/aplinfo",
        Arg::Word("--storage"),
        Arg::Word("{storage}"),
        Arg::Word("--template"),
        Arg::Word("{template}")
    ),
    view: View::Task,
    ..ROW
};

const TEMPLATE_NAME: Param = Param {
    name: "template",
    kind: Kind::TemplateName,
    how: How::Positional,
    help: "the template (see `pxagent template list`)",
};
