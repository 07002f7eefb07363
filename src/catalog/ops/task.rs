//! Proxmox task reads: a task's status and log, a node's task list. The engine also uses
//! these to follow the task an action started.

use super::*;

/// `pxagent task status UPID`
pub static TASK_STATUS: Op = Op {
    id: "task.status",
    cli: &["task", "status"],
    about: "Show whether a task is running and how it ended",
    risk: Risk::Read,
    area: Area::Task,
    params: &[UPID, UPID_NODE],
    args: pvesh!("get", "/nodes/{node}/tasks/{upid}/status"),
    view: View::TaskStatus,
    ..ROW
};

/// `pxagent task list`
pub static TASK_LIST: Op = Op {
    id: "task.list",
    cli: &["task", "list"],
    about: "List a node's recent and running tasks, newest first",
    risk: Risk::Read,
    area: Area::Task,
    params: &[LOCAL_NODE, VMID_FILTER],
    args: pvesh!(
        "get",
        "/nodes/{node}/tasks",
        Arg::Word("--source"),
        Arg::Word("all"),
        Arg::Opt("vmid", &["--vmid", "{vmid}"])
    ),
    view: View::Tasks,
    ..ROW
};

/// `pxagent task log UPID`
pub static TASK_LOG: Op = Op {
    id: "task.log",
    cli: &["task", "log"],
    about: "Show a task's log",
    risk: Risk::Read,
    area: Area::Task,
    params: &[UPID, UPID_NODE, LIMIT],
    args: pvesh!(
        "get",
        "/nodes/{node}/tasks/{upid}/log",
        Arg::Opt("limit", &["--limit", "{limit}"])
    ),
    view: View::Log,
    ..ROW
};

const UPID: Param = Param {
    name: "upid",
    kind: Kind::Upid,
    how: How::Positional,
    help: "the task's UPID",
};
const UPID_NODE: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Node(NodeFrom::Upid),
    help: "the node that ran the task (default: the node named in the UPID)",
};
const LIMIT: Param = Param {
    name: "limit",
    kind: Kind::Count,
    how: How::Option,
    help: "how many log lines to fetch (Proxmox default: 50)",
};
