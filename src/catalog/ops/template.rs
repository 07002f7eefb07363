//! Container templates: the ones Proxmox offers (aplinfo), downloading one into a storage,
//! and removing a downloaded one.

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
    prechecks: &[Precheck::Trusted("storage")],
    yields: Some(Yield::Volume("vztmpl", "template")),
    ..ROW
};

/// `pxagent template remove VOLUME`: like `iso remove`, for a downloaded template.
pub static TEMPLATE_REMOVE: Op = Op {
    id: "template.remove",
    cli: &["template", "remove"],
    about: "Delete a container template from a storage",
    risk: Risk::Confirm,
    area: Area::Storage,
    params: &[TEMPLATE_VOLUME, LOCAL_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/storage/{template:0}/content/{template:0}:{template:1}"
    ),
    view: View::Task,
    confirm: Some(Confirm {
        phrase: "yes remove {template}",
        consequence: "this deletes the container template {template} irrecoverably",
        hint: None,
    }),
    ..ROW
};

const TEMPLATE_VOLUME: Param = Param {
    name: "template",
    kind: Kind::TemplateVolume,
    how: How::Positional,
    help: "the template volume (see `pxagent storage content local --content vztmpl`)",
};
const TEMPLATE_NAME: Param = Param {
    name: "template",
    kind: Kind::TemplateName,
    how: How::Positional,
    help: "the template (see `pxagent template list`)",
};
