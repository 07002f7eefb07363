//! Cluster-wide reads: the Proxmox version, membership and quorum, the resource list, the
//! next free VMID and every node's recent tasks. All read-only, all
//! `pvesh get`.

use super::*;

/// `pxagent version`
pub static PVE_VERSION: Op = Op {
    id: "pve.version",
    cli: &["version"],
    about: "Show the Proxmox VE version of the host",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[],
    args: pvesh!("get", "/version"),
    view: View::Object,
    ..ROW
};

/// `pxagent cluster status`
pub static CLUSTER_STATUS: Op = Op {
    id: "cluster.status",
    cli: &["cluster", "status"],
    about: "Show cluster membership and quorum",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[],
    args: pvesh!("get", "/cluster/status"),
    view: View::ClusterStatus,
    ..ROW
};

/// `pxagent cluster resources`
pub static CLUSTER_RESOURCES: Op = Op {
    id: "cluster.resources",
    cli: &["cluster", "resources"],
    about: "List every guest, node and storage of the cluster",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[RESOURCE_TYPE],
    args: pvesh!(
        "get",
        "/cluster/resources",
        Arg::Opt("type", &["--type", "{type}"])
    ),
    view: View::Resources(None),
    ..ROW
};

/// `pxagent cluster nextid`
pub static CLUSTER_NEXTID: Op = Op {
    id: "cluster.nextid",
    cli: &["cluster", "nextid"],
    about: "Show the next free VMID",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[],
    args: pvesh!("get", "/cluster/nextid"),
    view: View::Number,
    ..ROW
};

/// `pxagent cluster tasks`: the running and recent tasks of every node (each node shares
/// its running tasks and its last finished ones through the cluster file system), newest
/// first, each with `failed`. `GET /cluster/tasks` takes no parameters (PVE 9.1.11 and 9.2), so
/// the filters are applied by the client to its answer ([`Op::local`]).
pub static CLUSTER_TASKS: Op = Op {
    id: "cluster.tasks",
    cli: &["cluster", "tasks"],
    about: "List the running and recent tasks of every node, newest first",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[TASK_ERRORS, TASK_SINCE, TASK_LIMIT, TASK_VMID],
    args: pvesh!("get", "/cluster/tasks"),
    view: View::Tasks,
    local: &["errors", "since", "limit", "vmid"],
    ..ROW
};

const RESOURCE_TYPE: Param = Param {
    name: "type",
    // `ct` is not a /cluster/resources type: it asks for `vm` and the output keeps lxc entries.
    kind: Kind::Choice(&[
        Choice {
            cli: "vm",
            wire: "vm",
            keep_type: Some("qemu"),
        },
        Choice {
            cli: "ct",
            wire: "vm",
            keep_type: Some("lxc"),
        },
        same("node"),
        same("storage"),
    ]),
    how: How::Option,
    help: "only resources of this type",
};

const TASK_ERRORS: Param = Param {
    name: "errors",
    kind: Kind::Flag,
    how: How::Flag,
    help: "only tasks that failed",
};
const TASK_SINCE: Param = Param {
    name: "since",
    kind: Kind::Epoch,
    how: How::Option,
    help: "only tasks started then or later",
};
const TASK_LIMIT: Param = Param {
    name: "limit",
    kind: Kind::Count,
    how: How::Option,
    help: "at most this many tasks, the newest",
};
const TASK_VMID: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Option,
    help: "only this guest's tasks",
};
