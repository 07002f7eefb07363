//! Proxmox tasks: a task's status and log, a node's task list, waiting for a task to end and
//! stopping one. The engine also uses these to follow the task an action started, and the MCP
//! server stops the task of a cancelled call with `task.stop`.

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

/// `task list --vmid`: PVE's own filter of `/nodes/{node}/tasks`.
const TASK_VMID_FILTER: Param = Param {
    help: "only this guest's tasks",
    ..VMID_FILTER
};

/// `pxagent task list`
pub static TASK_LIST: Op = Op {
    id: "task.list",
    cli: &["task", "list"],
    about: "List a node's recent and running tasks, newest first",
    risk: Risk::Read,
    area: Area::Task,
    params: &[LOCAL_NODE, TASK_VMID_FILTER],
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

/// `pxagent task wait UPID [--timeout S]`: a read loop over the task's status (the same
/// command line as `task status`, so the same sudoers rule and gate verdict).
pub static TASK_WAIT: Op = Op {
    id: "task.wait",
    cli: &["task", "wait"],
    about: "Wait for a task to end (exit 0 OK, 1 failed, 7 --timeout ran out)",
    risk: Risk::Read,
    area: Area::Task,
    params: &[UPID, UPID_NODE],
    args: pvesh!("get", "/nodes/{node}/tasks/{upid}/status"),
    view: View::Wait,
    ..ROW
};

/// `pxagent task stop UPID`: Proxmox's "Stop a task" (`DELETE /nodes/{node}/tasks/{upid}`)
/// on the task's own node, which signals the worker and returns at once (no task of its own).
pub static TASK_STOP: Op = Op {
    id: "task.stop",
    cli: &["task", "stop"],
    about: "Stop a running task",
    risk: Risk::Change,
    area: Area::Task,
    params: &[UPID, UPID_NODE],
    args: pvesh!("delete", "/nodes/{node}/tasks/{upid}"),
    view: View::Done,
    interrupts: true,
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
