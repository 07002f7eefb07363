//! Node reads: the cluster's nodes, one node's status, its Proxmox version, its metrics
//! history and its network interfaces.

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
    view: View::NodeStatus,
    ..ROW
};

/// `pxagent node version NODE`
pub static NODE_VERSION: Op = Op {
    id: "node.version",
    cli: &["node", "version"],
    about: "Show one node's Proxmox VE version (nodes differ while a cluster is upgraded)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/version"),
    view: View::Object,
    ..ROW
};

/// `pxagent node rrd NODE`
pub static NODE_RRD: Op = Op {
    id: "node.rrd",
    cli: &["node", "rrd"],
    about: "Show one node's metrics history (CPU, load, memory, network, I/O wait)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS, TIMEFRAME, RRD_CF],
    args: pvesh!(
        "get",
        "/nodes/{node}/rrddata",
        Arg::Word("--timeframe"),
        Arg::Word("{timeframe}"),
        Arg::Opt("cf", &["--cf", "{cf}"])
    ),
    view: View::Rrd,
    ..ROW
};

/// `pxagent node network NODE`
pub static NODE_NETWORK: Op = Op {
    id: "node.network",
    cli: &["node", "network"],
    about: "List one node's network interfaces and bridges",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/network"),
    view: View::Table(&[
        ("iface", "IFACE"),
        ("type", "TYPE"),
        ("active", "ACTIVE"),
        ("method", "METHOD"),
        ("cidr", "ADDRESS"),
        ("gateway", "GATEWAY"),
        ("bridge_ports", "PORTS"),
    ]),
    ..ROW
};

const NODE_POS: Param = Param {
    name: "node",
    kind: Kind::Node,
    how: How::Positional,
    help: "the node's name",
};
