//! Storage: a node's storages, what one holds, and removing one from the cluster
//! configuration. ISOs and container templates, which are downloaded into a storage, are
//! in iso.rs and template.rs.

use super::*;

/// `pxagent storage list`
pub static STORAGE_LIST: Op = Op {
    id: "storage.list",
    cli: &["storage", "list"],
    about: "List a node's storages with usage",
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
    about: "Remove a storage from the cluster configuration (its data stays where it is)",
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
