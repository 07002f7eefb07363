//! Node reads: the cluster's nodes and one node's status.

use super::*;

/// `pxagent node list`
pub static NODE_LIST: Op = Op {
    id: "node.list",
    cli: &["node", "list"],
    about: "List the cluster's nodes with CPU, memory and uptime",
    risk: Risk::Read,
    area: Area::Node,
    params: &[],
    args: pvesh!("get", "/nodes"),
    view: View::Nodes,
    ..ROW
};

/// `pxagent node status NODE`
pub static NODE_STATUS: Op = Op {
    id: "node.status",
    cli: &["node", "status"],
    about: "Show one node's status (CPU, memory, load, kernel, version)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/status"),
    view: View::Object,
    ..ROW
};

const NODE_POS: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Positional,
    help: "the node's name",
};
